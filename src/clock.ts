/**
 * The time seam of the host. Readiness caps, waiter deadlines, cooldowns, breaker cooldowns and
 * backoff all read time and schedule timers only through a {@link Clock}, so tests drive them with
 * a manual clock instead of patching global timers (and can run concurrently).
 */

/** An opaque timer handle returned by {@link Clock.setTimeout}. */
export type TimerHandle = { readonly __timer: unique symbol } | object;

/** Time and one-shot timers. */
export interface Clock {
  /** Milliseconds, same origin as `Date.now()`. */
  now(): number;
  /** Calls `callback` once after `ms`. Real timers are unref'd: they never keep a host alive. */
  setTimeout(callback: () => void, ms: number): TimerHandle;
  /** Cancels a timer; unknown or fired handles are ignored. */
  clearTimeout(handle: TimerHandle | undefined): void;
}

/** The real clock, with unref'd timers. */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout(callback: () => void, ms: number): TimerHandle {
    const timer = setTimeout(callback, Math.max(0, ms));
    timer.unref();
    return timer;
  },
  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) clearTimeout(handle as NodeJS.Timeout);
  },
});

/** Resolves after `ms` on `clock`, or rejects with the signal's reason when it aborts first. */
export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
