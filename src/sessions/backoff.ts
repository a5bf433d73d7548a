/**
 * Reconnect backoff: exponential with "equal jitter" (half fixed, half random), so a fleet of
 * supervisors that lost the same server at the same instant does not reconnect in lockstep.
 */

/** Backoff tuning. */
export interface BackoffOptions {
  /** Delay before the second attempt (ms). */
  baseMs: number;
  /** Upper bound of any delay (ms). */
  maxMs: number;
}

/** Delay before attempt number `attempt` (1-based; attempt 1 is immediate). `random` ∈ [0, 1). */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  if (attempt <= 1) return 0;
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** (attempt - 2));
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
}
