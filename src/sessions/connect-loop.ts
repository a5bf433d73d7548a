/**
 * The connect loop of one supervised server (docs/ARCHITECTURE.md §7): single-flight connect attempts,
 * exponential backoff with jitter, a reconnect budget that only a *proven* session refills, and
 * parking with a periodic probe once the budget is spent.
 *
 * Its state is one discriminated union, each state carrying its own data (cockatiel's circuit
 * breaker is the model): the attempt and the abort controller of `connecting`, the deadline and
 * the timer of `backoff`, the reason and the probe timer of `parked`, the session of `ready`, the
 * reason of `closed`. Nothing about the loop lives beside the union, so there is no flag to get out
 * of step with it. Every continuation — the end of an `open`, a timer firing — first checks that
 * the state it started from is still the current one (by identity), and does nothing otherwise
 * (an open that ends after `close()` only kills its session).
 *
 * The transitions (`request` is any caller's request; a warm-up differs only in `backoff`):
 *
 * | state      | event                 | next                                                          |
 * |------------|-----------------------|---------------------------------------------------------------|
 * | idle       | request               | connecting, or parked if the budget is spent                  |
 * | connecting | open succeeds         | ready (closes the breaker)                                    |
 * | connecting | open fails            | parked if the budget is spent, idle if the breaker is open, else backoff |
 * | ready      | the session ends      | idle — not reconnected at once: the next call does it         |
 * | backoff    | timer, or request     | connecting (parked if spent), or idle while the breaker is open |
 * | parked     | probe timer, request  | connecting, with one attempt of budget                        |
 * | any        | close                 | closed (timers cleared, an attempt in flight aborted)         |
 *
 * Every other pair changes nothing. While the breaker is open its cooldown replaces the backoff:
 * the loop stops retrying by itself and the half-open probe requests the next attempt, whose
 * outcome is the probe's verdict.
 */
import type { Clock, TimerHandle } from '../clock.js';
import { DEADLINE, withDeadline } from '../deadline.js';
import type { ServerFailure } from '../discovery/types.js';
import { backoffDelay } from './backoff.js';
import type { CircuitBreaker } from './breaker.js';
import type { SessionOptions } from './types.js';

/** What the loop needs of a session: whether it is still usable, and how to end it at once. */
export interface LoopSession {
  readonly alive: boolean;
  kill(): Promise<void>;
}

/** Why a supervisor was closed: by the host, or by a reload of the profile (decides call errors). */
export type CloseReason = 'host' | 'reload';

/**
 * The loop's state. `revival` (idle, connecting, backoff): the loop was parked since its last
 * session, so the next session revives the server.
 */
export type ConnectState<S> =
  | { kind: 'idle'; revival: boolean }
  | { kind: 'connecting'; attempt: number; abort: AbortController; revival: boolean; settled: Promise<void> }
  | { kind: 'ready'; session: S }
  | { kind: 'backoff'; attempt: number; until: number; timer: TimerHandle; revival: boolean }
  | { kind: 'parked'; reason: string; since: number; nextProbeAt: number; timer: TimerHandle }
  | { kind: 'closed'; reason: CloseReason };

type Connecting<S> = Extract<ConnectState<S>, { kind: 'connecting' }>;
type Backoff = Extract<ConnectState<unknown>, { kind: 'backoff' }>;

/** The parked state, as the `parked` hook receives it. */
export type ParkedState = Extract<ConnectState<unknown>, { kind: 'parked' }>;

/** The outcome of the next connect attempt, as a caller waiting for it hears it. */
export type AttemptResult<S> =
  | { kind: 'session'; session: S }
  | { kind: 'failure'; failure: ServerFailure; exitedAfterSession: boolean }
  | { kind: 'parked' }
  | { kind: 'closed' };

/** Who asks for a connect. A warm-up never cuts a backoff short: no caller is waiting on it. */
export type ConnectReason = 'call' | 'probe' | 'signal' | 'warm-up';

/** What the loop asks of its supervisor. */
export interface ConnectLoopHooks<S> {
  /** Opens a session; rejects when it could not. `signal` aborts when the loop is closed. */
  open(signal: AbortSignal): Promise<S>;
  /** What a failed open means. */
  classify(error: unknown): ServerFailure;
  /** Why the loop parks when `attempts` sessions in a row ended before any call proved one. */
  budgetSpent(attempts: number): ServerFailure;
  /** The loop is ready with `session` (waiters hear of it right after). */
  established(session: S, facts: { first: boolean; revival: boolean }): void;
  /** The loop parked (waiters have heard of it). */
  parked(state: ParkedState): void;
}

/** What a connect loop is built from. */
export interface ConnectLoopDeps<S> {
  clock: Clock;
  /** ∈ [0, 1), for the backoff's jitter. */
  random: () => number;
  options: Pick<SessionOptions, 'reconnectBudget' | 'backoffBaseMs' | 'backoffMaxMs' | 'parkProbeIntervalMs'>;
  /** Told of every attempt's outcome; while it is open, the loop waits for its probe. */
  breaker: Pick<CircuitBreaker, 'state' | 'connectFailed' | 'sessionEstablished'>;
  hooks: ConnectLoopHooks<S>;
}

/** The connect loop of one server. */
export class ConnectLoop<S extends LoopSession> {
  private current: ConnectState<S> = { kind: 'idle', revival: false };
  /** Attempts since a call last proved a session: the part of the reconnect budget spent. */
  private spent = 0;
  /** Sessions established so far. */
  private sessions = 0;
  private readonly waiters = new Set<(result: AttemptResult<S>) => void>();

  constructor(private readonly deps: ConnectLoopDeps<S>) {}

  /** The current state (read-only: only the loop's transitions change it). */
  get state(): Readonly<ConnectState<S>> {
    return this.current;
  }

  /** Connect attempts since a call last succeeded. */
  get attemptsSinceProven(): number {
    return this.spent;
  }

  /** How many sessions were established so far (none: the next one is the first). */
  get established(): number {
    return this.sessions;
  }

  /** The session, when the loop is ready and the session still alive. */
  live(): S | undefined {
    const state = this.current;
    return state.kind === 'ready' && state.session.alive ? state.session : undefined;
  }

  /** Connects now unless a session is live or being made; revives a parked loop; cuts a backoff short. */
  request(reason: ConnectReason): void {
    const state = this.current;
    switch (state.kind) {
      case 'closed':
      case 'connecting':
        return;
      case 'ready':
        if (!state.session.alive) this.startAttempt(false);
        return;
      case 'idle':
        this.startAttempt(state.revival);
        return;
      case 'backoff':
        if (reason === 'warm-up') return;
        this.deps.clock.clearTimeout(state.timer);
        this.afterWait(state.revival);
        return;
      case 'parked':
        this.deps.clock.clearTimeout(state.timer);
        // One attempt; the budget allows more only once a call proves the session.
        this.spent = Math.max(0, this.deps.options.reconnectBudget - 1);
        this.startAttempt(true);
        return;
    }
  }

  /** A call succeeded on the session: the reconnect budget is refilled. */
  proven(): void {
    this.spent = 0;
  }

  /**
   * `session` died or was given up: back to idle if it is the current one (true then). Not
   * reconnected at once: a server that exits when idle must not be kept alive by us, and a
   * crashing one is respawned by the next call, under its backoff.
   */
  sessionEnded(session: S): boolean {
    const state = this.current;
    if (state.kind !== 'ready' || state.session !== session) return false;
    this.current = { kind: 'idle', revival: false };
    return true;
  }

  /**
   * Waits for the outcome of the next connect attempt (of the one in flight, if any), at most
   * `ms`. Resolves to {@link DEADLINE} when the time ran out; rejects when `signal` aborts.
   */
  nextAttempt(ms: number, signal: AbortSignal | undefined): Promise<AttemptResult<S> | typeof DEADLINE> {
    let waiter!: (result: AttemptResult<S>) => void;
    const outcome = new Promise<AttemptResult<S>>((resolve) => {
      waiter = resolve;
    });
    this.waiters.add(waiter);
    const raced = withDeadline(outcome, { ms, clock: this.deps.clock, signal });
    const forget = (): void => {
      this.waiters.delete(waiter);
    };
    raced.then(forget, forget);
    return raced;
  }

  /**
   * Closes the loop: timers cleared, an attempt in flight aborted, waiters told. Returns the
   * session to end (when ready) and a promise of the aborted attempt's end (its late session, if
   * any, killed). Closing twice returns nothing to end.
   */
  close(reason: CloseReason): { session: S | undefined; attempt: Promise<void> } {
    const state = this.current;
    if (state.kind === 'closed') return { session: undefined, attempt: Promise.resolve() };
    this.current = { kind: 'closed', reason };
    if (state.kind === 'backoff' || state.kind === 'parked') this.deps.clock.clearTimeout(state.timer);
    if (state.kind === 'connecting') state.abort.abort(new Error('the host is closing'));
    this.settle({ kind: 'closed' });
    return { session: state.kind === 'ready' ? state.session : undefined, attempt: state.kind === 'connecting' ? state.settled : Promise.resolve() };
  }

  /** A wait ended (backoff over, or cut short): while the breaker is open, its probe decides. */
  private afterWait(revival: boolean): void {
    if (this.deps.breaker.state.kind === 'open') {
      this.current = { kind: 'idle', revival };
      return;
    }
    this.startAttempt(revival);
  }

  private startAttempt(revival: boolean): void {
    if (this.spent >= this.deps.options.reconnectBudget) {
      // Sessions came up but died before any call succeeded: connecting alone never refills the
      // budget, so a server that dies on every call parks instead of churning.
      this.park(this.deps.hooks.budgetSpent(this.spent));
      return;
    }
    const attempt = ++this.spent;
    let finished!: () => void;
    const settled = new Promise<void>((resolve) => {
      finished = resolve;
    });
    const state: Connecting<S> = { kind: 'connecting', attempt, abort: new AbortController(), revival, settled };
    this.current = state;
    void this.run(state).then(finished, finished);
  }

  /** One attempt: open, then hand the outcome on, unless the loop left this state meanwhile. */
  private async run(state: Connecting<S>): Promise<void> {
    let session: S;
    try {
      session = await this.deps.hooks.open(state.abort.signal);
    } catch (error) {
      if (this.current === state) this.failed(state, error);
      return;
    }
    if (this.current !== state) {
      // Closed while it was opening: nobody will use it.
      await session.kill();
      return;
    }
    this.sessions++;
    this.current = { kind: 'ready', session };
    // A successful initialisation, on any transport, closes the breaker.
    this.deps.breaker.sessionEstablished();
    this.deps.hooks.established(session, { first: this.sessions === 1, revival: state.revival });
    this.settle({ kind: 'session', session });
  }

  private failed(state: Connecting<S>, error: unknown): void {
    const failure = this.deps.hooks.classify(error);
    // The reconnect a half-open probe asked for has failed: that is the probe's verdict.
    this.deps.breaker.connectFailed();
    this.settle({ kind: 'failure', failure, exitedAfterSession: this.sessions > 0 && failure.kind === 'exited' });
    if (this.spent >= this.deps.options.reconnectBudget) {
      this.park(failure);
      return;
    }
    if (this.deps.breaker.state.kind === 'open') {
      this.current = { kind: 'idle', revival: state.revival };
      return;
    }
    const { clock, options, random } = this.deps;
    const delay = backoffDelay(state.attempt + 1, { baseMs: options.backoffBaseMs, maxMs: options.backoffMaxMs }, random);
    const backoff: Backoff = {
      kind: 'backoff',
      attempt: state.attempt,
      until: clock.now() + delay,
      revival: state.revival,
      timer: clock.setTimeout(() => {
        if (this.current === backoff) this.afterWait(backoff.revival);
      }, delay),
    };
    this.current = backoff;
  }

  private park(failure: ServerFailure): void {
    const { clock, options } = this.deps;
    const since = clock.now();
    const parked: ParkedState = {
      kind: 'parked',
      reason: `${failure.kind}: ${failure.message}`,
      since,
      nextProbeAt: since + options.parkProbeIntervalMs,
      timer: clock.setTimeout(() => {
        if (this.current === parked) this.request('probe');
      }, options.parkProbeIntervalMs),
    };
    this.current = parked;
    this.settle({ kind: 'parked' });
    this.deps.hooks.parked(parked);
  }

  private settle(result: AttemptResult<S>): void {
    for (const waiter of [...this.waiters]) waiter(result);
  }
}
