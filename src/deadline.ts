/**
 * The one deadline race of the library: a promise against a timer on the injected {@link Clock}
 * and an optional abort signal, with the timer and the listener always cleaned up. Every bounded
 * wait (a waiter's `maxWaitMs`, a connect bound, a drain) goes through it, so each is testable
 * with a manual clock and none leaks a timer or a listener.
 */
import type { Clock, TimerHandle } from './clock.js';

/** What {@link withDeadline} resolves to when the time ran out first. */
export const DEADLINE: unique symbol = Symbol('deadline');

/** Bounds of one {@link withDeadline} race. */
export interface DeadlineOptions {
  /** The most to wait (ms); undefined: no time bound. */
  ms?: number | undefined;
  clock: Clock;
  /** Rejects the race when it aborts first (already aborted: at once). */
  signal?: AbortSignal | undefined;
  /** The error to reject with on abort. Default: the signal's reason. */
  onAbort?: (reason: unknown) => unknown;
}

/**
 * Resolves to `promise`'s value, or to {@link DEADLINE} when `ms` passed first; rejects with
 * `promise`'s error, or with `onAbort(reason)` when the signal aborted first. The promise itself
 * is left running (the caller decides what an abandoned wait means).
 */
export function withDeadline<T>(promise: Promise<T>, options: DeadlineOptions): Promise<T | typeof DEADLINE> {
  const { ms, clock, signal } = options;
  const abortError = (): unknown => (options.onAbort ? options.onAbort(signal?.reason) : signal?.reason);
  if (signal?.aborted) return Promise.reject(abortError());
  if (ms === undefined && signal === undefined) return promise;
  return new Promise<T | typeof DEADLINE>((resolve, reject) => {
    let timer: TimerHandle | undefined;
    const onAbort = (): void => {
      cleanup();
      reject(abortError());
    };
    const cleanup = (): void => {
      clock.clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    if (ms !== undefined) {
      timer = clock.setTimeout(() => {
        cleanup();
        resolve(DEADLINE);
      }, ms);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        cleanup();
        reject(error);
      },
    );
  });
}
