/**
 * The watchdog lease: one replica of the fleet at a time may sweep.
 *
 * Acquire is `SET NX PX` inside a script that first takes a fencing token (`INCR`); renew and
 * release are compare-and-set on the lease's value (`<token>:<nonce>:<replica>`, unique per
 * acquisition). Timing, all on this replica's monotonic clock:
 *  - the lease counts from the moment the acquire (or renew) was *sent*, which is no later than
 *    when Redis started its TTL, so the local view never outlasts Redis's;
 *  - it is renewed every ttl/3, so two renewals may fail before it is at risk;
 *  - it is valid locally until `sent + ttl − margin` (margin = ttl/10, at least 2 ms: clock-rate
 *    differences between this host and Redis). Past that the replica stops acting immediately —
 *    {@link LeaseFence.valid} is checked synchronously before every action, so a process that was
 *    paused sees its lease gone the moment it runs again, whatever its timers say;
 *  - a follower that finds the lease held retries when it would expire (its PTTL), so a dead
 *    leader is replaced within the lease's TTL.
 * Every claim the leader makes is fenced in Redis too (`recoveries.ts`): even a replica whose
 * clock is wrong cannot act on a lease that has passed to another.
 */
import { randomBytes } from 'node:crypto';
import type { Clock, TimerHandle } from '../clock.js';
import type { Leadership, LeaseFence } from '../gateway/fleet.js';
import type { RedisLink } from './connection.js';
import type { RedisCoordinatorEvents } from './events.js';
import type { FleetKeys } from './keys.js';

/** The lease value behind a fence, for the scripts that check it (never exposed to hosts). */
const leaseValues = new WeakMap<LeaseFence, string>();

/** The lease value a fence stands for, if it was issued by a {@link RedisLease}. */
export function leaseValueOf(fence: LeaseFence): string | undefined {
  return leaseValues.get(fence);
}

type State =
  | { readonly kind: 'idle' }
  | { readonly kind: 'stopped' }
  | { readonly kind: 'following'; timer: TimerHandle | undefined }
  | {
      readonly kind: 'leading';
      readonly value: string;
      readonly token: number;
      readonly fence: LeaseFence;
      readonly controller: AbortController;
      validUntil: number;
      renewTimer: TimerHandle | undefined;
      expiryTimer: TimerHandle | undefined;
    };

/** Settings of {@link RedisLease}. */
export interface RedisLeaseOptions {
  link: RedisLink;
  keys: FleetKeys;
  replicaId: string;
  clock: Clock;
  ttlMs: number;
  emit: <Name extends keyof RedisCoordinatorEvents>(event: Name, payload: RedisCoordinatorEvents[Name]) => void;
  onError: (error: unknown, context: string) => void;
}

function tokenOf(value: string): number {
  const token = Number(value.slice(0, value.indexOf(':')));
  return Number.isSafeInteger(token) ? token : 0;
}

/** {@link Leadership} on Redis; see the module comment. */
export class RedisLease implements Leadership {
  readonly #o: RedisLeaseOptions;
  readonly #ttlMs: number;
  readonly #renewEveryMs: number;
  readonly #marginMs: number;
  #state: State = { kind: 'idle' };
  /** The highest fencing token seen: handed to acquire so tokens keep rising even if Redis lost its counter. */
  #knownToken = 0;

  constructor(options: RedisLeaseOptions) {
    this.#o = options;
    this.#ttlMs = Math.ceil(options.ttlMs);
    this.#renewEveryMs = Math.max(1, Math.floor(this.#ttlMs / 3));
    this.#marginMs = Math.max(2, Math.ceil(this.#ttlMs / 10));
  }

  /** {@inheritDoc Leadership.start} */
  start(): void {
    if (this.#state.kind !== 'idle' && this.#state.kind !== 'stopped') return;
    this.#follow(0);
  }

  /** {@inheritDoc Leadership.fence} */
  fence(): LeaseFence | undefined {
    const state = this.#state;
    if (state.kind !== 'leading') return undefined;
    // The expiry timer may not have fired yet (a paused process runs its I/O callbacks first).
    if (this.#o.clock.now() >= state.validUntil) {
      this.#stepDown(state, 'expired');
      return undefined;
    }
    return state.fence;
  }

  /** {@inheritDoc Leadership.stop} */
  async stop(): Promise<void> {
    const state = this.#state;
    this.#state = { kind: 'stopped' };
    if (state.kind === 'following') this.#o.clock.clearTimeout(state.timer);
    if (state.kind !== 'leading') return;
    this.#clearTimers(state);
    state.controller.abort();
    this.#o.emit('lease:lost', { token: state.token, reason: 'released' });
    // Released, not left to expire, so another replica takes over at once.
    await this.#release(state.value);
  }

  #follow(delayMs: number): void {
    const state: State = { kind: 'following', timer: undefined };
    this.#state = state;
    state.timer = this.#o.clock.setTimeout(() => void this.#attempt(state), delayMs);
  }

  async #attempt(state: State): Promise<void> {
    if (this.#state !== state) return;
    const sentAt = this.#o.clock.now();
    let reply: unknown;
    try {
      const args = [String(this.#ttlMs), randomBytes(8).toString('hex'), this.#o.replicaId, String(this.#knownToken)];
      reply = await this.#o.link.run(
        (c) => c.leaseAcquire([this.#o.keys.lease, this.#o.keys.leaseSeq], args),
        Math.min(this.#o.link.commandTimeoutMs, this.#ttlMs - this.#marginMs),
      );
    } catch {
      // Redis unreachable: nobody can take the lease; try again later.
      if (this.#state === state) this.#follow(this.#renewEveryMs);
      return;
    }
    const [acquired, value, ttl] = Array.isArray(reply) ? reply : [];
    if (typeof value !== 'string') {
      this.#o.onError(new Error(`unexpected lease reply ${JSON.stringify(reply)}`), 'acquiring the watchdog lease');
      if (this.#state === state) this.#follow(this.#renewEveryMs);
      return;
    }
    this.#knownToken = Math.max(this.#knownToken, tokenOf(value));
    if (Number(acquired) !== 1) {
      // Held by someone else: come back when it would expire, or sooner.
      const left = Number(ttl);
      if (this.#state === state) this.#follow(left > 0 ? Math.min(left + 1, this.#renewEveryMs) : this.#renewEveryMs);
      return;
    }
    const validUntil = sentAt + this.#ttlMs - this.#marginMs;
    if (this.#state !== state || this.#o.clock.now() >= validUntil) {
      // Stopped meanwhile, or the reply came too late to be of use: give it back at once.
      void this.#release(value);
      if (this.#state === state) this.#follow(0);
      return;
    }
    this.#lead(value, sentAt, validUntil);
  }

  #lead(value: string, sentAt: number, validUntil: number): void {
    const controller = new AbortController();
    const token = tokenOf(value);
    const fence: LeaseFence = Object.freeze({
      token,
      signal: controller.signal,
      valid: () => this.#state === state && this.#o.clock.now() < state.validUntil,
    });
    leaseValues.set(fence, value);
    const state: Extract<State, { kind: 'leading' }> = {
      kind: 'leading',
      value,
      token,
      fence,
      controller,
      validUntil,
      renewTimer: undefined,
      expiryTimer: undefined,
    };
    this.#state = state;
    this.#armExpiry(state);
    this.#scheduleRenew(state, sentAt + this.#renewEveryMs - this.#o.clock.now());
    this.#o.emit('lease:acquired', { token });
  }

  #armExpiry(state: Extract<State, { kind: 'leading' }>): void {
    this.#o.clock.clearTimeout(state.expiryTimer);
    state.expiryTimer = this.#o.clock.setTimeout(() => {
      if (this.#state === state && this.#o.clock.now() >= state.validUntil) this.#stepDown(state, 'expired');
      else if (this.#state === state) this.#armExpiry(state);
    }, state.validUntil - this.#o.clock.now());
  }

  #scheduleRenew(state: Extract<State, { kind: 'leading' }>, delayMs: number): void {
    this.#o.clock.clearTimeout(state.renewTimer);
    state.renewTimer = this.#o.clock.setTimeout(() => void this.#renew(state), Math.max(0, delayMs));
  }

  async #renew(state: Extract<State, { kind: 'leading' }>): Promise<void> {
    if (this.#state !== state) return;
    const sentAt = this.#o.clock.now();
    let renewed: unknown;
    try {
      renewed = await this.#o.link.run(
        (c) => c.leaseRenew([this.#o.keys.lease], [state.value, String(this.#ttlMs)]),
        Math.max(1, Math.min(this.#o.link.commandTimeoutMs, state.validUntil - sentAt)),
      );
    } catch {
      // Not answered: keep trying while the lease lasts; the expiry timer ends it otherwise.
      if (this.#state === state) this.#scheduleRenew(state, Math.max(10, Math.min(this.#renewEveryMs / 4, state.validUntil - this.#o.clock.now())));
      return;
    }
    if (this.#state !== state) return;
    if (Number(renewed) !== 1) {
      // Redis says the lease is not ours any more (expired there, taken, or lost with its data).
      this.#stepDown(state, 'taken');
      return;
    }
    state.validUntil = Math.max(state.validUntil, sentAt + this.#ttlMs - this.#marginMs);
    this.#armExpiry(state);
    this.#scheduleRenew(state, sentAt + this.#renewEveryMs - this.#o.clock.now());
  }

  #stepDown(state: Extract<State, { kind: 'leading' }>, reason: 'expired' | 'taken'): void {
    if (this.#state !== state) return;
    this.#clearTimers(state);
    state.controller.abort();
    this.#o.emit('lease:lost', { token: state.token, reason });
    // Expired by our clock but maybe not yet in Redis: give it back so the fleet need not wait.
    if (reason === 'expired') void this.#release(state.value);
    this.#follow(0);
  }

  #clearTimers(state: Extract<State, { kind: 'leading' }>): void {
    this.#o.clock.clearTimeout(state.renewTimer);
    this.#o.clock.clearTimeout(state.expiryTimer);
  }

  async #release(value: string): Promise<void> {
    try {
      await this.#o.link.run((c) => c.leaseRelease([this.#o.keys.lease], [value]));
    } catch {
      // Unreachable: the lease expires by itself within its TTL.
    }
  }
}
