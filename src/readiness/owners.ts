/**
 * Owner control: creates, watches and retires the discovery owner of each readiness entry, and
 * publishes the entry's settlements. The registry (`registry.ts`) decides *when* an owner is
 * wanted; this module is the only one that talks to the driver about owners.
 *
 * - An owner is created only under the entry's `ownerLock`, after any leftover body of the key was
 *   quiesced, and only while the reload fence is open, with no await between the fence check and
 *   the (synchronous) `driver.start`.
 * - Every quiescence goes through {@link OwnerControl.quiesce}, which retires, reports
 *   'discovery:retired' and says whether a body survived.
 * - Messages of a generation are accepted only while that generation is the entry's running one;
 *   whatever else arrives (a stale generation, a retired one) is dropped.
 * - Servers that get no outcome of their own (the body died, the cap fired, the start failed) are
 *   failed by {@link OwnerControl.failPending}, the one builder of such outcomes.
 */
import { Mutex } from 'async-mutex';
import type { Clock } from '../clock.js';
import type { ProfileConfig } from '../config/types.js';
import type { QuiesceReport, RunHandlers } from '../discovery/coordinator.js';
import type { FailureKind, SettledOutcome } from '../discovery/types.js';
import { McpSupervisorError, describeError, isMcpSupervisorError } from '../errors.js';
import type { EventSink } from '../events.js';
import type { DiscoveryDriver, SessionLayer } from './driver.js';
import type { Entry } from './entry.js';
import type { RunningPhase } from './phase.js';
import type { ProfileLoader, ReadinessEvents, ReadinessOptions } from './registry-types.js';
import { deepFreeze, enabledServers } from './settlement.js';
import type { Snapshots } from './snapshots.js';

/**
 * The shortest interval at which a ready server is re-discovered because its lists expired: a
 * server that vouches for its list for a few milliseconds does not get a process a second.
 */
const MIN_TTL_REFRESH_MS = 10_000;

/** The reason of a profile's first discovery: the only one that may reuse another profile's recent result. */
export const FIRST_USE = 'first use';

/** What {@link OwnerControl.quiesce} found: whether the key is free for a new owner. */
export type Quiescence =
  /** Nothing was alive (no report), or every body stopped. */
  | { readonly survived: false; readonly report?: QuiesceReport }
  /** A body survived the ladder: no new owner may start. */
  | { readonly survived: true; readonly report: QuiesceReport };

/** A failure given to servers that got no outcome of their own. */
interface MissingOutcome {
  kind: Extract<FailureKind, 'cancelled' | 'timeout'>;
  message: string;
  totalMs: number;
  /** Whether it extends the server's failure streak (and so schedules a refresh). */
  counts: boolean;
}

/** What owner control works with. */
export interface OwnerControlContext {
  driver: DiscoveryDriver;
  sessions: SessionLayer;
  loadConfig: ProfileLoader;
  clock: Clock;
  options: ReadinessOptions;
  events: EventSink<ReadinessEvents>;
  snapshots: Snapshots;
  /** A profile could not be loaded (the registry bounds how many such entries it keeps). */
  onUnloadable(key: string): void;
}

/** The owner lifecycle of readiness entries. */
export class OwnerControl {
  /** Held by a reload while it quiesces and invalidates; owners are created only while it is open. */
  readonly fence = new Mutex();
  #closed = false;
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly context: OwnerControlContext) {}

  /** True once the host closed: no owner is created any more. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Stops creating owners and scheduling refreshes (the registry then closes the driver). */
  markClosed(): void {
    this.#closed = true;
  }

  /** Resolves when every background owner creation and cap quiescence has ended. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.background]);
  }

  /** @throws McpSupervisorError `HOST_CLOSED` once the host is closed */
  assertOpen(key?: string): void {
    if (this.#closed) throw new McpSupervisorError('HOST_CLOSED', 'the host is closed', key === undefined ? {} : { profile: key });
  }

  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch(() => undefined);
    this.background.add(tracked);
    void tracked.finally(() => this.background.delete(tracked));
  }

  // ---------------------------------------------------------------- creating owners

  /**
   * Creates an owner in the background for an idle entry (a first use, a rediscovery, a due
   * refresh) over `only` (or every enabled server). Does nothing unless the entry is idle.
   */
  demand(entry: Entry, only: readonly string[] | undefined, reason: string): void {
    if (!entry.transition({ type: 'demand' })) return;
    this.track(entry.ownerLock.runExclusive(() => this.startLocked(entry, only, reason)));
  }

  /**
   * Retry's owner change, under the entry's lock: quiesces whatever runs, then starts a new
   * generation over every server. The entry's waiters follow it to that generation.
   * @throws McpSupervisorError `RETRY_REFUSED` when a body survives (the entry is settled first, so its waiters wake)
   */
  async retryLocked(entry: Entry): Promise<void> {
    const quiescence = await this.quiesce(entry.key, 'retry');
    if (quiescence.survived) {
      this.settle(entry);
      throw new McpSupervisorError('RETRY_REFUSED', `retry of profile "${entry.key}" refused: the running discovery could not be stopped`, {
        profile: entry.key,
        data: { survivors: quiescence.report.survivors },
      });
    }
    // A generation started while retry waited for the lock was just retired: start anew. The
    // retired generation's waiters move on to the new one (they share `next`).
    entry.transition({ type: 'retry' });
    await this.startLocked(entry, undefined, 'retry');
  }

  /** Creates the owner (see {@link prepareAndLaunch}); a failure settles the entry instead of escaping. */
  private async startLocked(entry: Entry, only: readonly string[] | undefined, reason: string): Promise<void> {
    try {
      await this.prepareAndLaunch(entry, only, reason);
    } catch (error) {
      this.failStart(entry, error);
    }
  }

  /**
   * Loads the entry's config if needed, quiesces any leftover body of the key, waits for the
   * reload fence, then launches — with no await between the fence check and the start.
   */
  private async prepareAndLaunch(entry: Entry, requested: readonly string[] | undefined, requestedReason: string): Promise<void> {
    let only = requested;
    let reason = requestedReason;
    for (;;) {
      this.assertOpen(entry.key);
      const version = entry.version;
      if (!entry.config && !entry.configError) await this.loadEntryConfig(entry, version);
      // A body of this key may still be alive (releasing its connections after settling, or retired
      // by the cap): it must be gone before the next one starts.
      const quiescence = await this.quiesce(entry.key, reason);
      if (quiescence.survived) {
        throw new McpSupervisorError('RETRY_REFUSED', `the previous discovery of profile "${entry.key}" could not be stopped (survivors: ${quiescence.report.survivors.join(', ') || 'worker'})`, {
          profile: entry.key,
        });
      }
      while (this.fence.isLocked()) await this.fence.waitForUnlock();
      // ---- no await from here to the start: a reload cannot slip in between ----
      this.assertOpen(entry.key);
      if (entry.version === version) break;
      // A reload invalidated the entry while we waited. Its own kick-off found the entry starting
      // and left the start to us: go round again on the config it adopted, as the whole first
      // discovery the reload would have started (a held cooldown refresh of a few servers would
      // leave the others pending in an entry the reload emptied) — unless it removed the profile
      // (then its waiters were told UNKNOWN_PROFILE and there is nothing to start).
      if (!entry.config && !entry.configError) {
        entry.transition({ type: 'abandoned' });
        return;
      }
      only = undefined;
      reason = FIRST_USE;
    }
    if (entry.configError || !entry.config) {
      this.settle(entry);
      return;
    }
    this.launch(entry, entry.config, only, reason);
  }

  /** Loads the entry's config; a load a reload overtook (the version moved) is dropped, never applied. */
  private async loadEntryConfig(entry: Entry, version: number): Promise<void> {
    let config: ProfileConfig | undefined;
    let failure: unknown;
    try {
      config = await this.context.loadConfig(entry.key, AbortSignal.timeout(this.context.options.readinessCapMs));
      if (!config) failure = new McpSupervisorError('UNKNOWN_PROFILE', `profile "${entry.key}" is not configured and could not be loaded`, { profile: entry.key });
    } catch (error) {
      failure = error;
    }
    if (entry.version !== version) return;
    if (failure === undefined) {
      entry.config = config;
      return;
    }
    entry.configError = (isMcpSupervisorError(failure) ? failure : new McpSupervisorError('INVALID_CONFIG', describeError(failure), { profile: entry.key })).toJSON();
    this.context.onUnloadable(entry.key);
  }

  /** Starts the body of a new generation. Synchronous: the caller has just seen the fence open. */
  private launch(entry: Entry, config: ProfileConfig, only: readonly string[] | undefined, reason: string): void {
    const { driver, clock, options, events } = this.context;
    const enabled = enabledServers(config);
    const servers = (only ?? enabled).filter((name) => enabled.includes(name));
    if (only === undefined) entry.outcomes = new Map();
    for (const name of servers) entry.outcomes.set(name, { status: 'pending', server: name });
    if (servers.length === 0) {
      this.settle(entry);
      return;
    }
    const handlers: RunHandlers = {
      onOutcome: (outcome, generationOfOutcome) => this.onOutcome(entry, generationOfOutcome, outcome),
      onDone: ({ generation: doneGeneration, error }) => this.onDone(entry, doneGeneration, error),
    };
    let generation: number;
    try {
      ({ generation } = driver.start(entry.key, servers.map((name) => config.servers[name]!), handlers, { reuse: reason === FIRST_USE }));
    } catch (error) {
      this.failStart(entry, error, servers);
      return;
    }
    const capTimer = clock.setTimeout(() => this.onCap(entry, generation), options.readinessCapMs);
    entry.transition({ type: 'started', run: { generation, startedAt: clock.now() }, inflight: new Set(servers), capTimer });
    events.emit('discovery:start', { key: entry.key, generation, servers, reason });
  }

  /**
   * Owner creation failed (host closed, quiescence refused, the driver refused): settle so nobody
   * waits forever, failing the servers a refused start had marked pending. A closed host instead
   * rejects the waiters with HOST_CLOSED.
   */
  private failStart(entry: Entry, error: unknown, launched: readonly string[] = []): void {
    const serialized = (isMcpSupervisorError(error) ? error : new McpSupervisorError('DISCOVERY_FAILED', describeError(error), { profile: entry.key })).toJSON();
    if (serialized.code === 'HOST_CLOSED') {
      entry.transition({ type: 'abandoned' });
      entry.next?.reject(McpSupervisorError.fromJSON(serialized));
      entry.next = undefined;
      return;
    }
    // Not counted as a failure of the servers: they were never asked.
    this.failPending(entry, launched, { kind: 'cancelled', message: serialized.message, totalMs: 0, counts: false });
    if (!entry.config) entry.configError = serialized;
    this.settle(entry);
  }

  // ---------------------------------------------------------------- retiring owners

  /**
   * The one quiesce path. Retires the key's generation (synchronously, before the first await, as
   * the driver does), waits for the quiescence ladder, emits 'discovery:retired' and says whether
   * a body survived. A key without a live body has nothing to retire and nothing is emitted,
   * unless `always` (the readiness cap retires its generation whatever the driver reports).
   */
  async quiesce(key: string, reason: string, always = false): Promise<Quiescence> {
    const { driver, events } = this.context;
    if (!always && !driver.hasOwner(key) && driver.liveOwners(key) === 0) return { survived: false };
    const report = await driver.quiesce(key, reason);
    events.emit('discovery:retired', { key: report.key, generation: report.generation, reason: report.reason, quiesceMs: report.totalMs, rung: report.rung, quiesced: report.quiesced });
    return report.quiesced ? { survived: false, report } : { survived: true, report };
  }

  // ---------------------------------------------------------------- messages of a generation

  /** The entry's running phase, if `generation` is the one running (else its messages are stale). */
  private currentRun(entry: Entry, generation: number): RunningPhase | undefined {
    const phase = entry.phase;
    return phase.kind === 'running' && phase.run.generation === generation ? phase : undefined;
  }

  private onOutcome(entry: Entry, generation: number, outcome: SettledOutcome): void {
    const run = this.currentRun(entry, generation);
    if (!run || !run.inflight.has(outcome.server)) return;
    // Frozen here, one server at a time as outcomes arrive, so the settlement that builds the
    // turn catalogue finds every schema frozen already: no handler walks every tool of a profile.
    if (outcome.status === 'ready') deepFreeze(outcome);
    entry.outcomes.set(outcome.server, outcome);
    this.recordFailure(entry, outcome);
    this.context.events.emit('discovery:outcome', {
      key: entry.key,
      generation,
      server: outcome.server,
      status: outcome.status,
      ...(outcome.status === 'failed' ? { kind: outcome.failure.kind } : {}),
      ...(outcome.status === 'ready' ? { tools: outcome.tools.length } : {}),
      ms: outcome.status === 'disabled' ? 0 : outcome.timings.totalMs,
    });
    if ([...run.inflight].every((name) => entry.outcomes.get(name)?.status !== 'pending')) this.settle(entry);
  }

  /** The body of `generation` ended (or, for a reload that failed closed, was retired for good). */
  onDone(entry: Entry, generation: number, error: McpSupervisorError | undefined): void {
    const run = this.currentRun(entry, generation);
    if (!run) return;
    // The body ended without an outcome for these servers (its worker died): they failed.
    const message = `discovery ended without a result for this server${error ? `: ${error.message}` : ''}`;
    if (this.failPending(entry, run.inflight, { kind: 'cancelled', message, totalMs: 0, counts: true }) === 0) return;
    this.settle(entry);
  }

  /** The readiness cap: retire the generation now, settle it as failed for what is still pending, wake everyone. */
  private onCap(entry: Entry, generation: number): void {
    const run = this.currentRun(entry, generation);
    if (!run) return;
    // quiesce() retires the generation synchronously: from here on nothing of it is accepted.
    this.track(this.quiesce(entry.key, 'readiness cap', true));
    const { clock, options } = this.context;
    const message = `discovery did not finish within the readiness cap of ${options.readinessCapMs} ms`;
    this.failPending(entry, run.inflight, { kind: 'timeout', message, totalMs: clock.now() - run.run.startedAt, counts: true });
    this.settle(entry);
  }

  /** The one builder of failed outcomes for servers of `servers` still pending. Returns how many failed. */
  private failPending(entry: Entry, servers: Iterable<string>, missing: MissingOutcome): number {
    let failed = 0;
    for (const name of servers) {
      if (entry.outcomes.get(name)?.status !== 'pending') continue;
      const outcome: SettledOutcome = { status: 'failed', server: name, failure: { kind: missing.kind, message: missing.message }, timings: { totalMs: missing.totalMs } };
      entry.outcomes.set(name, outcome);
      if (missing.counts) this.recordFailure(entry, outcome);
      failed++;
    }
    return failed;
  }

  private recordFailure(entry: Entry, outcome: SettledOutcome): void {
    entry.expiries.delete(outcome.server);
    if (outcome.status !== 'failed') {
      entry.failures.delete(outcome.server);
      if (outcome.status === 'ready' && outcome.freshForMs !== undefined) {
        entry.expiries.set(outcome.server, this.context.clock.now() + Math.max(outcome.freshForMs, MIN_TTL_REFRESH_MS));
      }
      return;
    }
    const { clock, options } = this.context;
    const streak = (entry.failures.get(outcome.server)?.streak ?? 0) + 1;
    const cooldown = Math.min(options.retryCooldownMs * 2 ** (streak - 1), options.maxRetryCooldownMs);
    entry.failures.set(outcome.server, { streak, retryAt: clock.now() + cooldown });
  }

  // ---------------------------------------------------------------- settling

  /** Publishes the entry's outcomes as its new settlement and wakes every waiter. */
  settle(entry: Entry): void {
    const { clock, sessions, events, snapshots } = this.context;
    const { generation, startedAt } = entry.generation;
    entry.transition({ type: 'settled' });
    const now = clock.now();
    const refreshAt = this.nextRefreshAt(entry);
    const settlement = snapshots.settlement(entry, generation, new Map(entry.outcomes), { settledAt: now, refreshAt, error: entry.configError });
    entry.settled = settlement;
    if (entry.config && !entry.configError) sessions.published(entry.key, entry.config, settlement.outcomes);
    this.scheduleRefresh(entry, refreshAt);
    const next = entry.next;
    entry.next = undefined;
    next?.resolve(settlement);
    // A settlement with no generation of its own (a failed start) is timed from the last one's start.
    events.emit('discovery:settled', { key: entry.key, generation, status: settlement.view.status, durationMs: startedAt ? now - startedAt : 0, failed: [...settlement.view.failed] });
  }

  // ---------------------------------------------------------------- refresh

  /**
   * True for a failed server the cooldown refresh may re-discover: not one waiting for
   * authorization (a refresh would restart its OAuth code flow under the user's feet).
   */
  private refreshable(entry: Entry, name: string): boolean {
    const outcome = entry.outcomes.get(name);
    return outcome?.status === 'failed' && outcome.failure.kind !== 'auth';
  }

  private nextRefreshAt(entry: Entry): number | undefined {
    let earliest: number | undefined;
    for (const [name, failure] of entry.failures) {
      if (!this.refreshable(entry, name)) continue;
      if (earliest === undefined || failure.retryAt < earliest) earliest = failure.retryAt;
    }
    for (const expiresAt of entry.expiries.values()) if (earliest === undefined || expiresAt < earliest) earliest = expiresAt;
    return earliest;
  }

  private scheduleRefresh(entry: Entry, refreshAt: number | undefined): void {
    const { clock } = this.context;
    clock.clearTimeout(entry.refreshTimer);
    entry.refreshTimer = undefined;
    if (refreshAt === undefined || this.#closed) return;
    entry.refreshTimer = clock.setTimeout(() => this.refreshIfDue(entry), Math.max(0, refreshAt - clock.now()));
  }

  /**
   * Starts one background re-discovery of the failed servers that are due, and of the ready ones
   * whose lists expired (the server's `ttlMs`), if none is running.
   */
  refreshIfDue(entry: Entry): void {
    if (this.#closed || entry.phase.kind !== 'idle' || !entry.settled) return;
    const now = this.context.clock.now();
    const due = [...entry.failures].filter(([name, failure]) => failure.retryAt <= now && this.refreshable(entry, name)).map(([name]) => name);
    const expired = [...entry.expiries].filter(([name, expiresAt]) => expiresAt <= now && entry.outcomes.get(name)?.status === 'ready').map(([name]) => name);
    if (due.length + expired.length === 0) return;
    this.demand(entry, [...due, ...expired], due.length > 0 ? 'cooldown refresh' : 'lists expired (ttlMs)');
  }
}
