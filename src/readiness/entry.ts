/**
 * One profile's readiness state: its config, its phase (see `phase.ts`), the outcomes and failure
 * records of its servers, its current settlement, and the deferred every waiter of its next
 * settlement shares. Mutated only by the readiness registry and its owner control, and its phase
 * only through {@link Entry.transition}.
 */
import { Mutex } from 'async-mutex';
import type { Clock, TimerHandle } from '../clock.js';
import type { ProfileConfig } from '../config/types.js';
import type { ServerOutcome } from '../discovery/types.js';
import type { SerializedError } from '../errors.js';
import { type EntryPhase, type GenerationStamp, NO_GENERATION, type PhaseEvent, nextPhase, shownGeneration } from './phase.js';
import type { FailureRecord, TurnCatalog } from './settlement.js';
import type { ReadinessView } from './types.js';

/** A settled snapshot of an entry: its view and its frozen tool catalog. */
export interface Settlement {
  readonly generation: number;
  readonly view: ReadinessView;
  readonly outcomes: ReadonlyMap<string, ServerOutcome>;
  /** Rebuilt (not mutated in place) when the session layer parks or revives a server. */
  catalog: TurnCatalog;
  /** The session layer's exclusion version `catalog` was built for. */
  catalogVersion: number;
}

/** A promise with its settle functions, shared by every waiter of one entry. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** A {@link Deferred} whose rejection is never unhandled. */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Waiters may all have given up (maxWaitMs); a close() rejection must not become unhandled.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** One profile's readiness state. */
export class Entry {
  config: ProfileConfig | undefined;
  /** Why the profile could not be loaded (it then settles as failed with this error). */
  configError: SerializedError | undefined;
  /** Outcomes of the current or last generation (refreshes keep the ready ones). */
  outcomes = new Map<string, ServerOutcome>();
  failures = new Map<string, FailureRecord>();
  /** When the lists of a ready server expire (its `ttlMs`): a background refresh re-discovers it. */
  expiries = new Map<string, number>();
  settled: Settlement | undefined;
  /** Resolved by the next settlement; shared by every waiter. */
  next: Deferred<Settlement> | undefined;
  /** Serialises owner creation (start, retry, refresh) of this key: one owner at a time. */
  readonly ownerLock = new Mutex();
  refreshTimer: TimerHandle | undefined;
  /** Bumped on invalidation: a start prepared before it must not run. */
  version = 0;
  #phase: EntryPhase = { kind: 'idle', last: NO_GENERATION };

  constructor(
    readonly key: string,
    private readonly clock: Clock,
  ) {}

  /** The entry's phase; changed only by {@link Entry.transition}. */
  get phase(): EntryPhase {
    return this.#phase;
  }

  /** The generation views show: the running one, else the last one started (0 before the first). */
  get generation(): GenerationStamp {
    return shownGeneration(this.#phase);
  }

  /**
   * The one owner transition: moves the entry to the phase {@link nextPhase} gives for `event`.
   * Leaving `running` stops that generation's cap timer (a later cap of it would be ignored
   * anyway; stopping it keeps no timer alive for nothing). Returns whether the phase changed.
   */
  transition(event: PhaseEvent): boolean {
    const next = nextPhase(this.#phase, event);
    if (next === undefined) return false;
    if (this.#phase.kind === 'running') this.clock.clearTimeout(this.#phase.capTimer);
    this.#phase = next;
    return true;
  }

  /** Stops the entry's timers without changing its phase (close, forgetting the entry). */
  stopTimers(): void {
    if (this.#phase.kind === 'running') this.clock.clearTimeout(this.#phase.capTimer);
    this.clock.clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
  }
}
