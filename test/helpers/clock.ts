/**
 * A manual clock for deterministic tests: time moves only when the test calls `advance`, and
 * timers fire in deadline order (ties in creation order), each in its own macrotask turn so
 * promise continuations scheduled by one timer run before the next fires.
 */
import type { Clock, TimerHandle } from '../../src/clock.js';

interface Timer {
  id: number;
  at: number;
  callback: () => void;
}

/** A {@link Clock} driven by hand. */
export class ManualClock implements Clock {
  private current: number;
  private nextId = 1;
  private readonly timers = new Map<number, Timer>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer: Timer = { id: this.nextId++, at: this.current + Math.max(0, ms), callback };
    this.timers.set(timer.id, timer);
    return { id: timer.id };
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle && typeof handle === 'object' && 'id' in handle) this.timers.delete((handle as { id: number }).id);
  }

  /** Timers still scheduled. */
  pending(): number {
    return this.timers.size;
  }

  /** The deadline of the earliest timer, if any. */
  nextAt(): number | undefined {
    let earliest: number | undefined;
    for (const timer of this.timers.values()) if (earliest === undefined || timer.at < earliest) earliest = timer.at;
    return earliest;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      const due = [...this.timers.values()].filter((timer) => timer.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers.delete(due.id);
      this.current = Math.max(this.current, due.at);
      due.callback();
      await flush();
    }
    this.current = target;
    await flush();
  }
}

/** Lets every queued promise continuation and immediate run. */
export async function flush(): Promise<void> {
  for (let index = 0; index < 5; index++) await new Promise((resolve) => setImmediate(resolve));
}

/** A promise resolved by hand: a barrier for forcing interleavings. */
export interface Barrier<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
  readonly settled: boolean;
}

/** Creates a {@link Barrier}. */
export function barrier<T = void>(): Barrier<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  let settled = false;
  const promise = new Promise<T>((res, rej) => {
    resolve = (value) => {
      settled = true;
      res(value);
    };
    reject = (error) => {
      settled = true;
      rej(error);
    };
  });
  return {
    promise,
    resolve,
    reject,
    get settled() {
      return settled;
    },
  };
}
