/**
 * Seams for the gateway tests: a clock and an interval scheduler moved by hand, and a deferred
 * barrier. No global fake timers, so test files and tests may run concurrently.
 */
import type { Clock, IntervalScheduler } from '../../src/gateway/index.js';

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): number {
    this.#now += ms;
    return this.#now;
  }
}

/** An interval scheduler whose ticks are fired by the test. */
export class ManualScheduler implements IntervalScheduler {
  readonly #timers = new Map<number, { fn: () => void; ms: number }>();
  #next = 1;
  setInterval(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#timers.set(id, { fn, ms });
    return id;
  }
  clearInterval(handle: unknown): void {
    this.#timers.delete(handle as number);
  }
  /** Number of live intervals. */
  get active(): number {
    return this.#timers.size;
  }
  /** The periods of the live intervals. */
  get periods(): number[] {
    return [...this.#timers.values()].map((t) => t.ms);
  }
  /** Fires every live interval once. */
  tick(): void {
    for (const timer of [...this.#timers.values()]) timer.fn();
  }
}

/** A promise resolved by hand. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** Creates a {@link Deferred}: the barrier tests use instead of sleeping. */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
