/**
 * The contract between the gateway module and a fleet coordinator (several gateway replicas that
 * share one epoch, one bind ledger and one watchdog). Interfaces only: `mcp-supervisor/redis`
 * implements them on Redis, and nothing in `src/gateway` depends on that implementation, so a
 * single-process host never loads a Redis client.
 *
 * Two guarantees the gateway relies on, whatever the backend:
 *  - fencing by epoch: a ledger write names the epoch it belongs to and the store refuses it
 *    ({@link StaleEpochError}) unless that is still the fleet's epoch;
 *  - fencing by lease: the watchdog acts only under a {@link LeaseFence}, and every claim it makes
 *    on the fleet's recovery state is refused unless that fence is still the lease holder's.
 */
import type { BindStore } from './store.js';

/** The fleet-wide epoch as one replica follows it. */
export interface FleetEpochs {
  /** The fleet's epoch as this replica last learned it (synchronous: session ids are minted from it). */
  readonly current: string;
  /**
   * Starts a new fleet epoch (every replica moves to it and every agent is unbound) and resolves
   * to it once the shared store has it. Rejects when the fleet cannot be reached: a bump that
   * moved only this replica would split the fleet.
   */
  bump(): Promise<string>;
  /** Calls `listener` whenever {@link current} changes, wherever the change came from; returns an unsubscribe. */
  subscribe(listener: (epoch: string, previous: string) => void): () => void;
}

const STALE_EPOCH = Symbol.for('mcp-supervisor.stale-epoch');

/**
 * Thrown (as a rejection) by a fleet {@link BindStore} when a write names an epoch that is no
 * longer the fleet's: nothing was written. The ledger turns it into "dropped", as it does for a
 * write it can tell is stale by itself.
 */
export class StaleEpochError extends Error {
  /** The epoch the write named. */
  readonly epoch: string;
  /** The fleet's epoch at the time of the refusal (`''` if the store had none). */
  readonly current: string;
  readonly [STALE_EPOCH] = true;

  constructor(epoch: string, current: string) {
    super(`gateway epoch ${epoch} is no longer current (the fleet is on ${current || 'no epoch'}): nothing was written`);
    this.name = 'StaleEpochError';
    this.epoch = epoch;
    this.current = current;
  }
}

/** Whether `error` is a {@link StaleEpochError} (by brand, so duplicate package copies agree). */
export function isStaleEpochError(error: unknown): error is StaleEpochError {
  return typeof error === 'object' && error !== null && (error as { [STALE_EPOCH]?: unknown })[STALE_EPOCH] === true;
}

/** What `createGateway({ coordinator })` takes from a coordinator. */
export interface GatewayCoordinator {
  /** The fleet's epoch. */
  readonly epochs: FleetEpochs;
  /** The fleet's bind ledger; writes are compare-and-set on the epoch. */
  readonly store: BindStore;
}

/**
 * Proof that this replica holds the watchdog lease. Taken at the start of a sweep and re-checked
 * before every action: {@link valid} reads the replica's own monotonic clock, so a leader that was
 * paused past its lease sees `false` the moment it runs again, before any await.
 */
export interface LeaseFence {
  /** The fencing token: strictly increasing across the fleet's leases (handed to the recovery hook). */
  readonly token: number;
  /** Aborts when this lease is lost, released or expires. */
  readonly signal: AbortSignal;
  /** Whether the lease is still held, by this replica's monotonic clock (with the safety margin). */
  valid(): boolean;
}

/** One replica's campaign for the watchdog lease. */
export interface Leadership {
  /** Starts campaigning (acquire, then renew). Idempotent. */
  start(): void;
  /** Stops campaigning and releases the lease if held. Idempotent; never rejects. */
  stop(): Promise<void>;
  /** The fence of the lease held right now, or `undefined` when this replica may not act. */
  fence(): LeaseFence | undefined;
}

/** The fleet-held part of the watchdog's memory, as seen at one moment. */
export interface FleetRecoveryView {
  /** How long the fleet-wide minimum interval still runs (absent: not running). */
  readonly intervalRemainingMs: number | undefined;
  /** Per agent: how long its post-recovery grace still runs (agents not in grace are absent). */
  readonly graceRemainingMs: ReadonlyMap<string, number>;
}

/** A reservation of the fleet's recovery slot for one agent, to be committed or released. */
export interface RecoveryClaim {
  /** The agent. */
  readonly agent: string;
  /** Unique id of the reservation (what commit and release compare against). */
  readonly id: string;
}

/** The answer to a claim. */
export type ClaimOutcome =
  | { readonly granted: true; readonly claim: RecoveryClaim }
  | { readonly granted: false; readonly why: 'fenced' | 'interval' | 'grace'; readonly remainingMs: number };

/** Timings a claim reserves (the watchdog's policy). */
export interface RecoveryTimings {
  /** Fleet-wide minimum interval between two recoveries. */
  readonly minRecoveryIntervalMs: number;
  /** Post-recovery grace of the agent. */
  readonly graceMs: number;
}

/**
 * The fleet's recovery rate limit and grace, held in the shared store so they hold across
 * replicas and leader changes. {@link claim} is the single atomic check-and-set: two replicas can
 * never both be granted inside the interval, and a claim under a stale fence is refused.
 */
export interface RecoveryLimiter {
  /** Reads the running interval and the grace of `agents`. */
  view(agents: readonly string[]): Promise<FleetRecoveryView>;
  /** Atomically: refuse under a stale fence, a running interval or the agent's grace; else reserve both. */
  claim(agent: string, fence: LeaseFence, timings: RecoveryTimings, reason: string): Promise<ClaimOutcome>;
  /** After the hook succeeded: restart the interval and the grace from now. */
  commit(claim: RecoveryClaim, timings: RecoveryTimings): Promise<void>;
  /** After the hook failed: undo the reservation (a failed recovery spends nothing). */
  release(claim: RecoveryClaim): Promise<void>;
}

/** What `createWatchdog({ coordinator })` takes from a coordinator. */
export interface WatchdogCoordinator {
  /** This replica's id (for reasons and logs). */
  readonly replicaId: string;
  /** Creates this replica's campaign for the watchdog lease. */
  leadership(options: { ttlMs: number }): Leadership;
  /** The fleet's recovery rate limit and grace. */
  readonly recoveries: RecoveryLimiter;
}

/** A coordinator usable by both the gateway and the watchdog (what `redisCoordinator` returns). */
export interface FleetCoordinator extends GatewayCoordinator, WatchdogCoordinator {}
