/**
 * Summary statistics of latency samples. Percentiles use the nearest-rank method (the value of
 * an actual sample, never an interpolation), so with n < 100 samples p99 is the maximum: the
 * tables say how many samples each figure has.
 */

/** A summary of samples, in the samples' unit. */
export interface Summary {
  n: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile `p` (0 < p ≤ 100) of ascending `sorted`. NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? Number.NaN;
}

/** Summarises `samples` (any order). Every field is NaN (n = 0) when there are none. */
export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const n = sorted.length;
  return {
    n,
    min: sorted[0] ?? Number.NaN,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[n - 1] ?? Number.NaN,
    mean: n === 0 ? Number.NaN : sorted.reduce((sum, value) => sum + value, 0) / n,
  };
}

/** Rounds to two decimals, for the JSON. */
export function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

/** A summary with every field rounded to two decimals. */
export function roundSummary(summary: Summary): Summary {
  return {
    n: summary.n,
    min: round2(summary.min),
    p50: round2(summary.p50),
    p90: round2(summary.p90),
    p99: round2(summary.p99),
    max: round2(summary.max),
    mean: round2(summary.mean),
  };
}
