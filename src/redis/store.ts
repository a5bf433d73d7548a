/**
 * The fleet's bind ledger in Redis: one hash per epoch, one field per agent, each write a Lua
 * compare-and-set on the fleet's epoch and on the record's version (`scripts.ts`, `LEDGER_CAS`).
 *
 * Writes come from tool handlers, so they must never fail or wait long because of Redis:
 *  - a write is tried once, under `writeTimeoutMs`; the version of the last record this replica
 *    saw is kept, so an uncontended write is one round trip;
 *  - if Redis cannot be reached (down, reconnecting, too slow), the write is held in a bounded
 *    buffer ({@link WriteBuffer}) and the call goes on; while Redis is known to be down, writes are
 *    held at once, without waiting. Held writes are retried in the background and written, in
 *    order, as soon as Redis answers again — unless their epoch has passed meanwhile;
 *  - a write refused because its epoch is no longer the fleet's rejects with `StaleEpochError`
 *    (the ledger drops it); the refusal names the current epoch, which this replica adopts.
 * A write whose deadline passed may still have landed (the command was sent): it is held and
 * written again, so writes are at least once. The ledger's changes are idempotent (set a time that
 * only moves forward, a nonce, a request), so a change applied twice is the same change.
 * Reads (`get`) are not buffered: a status lookup while Redis is down fails, and the watchdog
 * treats a failed lookup as "nothing happens".
 */
import { describeError, McpSupervisorError } from '../errors.js';
import type { Clock, TimerHandle } from '../clock.js';
import { isStaleEpochError, StaleEpochError } from '../gateway/fleet.js';
import type { BindRecord, BindStore, ProbeRecord } from '../gateway/store.js';
import { applyChain, recordKey, WriteBuffer, type Mutation, type Pending } from './buffer.js';
import { isUnavailable, type RedisLink } from './connection.js';
import type { RedisEpochs } from './epoch.js';
import type { RedisCoordinatorEvents, WriteStats } from './events.js';
import { epochSeq, ledgerKey, type FleetKeys } from './keys.js';

/** Versions of records this replica saw last, kept for one-round-trip writes. */
const VERSION_CACHE_SIZE = 10_000;
/** Version conflicts one write resolves before it is held for a later retry. */
const MAX_CAS_ATTEMPTS = 5;
/** Buffered writes written concurrently once Redis is back. */
const FLUSH_CONCURRENCY = 8;

/** Redis has no epoch (it lost its data) or an older one than the write: hold it and re-sync. */
class EpochLostError extends Error {}
/** The write's own deadline passed between attempts. */
class DeadlineError extends Error {}
/** Too many version conflicts in a row: Redis is fine, the record is hot. */
class ContentionError extends Error {}

/** Settings of {@link RedisBindStore}. */
export interface RedisBindStoreOptions {
  link: RedisLink;
  keys: FleetKeys;
  epochs: RedisEpochs;
  clock: Clock;
  writeTimeoutMs: number;
  maxBufferedWrites: number;
  flushIntervalMs: number;
  stats: WriteStats;
  emit: <Name extends keyof RedisCoordinatorEvents>(event: Name, payload: RedisCoordinatorEvents[Name]) => void;
  onError: (error: unknown, context: string) => void;
}

interface Versioned {
  version: number;
  record: BindRecord | undefined;
}

/** {@link BindStore} on Redis; see the module comment. */
export class RedisBindStore implements BindStore {
  readonly #o: RedisBindStoreOptions;
  readonly #buffer: WriteBuffer;
  readonly #versions = new Map<string, Versioned>();
  /** Set by a timeout on a ready connection (a stalled Redis): hold writes until one gets through. */
  #suspect = false;
  #episode = { active: false, flushed: 0, stale: 0 };
  #dropped = 0;
  #flushing: Promise<void> | undefined;
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(options: RedisBindStoreOptions) {
    this.#o = options;
    this.#buffer = new WriteBuffer(options.maxBufferedWrites, (count) => this.#onDrop(count));
    // Versions of another epoch's records are useless once the epoch moved.
    options.epochs.subscribe(() => this.#versions.clear());
  }

  /** {@inheritDoc BindStore.get} — rejects when Redis cannot be reached within the command timeout. */
  async get(epoch: string, agent: string): Promise<BindRecord | undefined> {
    const raw = await this.#o.link.run((c) => c.hGet(ledgerKey(this.#o.keys, epoch), agent));
    const key = recordKey(epoch, agent);
    let record: BindRecord | undefined;
    if (typeof raw === 'string') {
      const stored = splitStored(raw);
      record = decodeRecord(stored.body);
      this.#remember(key, { version: stored.version, record });
    }
    // Read your own writes: what this replica holds for the record has happened, just not in Redis yet.
    const chain = this.#buffer.chainOf(key);
    return chain === undefined ? record : Object.freeze(applyChain(chain, record));
  }

  /** {@inheritDoc BindStore.update} — see the module comment for what happens when Redis is unreachable. */
  update(epoch: string, agent: string, mutate: Mutation): Promise<BindRecord> {
    if (this.#closed) return Promise.reject(new McpSupervisorError('HOST_CLOSED', 'The Redis coordinator is closed: bind records are no longer written'));
    const key = recordKey(epoch, agent);
    if (this.#buffer.holds(key) || this.#suspect || !this.#o.link.up) {
      try {
        return Promise.resolve(this.#hold(epoch, agent, mutate, key));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.#direct(epoch, agent, mutate, key);
  }

  /** {@inheritDoc BindStore.retainOnly} */
  async retainOnly(epoch: string): Promise<void> {
    await this.#o.link.run((c) => c.ledgerRetain([this.#o.keys.ledgers], [epoch, this.#o.keys.ledgerPrefix]));
  }

  /** Writes held right now. */
  get pending(): number {
    return this.#buffer.size;
  }

  /** Redis is reachable again: write what is held. */
  kick(): void {
    this.#suspect = false;
    this.#flushSoon(0);
  }

  /** Stops retrying; writes what it can within `timeoutMs`, drops (and counts) the rest. */
  async close(timeoutMs: number): Promise<void> {
    if (this.#closed) return;
    this.#o.clock.clearTimeout(this.#timer);
    if (this.#buffer.size > 0 && this.#o.link.up) {
      const deadline = performance.now() + timeoutMs;
      await this.#flush(deadline);
    }
    this.#closed = true;
    await this.#flushing;
    const left = this.#buffer.clear();
    if (left > 0) {
      this.#o.stats.dropped += left;
      this.#o.stats.pending = 0;
      this.#o.emit('writes:dropped', { dropped: left, pending: 0 });
    }
  }

  async #direct(epoch: string, agent: string, mutate: Mutation, key: string): Promise<BindRecord> {
    try {
      const record = await this.#cas(epoch, agent, mutate, key, performance.now() + this.#o.writeTimeoutMs);
      this.#o.stats.direct++;
      return record;
    } catch (error) {
      if (isStaleEpochError(error)) {
        this.#o.stats.stale++;
        throw error;
      }
      if (this.#closed || !isRetryable(error)) {
        this.#o.stats.failed++;
        throw error;
      }
      // Slow or gone: stop making tool calls wait until a background write gets through.
      if (error instanceof DeadlineError || isUnavailable(error)) this.#suspect = true;
      return this.#hold(epoch, agent, mutate, key);
    }
  }

  /** One record's compare-and-set loop: epoch fenced, version checked, re-applied on conflict. */
  async #cas(epoch: string, agent: string, mutate: Mutation, key: string, deadline: number): Promise<BindRecord> {
    let seen = this.#versions.get(key);
    for (let attempt = 1; attempt <= MAX_CAS_ATTEMPTS; attempt++) {
      const next = Object.freeze(mutate(seen?.record));
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new DeadlineError('the write deadline passed');
      const args = [epoch, agent, String(seen?.version ?? 0), JSON.stringify(next)];
      const reply = await this.#o.link.run((c) => c.ledgerCas([this.#o.keys.epoch, ledgerKey(this.#o.keys, epoch)], args), remaining);
      if (!Array.isArray(reply)) throw new Error(`unexpected ledger reply ${JSON.stringify(reply)}`);
      const [status, first, second] = reply.map(String);
      if (status === 'ok') {
        this.#remember(key, { version: Number(first), record: next });
        return next;
      }
      if (status === 'conflict') {
        this.#o.stats.conflicts++;
        seen = { version: Number(first), record: second === '' ? undefined : decodeRecord(second ?? '') };
        continue;
      }
      if (status === 'stale') {
        const current = first ?? '';
        this.#o.epochs.refusedFor(current);
        if (current === '' || epochSeq(current) < epochSeq(epoch)) throw new EpochLostError(`Redis holds ${current || 'no'} epoch`);
        throw new StaleEpochError(epoch, current);
      }
      throw new Error(`unexpected ledger reply ${JSON.stringify(reply)}`);
    }
    // Heavy contention on one agent's record: let the background writer take it.
    throw new ContentionError(`${MAX_CAS_ATTEMPTS} version conflicts in a row`);
  }

  #hold(epoch: string, agent: string, mutate: Mutation, key: string): BindRecord {
    // Applied to the last copy seen only to answer the caller; the held write is re-applied to
    // whatever Redis holds when it is finally written.
    const expected = Object.freeze(mutate(this.#versions.get(key)?.record));
    this.#buffer.add(epoch, agent, mutate);
    this.#o.stats.buffered++;
    this.#o.stats.pending = this.#buffer.size;
    if (!this.#episode.active) {
      this.#episode = { active: true, flushed: 0, stale: 0 };
      this.#o.emit('writes:buffered', { pending: this.#buffer.size });
    }
    this.#flushSoon(this.#o.link.up && !this.#suspect ? 0 : this.#o.flushIntervalMs);
    return expected;
  }

  #flushSoon(delayMs: number): void {
    if (this.#closed || this.#timer !== undefined || this.#buffer.size === 0) return;
    this.#timer = this.#o.clock.setTimeout(() => {
      this.#timer = undefined;
      if (this.#flushing !== undefined) return;
      this.#flushing = this.#flush(Number.POSITIVE_INFINITY).then((complete) => {
        this.#flushing = undefined;
        // Writes that queued behind a key in flight go at once; a round that failed backs off.
        this.#flushSoon(complete && this.#o.link.up && !this.#suspect ? 0 : this.#o.flushIntervalMs);
      });
    }, delayMs);
  }

  /**
   * Writes held entries until none is left, Redis fails again, or `deadline` passes; resolves
   * false when the round stopped on a failure. Never rejects.
   */
  async #flush(deadline: number): Promise<boolean> {
    if (!this.#o.link.up) return false;
    let failedAgain = false;
    const worker = async (): Promise<void> => {
      while (!failedAgain && performance.now() < deadline) {
        const entry = this.#buffer.take();
        if (entry === undefined) return;
        failedAgain = !(await this.#flushOne(entry, Math.min(deadline, performance.now() + this.#o.link.commandTimeoutMs)));
      }
    };
    await Promise.all(Array.from({ length: FLUSH_CONCURRENCY }, worker));
    this.#o.stats.pending = this.#buffer.size;
    if (this.#buffer.size === 0 && this.#episode.active) {
      const { flushed, stale } = this.#episode;
      this.#episode = { active: false, flushed: 0, stale: 0 };
      this.#o.emit('writes:flushed', { flushed, stale });
    }
    return !failedAgain;
  }

  /** Writes one held entry; false when Redis failed again (the entry is held again). */
  async #flushOne(entry: Pending, deadline: number): Promise<boolean> {
    const count = entry.chain.length;
    try {
      await this.#cas(entry.epoch, entry.agent, (current) => applyChain(entry.chain, current) as BindRecord, entry.key, deadline);
      this.#buffer.done(entry);
      this.#suspect = false;
      this.#o.stats.flushed += count;
      this.#episode.flushed += count;
      return true;
    } catch (error) {
      if (isStaleEpochError(error)) {
        // The fleet moved on while these waited: they belong to an epoch nobody reads any more.
        this.#buffer.done(entry);
        this.#o.stats.stale += count;
        this.#episode.stale += count;
        return true;
      }
      if (isRetryable(error)) {
        this.#buffer.restore(entry);
        if (!(error instanceof EpochLostError || error instanceof ContentionError)) this.#suspect = true;
        return false;
      }
      this.#buffer.done(entry);
      this.#o.stats.failed += count;
      this.#o.onError(error, `writing ${count} buffered bind record(s) of agent ${entry.agent}: ${describeError(error)}`);
      return true;
    }
  }

  #onDrop(count: number): void {
    this.#o.stats.dropped += count;
    // One event per burst of drops, not one per write.
    if (this.#dropped === 0) {
      queueMicrotask(() => {
        const dropped = this.#dropped;
        this.#dropped = 0;
        this.#o.emit('writes:dropped', { dropped, pending: this.#buffer.size });
      });
    }
    this.#dropped += count;
  }

  #remember(key: string, versioned: Versioned): void {
    const known = this.#versions.get(key);
    if (known !== undefined && known.version > versioned.version) return;
    this.#versions.delete(key);
    this.#versions.set(key, versioned);
    if (this.#versions.size > VERSION_CACHE_SIZE) {
      const oldest = this.#versions.keys().next().value;
      if (oldest !== undefined) this.#versions.delete(oldest);
    }
  }
}

/** Errors after which a write is held and retried rather than reported as failed. */
function isRetryable(error: unknown): boolean {
  return error instanceof EpochLostError || error instanceof DeadlineError || error instanceof ContentionError || isUnavailable(error);
}

function splitStored(raw: string): { version: number; body: string } {
  const cut = raw.indexOf(':');
  return { version: Number(raw.slice(0, cut)), body: raw.slice(cut + 1) };
}

const optionalNumber = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
const optionalString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

function decodeProbe(value: unknown): ProbeRecord | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const probe = value as Record<string, unknown>;
  const nonce = optionalString(probe['nonce']);
  const launchId = optionalString(probe['launchId']);
  const epoch = optionalString(probe['epoch']);
  const requestedAt = optionalNumber(probe['requestedAt']);
  if (nonce === undefined || launchId === undefined || epoch === undefined || requestedAt === undefined) return undefined;
  return Object.freeze({ nonce, launchId, epoch, requestedAt, fulfilledAt: optionalNumber(probe['fulfilledAt']) });
}

/**
 * A stored record, checked field by field: whatever is in Redis came over the network and may
 * have been written by another version of this library (or by hand).
 */
function decodeRecord(body: string): BindRecord | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const record = parsed as Record<string, unknown>;
  const agent = optionalString(record['agent']);
  const epoch = optionalString(record['epoch']);
  if (agent === undefined || epoch === undefined) return undefined;
  return Object.freeze({
    agent,
    epoch,
    observedAt: optionalNumber(record['observedAt']),
    lastNonce: optionalString(record['lastNonce']),
    lastLaunchId: optionalString(record['lastLaunchId']),
    probe: decodeProbe(record['probe']),
  });
}
