/** Discovery's options: what a host may tune, and their validation (through `src/validate.ts`). */
import { availableParallelism } from 'node:os';
import { integerOption } from '../validate.js';
import { PID_SLOTS } from './slots.js';

/** Tuning of discovery. Every field is optional; defaults are in {@link resolveDiscoveryOptions}. */
export interface DiscoveryOptions {
  /**
   * Worker threads in the pool. Default: one less than the machine's cores (at least 1, at most
   * 4), so a core stays free for the host's own main thread.
   */
  maxThreads?: number;
  /**
   * OS scheduling priority (nice, 0–19) of the servers discovery spawns — their process and, on
   * Linux, their scheduler autogroup. Default 19: discovery yields the CPU to the host; sessions
   * keep normal priority. Discovery worker threads take this value but never more than 5, so a
   * retired body still gets a core to stop on a busy host.
   */
  niceness?: number;
  /** Idle workers are ended after this long (ms). Default 30 000. */
  idleTimeoutMs?: number;
  /** Servers of one profile connected at once. Default 4. */
  serverConcurrency?: number;
  /** Per-server deadline for connect + listing (ms). Default 15 000. */
  connectTimeoutMs?: number;
  /** Cooperative rung of the quiescence ladder (ms) before the worker is terminated. Default 250. */
  quiesceGraceMs?: number;
  /** How long the terminate and kill rungs may wait for an exit before giving up (ms). Default 2000. */
  quiesceHardWaitMs?: number;
}

/** {@link DiscoveryOptions} with every default filled in. */
export type ResolvedDiscoveryOptions = Required<DiscoveryOptions>;

/**
 * Discovery's counts and durations are refused past the last exact integer (the host's own
 * options are not: that difference predates the shared validator and is kept as it was).
 */
function count(name: keyof DiscoveryOptions, value: number | undefined, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  return integerOption(`discovery.${name}`, value, fallback, { max });
}

/** Validates discovery options and fills in defaults. @throws McpSupervisorError INVALID_CONFIG */
export function resolveDiscoveryOptions(options: DiscoveryOptions = {}): ResolvedDiscoveryOptions {
  return {
    maxThreads: count('maxThreads', options.maxThreads, Math.max(1, Math.min(4, availableParallelism() - 1))),
    niceness: integerOption('discovery.niceness', options.niceness, 19, { min: 0, max: 19, expected: 'an integer from 0 to 19' }),
    idleTimeoutMs: count('idleTimeoutMs', options.idleTimeoutMs, 30_000),
    // Each server's process group is recorded in one pid slot of the profile's shared buffer.
    serverConcurrency: count('serverConcurrency', options.serverConcurrency, 4, PID_SLOTS),
    connectTimeoutMs: count('connectTimeoutMs', options.connectTimeoutMs, 15_000),
    quiesceGraceMs: count('quiesceGraceMs', options.quiesceGraceMs, 250),
    quiesceHardWaitMs: count('quiesceHardWaitMs', options.quiesceHardWaitMs, 2000),
  };
}
