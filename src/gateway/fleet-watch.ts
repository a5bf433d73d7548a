/**
 * The watchdog's fleet mode: only the holder of the watchdog lease sweeps, and the rate limit and
 * the post-recovery grace live in the fleet's store, where one atomic claim decides.
 *
 * The pure policy ({@link ./policy.ts}) is unchanged: before a sweep the fleet-held interval and
 * grace are merged into the runner's local memory (translated into this replica's clock from the
 * remaining durations, so replicas' wall clocks never need to agree), the policy decides as in a
 * single process, and a `recover` decision then has to win a fenced claim before the host's hook
 * runs. Whatever this replica remembers locally can only make it more careful: merging takes the
 * later of the two deadlines.
 */
import { describeError } from '../errors.js';
import type { ClaimOutcome, LeaseFence, Leadership, RecoveryClaim, RecoveryTimings, WatchdogCoordinator } from './fleet.js';
import { FRESH_WATCH, type AgentWatch, type FleetWatch } from './policy.js';

/** One sweep under one lease. */
export class FleetTurn {
  readonly #coordinator: WatchdogCoordinator;
  readonly #timings: RecoveryTimings;
  /** The lease this sweep runs under. */
  readonly fence: LeaseFence;
  /** True when this is the first sweep under this lease: clocks armed before it are not evidence. */
  readonly fresh: boolean;
  #fenced = false;

  constructor(coordinator: WatchdogCoordinator, timings: RecoveryTimings, fence: LeaseFence, fresh: boolean) {
    this.#coordinator = coordinator;
    this.#timings = timings;
    this.fence = fence;
    this.fresh = fresh;
  }

  /** Whether this replica may still act (its own monotonic clock; no await in between). */
  valid(): boolean {
    return !this.#fenced && this.fence.valid();
  }

  /**
   * Merges the fleet-held interval and grace of `agents` into the local memory, at local time
   * `now`. Rejects when the store cannot be read: the caller then does nothing this sweep.
   */
  async merge(agents: readonly string[], watches: Map<string, AgentWatch>, fleet: FleetWatch, now: number): Promise<FleetWatch> {
    const view = await this.#coordinator.recoveries.view(agents);
    for (const [agent, remaining] of view.graceRemainingMs) {
      const watch = watches.get(agent) ?? FRESH_WATCH;
      watches.set(agent, { ...watch, graceUntil: later(watch.graceUntil, now + remaining) });
    }
    if (view.intervalRemainingMs === undefined) return fleet;
    // The policy measures the interval from the last recovery: place it so that exactly the
    // remaining time is left on this replica's clock.
    const lastRecoveryAt = now - (this.#timings.minRecoveryIntervalMs - view.intervalRemainingMs);
    return { ...fleet, lastRecoveryAt: later(fleet.lastRecoveryAt, lastRecoveryAt) };
  }

  /** The fenced, atomic check-and-set of the fleet's recovery slot for `agent`. */
  async claim(agent: string, reason: string): Promise<ClaimOutcome> {
    const outcome = await this.#coordinator.recoveries.claim(agent, this.fence, this.#timings, reason);
    // The store knows better than our clock (e.g. it lost the lease with its data): stop this sweep.
    if (!outcome.granted && outcome.why === 'fenced') this.#fenced = true;
    return outcome;
  }

  /** Restarts the interval and the grace from now (the hook succeeded). */
  commit(claim: RecoveryClaim): Promise<void> {
    return this.#coordinator.recoveries.commit(claim, this.#timings);
  }

  /** Undoes a reservation (the hook failed, or the lease was lost before it could run). */
  release(claim: RecoveryClaim): Promise<void> {
    return this.#coordinator.recoveries.release(claim);
  }
}

/** The watchdog's leadership in a fleet; hands out one {@link FleetTurn} per sweep while it leads. */
export class FleetWatchdog {
  readonly #coordinator: WatchdogCoordinator;
  readonly #timings: RecoveryTimings;
  readonly #leadership: Leadership;
  #lastToken: number | undefined;

  constructor(coordinator: WatchdogCoordinator, ttlMs: number, timings: RecoveryTimings) {
    this.#coordinator = coordinator;
    this.#timings = timings;
    this.#leadership = coordinator.leadership({ ttlMs });
  }

  /** Whether this replica holds a valid lease right now. */
  get leader(): boolean {
    return this.#leadership.fence() !== undefined;
  }

  /** Starts campaigning for the lease. */
  start(): void {
    this.#leadership.start();
  }

  /** Stops campaigning and releases the lease. */
  stop(): Promise<void> {
    return this.#leadership.stop();
  }

  /** A turn under the current lease, or `undefined` when this replica must not act at all. */
  begin(): FleetTurn | undefined {
    const fence = this.#leadership.fence();
    if (fence === undefined) return undefined;
    const fresh = fence.token !== this.#lastToken;
    this.#lastToken = fence.token;
    return new FleetTurn(this.#coordinator, this.#timings, fence, fresh);
  }
}

/** Why a claim was refused, in the words of a sweep result. */
export function refusal(outcome: Extract<ClaimOutcome, { granted: false }>): string {
  const seconds = `${Math.ceil(outcome.remainingMs / 1000)} s`;
  switch (outcome.why) {
    case 'interval':
      return `fleet recovery rate limit (held by the fleet), next recovery in ${seconds}`;
    case 'grace':
      return `in post-recovery grace for ${seconds} more (held by the fleet)`;
    case 'fenced':
      return 'not recovered: this replica no longer holds the watchdog lease (fenced)';
  }
}

/** The reason suffix for a fleet store that could not be reached. */
export function unreachable(error: unknown): string {
  return `not recovered: the fleet's recovery state could not be reached (${describeError(error)})`;
}

function later(a: number | undefined, b: number): number {
  return a === undefined || b > a ? b : a;
}
