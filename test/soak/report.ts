/**
 * Small counting and printing helpers of the soak: tallies by label, medians, bounded example
 * lists (so a long run keeps a constant memory footprint), and the RSS trend verdict.
 */

/** Counts by label. */
export class Tally {
  private readonly counts = new Map<string, number>();

  add(label: string, by = 1): void {
    this.counts.set(label, (this.counts.get(label) ?? 0) + by);
  }

  get(label: string): number {
    return this.counts.get(label) ?? 0;
  }

  total(): number {
    let sum = 0;
    for (const value of this.counts.values()) sum += value;
    return sum;
  }

  entries(): [string, number][] {
    return [...this.counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  }

  /** `label=count, …` on one line, biggest first. */
  line(): string {
    const entries = this.entries();
    return entries.length === 0 ? '(none)' : entries.map(([label, count]) => `${label}=${count}`).join(', ');
  }
}

/** Counts by label plus the first few examples of each. */
export class Examples {
  private readonly byLabel = new Map<string, { count: number; examples: string[] }>();

  constructor(private readonly keep = 4) {}

  add(label: string, example: string): void {
    let entry = this.byLabel.get(label);
    if (!entry) {
      entry = { count: 0, examples: [] };
      this.byLabel.set(label, entry);
    }
    entry.count++;
    if (entry.examples.length < this.keep) entry.examples.push(example);
  }

  get size(): number {
    return this.byLabel.size;
  }

  /** True while `label` has fewer than `keep` examples (worth computing an expensive one). */
  wants(label: string): boolean {
    return (this.byLabel.get(label)?.examples.length ?? 0) < this.keep;
  }

  total(): number {
    let sum = 0;
    for (const entry of this.byLabel.values()) sum += entry.count;
    return sum;
  }

  /** Indented lines: `label ×count` then its examples. */
  lines(indent = '  '): string[] {
    const out: string[] = [];
    const sorted = [...this.byLabel.entries()].sort((a, b) => b[1].count - a[1].count);
    for (const [label, { count, examples }] of sorted) {
      out.push(`${indent}${label}  ×${count}`);
      for (const example of examples) out.push(`${indent}    e.g. ${example}`);
    }
    return out;
  }
}

/** Median of a list (NaN when empty). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Percentile (nearest rank) of a list (NaN when empty). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Bytes → MB with one decimal. */
export function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The policy of the memory-growth check, printed with its verdict. */
export interface GrowthPolicy {
  /** Samples taken before this many ms into the fault phase are warm-up and ignored. */
  warmUpMs: number;
  /** Fail only if the last third's median exceeds the middle third's by this ratio… */
  maxRatio: number;
  /** …and by at least this many bytes. */
  minGrowthBytes: number;
  /** Fewer samples than this after warm-up: no verdict. */
  minSamples: number;
}

/** Verdict of the growth check over one series. */
export interface GrowthVerdict {
  checked: boolean;
  grew: boolean;
  middle: number;
  last: number;
  samples: number;
  text: string;
}

/** Compares the median of the last third of `values` with the middle third's. */
export function growthVerdict(values: readonly number[], policy: GrowthPolicy, what: string): GrowthVerdict {
  const n = values.length;
  if (n < policy.minSamples) {
    return { checked: false, grew: false, middle: Number.NaN, last: Number.NaN, samples: n, text: `${what}: ${n} samples after warm-up, fewer than ${policy.minSamples}: not judged` };
  }
  const third = Math.floor(n / 3);
  const middle = median(values.slice(third, 2 * third));
  const last = median(values.slice(2 * third));
  const grew = last > middle * policy.maxRatio && last - middle > policy.minGrowthBytes;
  const text = `${what}: median of middle third ${mb(middle)}, of last third ${mb(last)} (${((last / middle - 1) * 100).toFixed(1)}%, ${n} samples) → ${grew ? 'GREW' : 'stable'}`;
  return { checked: true, grew, middle, last, samples: n, text };
}
