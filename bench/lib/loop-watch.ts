/**
 * Watching the main thread while some work runs: how long its event loop was held up, and why.
 *
 * - `monitorEventLoopDelay` at 1 ms resolution: max and per-tick percentiles (a single 3 s stall
 *   is one tick, so per-tick percentiles understate stalls);
 * - a 1 ms interval probe that adds up the wall time spent in ticks of at least `stallMs`
 *   (a time-weighted view of the same thing);
 * - from `/proc/self/task/<pid>/schedstat` (the main thread's tid is the pid): the CPU time the
 *   main thread used, and the time it was runnable but waiting for a CPU. The first is work done
 *   on the main thread; the second is the OS giving the cores to other threads and processes,
 *   which on a small shared machine is what stalls a loop that does no work.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { round2 } from './stats.js';

/** What {@link watchMainThread} saw, in ms. Histogram values include the 1 ms timer period. */
export interface LoopWatch {
  wallMs: number;
  max: number;
  p99: number;
  p50: number;
  mean: number;
  ticks: number;
  /** Wall time spent in ticks of at least `stallMs`. */
  stalledMs: number;
  stalls: number;
  /** CPU time used by the main thread; undefined where schedstat is unavailable. */
  cpuMs: number | undefined;
  /** Time the main thread was runnable but not running (waiting for a core). */
  runQueueMs: number | undefined;
}

function schedstat(): [number, number] | undefined {
  try {
    const [onCpu, waiting] = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return onCpu !== undefined && waiting !== undefined && Number.isFinite(onCpu) && Number.isFinite(waiting) ? [onCpu, waiting] : undefined;
  } catch {
    return undefined;
  }
}

/** Runs `work` while watching the main thread's event loop; resolves with both. */
export async function watchMainThread<T>(work: () => Promise<T>, { stallMs = 50 } = {}): Promise<{ result: T; watch: LoopWatch }> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let stalledMs = 0;
  let stalls = 0;
  let last = performance.now();
  const probe = setInterval(() => {
    const now = performance.now();
    if (now - last >= stallMs) {
      stalledMs += now - last;
      stalls++;
    }
    last = now;
  }, 1);
  histogram.enable();
  const schedBefore = schedstat();
  const started = performance.now();
  let result: T;
  try {
    result = await work();
  } finally {
    histogram.disable();
    clearInterval(probe);
  }
  const wallMs = performance.now() - started;
  const schedAfter = schedstat();
  const ms = (ns: number): number => round2(ns / 1e6);
  const delta = (index: 0 | 1): number | undefined => (schedBefore && schedAfter ? ms(schedAfter[index] - schedBefore[index]) : undefined);
  return {
    result,
    watch: {
      wallMs: round2(wallMs),
      max: ms(histogram.max),
      p99: ms(histogram.percentile(99)),
      p50: ms(histogram.percentile(50)),
      mean: ms(histogram.mean),
      ticks: histogram.count,
      stalledMs: round2(stalledMs),
      stalls,
      cpuMs: delta(0),
      runQueueMs: delta(1),
    },
  };
}
