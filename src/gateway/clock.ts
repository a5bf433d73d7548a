/**
 * Time and timer seams of the gateway module.
 *
 * Every rule of the bind ledger and the watchdog is a statement about elapsed time, so they read
 * time only through a {@link Clock} and schedule only through an {@link IntervalScheduler}. Tests
 * inject a manual clock and a manual scheduler instead of patching global timers, which keeps
 * them deterministic and lets them run concurrently.
 */

import type { Clock as HostClock } from '../clock.js';

/**
 * A source of wall-clock milliseconds (same unit and origin as `Date.now()`): the `now` part of
 * the host's {@link HostClock}, so one injected clock serves both the host and its gateway.
 */
export type Clock = Pick<HostClock, 'now'>;

/** The real clock (the host's). */
export { systemClock } from '../clock.js';

/** Schedules a repeating callback; the watchdog runner uses it for its sweeps. */
export interface IntervalScheduler {
  /** Calls `fn` every `ms` milliseconds until cancelled; returns a handle for {@link clearInterval}. */
  setInterval(fn: () => void, ms: number): unknown;
  /** Cancels a handle returned by {@link setInterval}. */
  clearInterval(handle: unknown): void;
}

/**
 * Node's timers, unref'd: a watchdog is a background chore and must never be the reason a host
 * process stays alive.
 */
export const systemScheduler: IntervalScheduler = Object.freeze({
  setInterval(fn: () => void, ms: number): unknown {
    const handle = setInterval(fn, ms);
    handle.unref();
    return handle;
  },
  clearInterval(handle: unknown): void {
    clearInterval(handle as NodeJS.Timeout);
  },
});
