/**
 * When discovery stops yielding the CPU. Discovery lowers its servers' priority so a burst of
 * start-ups leaves the host's event loop alone; when the machine stays busy for longer (other
 * processes at normal priority), a server at nice 19 gets ≈ 1.5 % of a core and would time out
 * for nothing. A starvation watch checks a server's processes once per window; when they spent at
 * least half of a window waiting for a CPU, the server gets normal priority back, once.
 */
import { processGroupMembers } from '../process/proc.js';
import { restoreProcessNice, restoreProcessPriority, runQueueWaitMs } from '../process/priority.js';

/** The share of a window a server must have waited for a CPU to count as starved. */
export const STARVED_SHARE = 0.5;

/** The longest window: a start-up burst is over well before; later waits are not a burst. */
export const MAX_STARVATION_WINDOW_MS = 5000;

/** The window of a server with this connect timeout: half of it, at most {@link MAX_STARVATION_WINDOW_MS}. */
export function starvationWindowMs(connectTimeoutMs: number): number {
  return Math.min(connectTimeoutMs / 2, MAX_STARVATION_WINDOW_MS);
}

/** How a watch reads and restores processes (the real `/proc` by default; injectable for tests). */
export interface StarvationProbe {
  /** Milliseconds each running process of the group led by `pid` has waited for a CPU. */
  waits(pid: number): number[];
  /** Gives the group led by `pid` normal priority back. */
  restore(pid: number): void;
  now(): number;
}

const realProbe: StarvationProbe = {
  waits(pid) {
    const waits: number[] = [];
    for (const member of processGroupMembers(pid)) {
      if (member.state !== 'alive') continue;
      const waited = runQueueWaitMs(member.pid);
      if (waited !== undefined) waits.push(waited);
    }
    return waits;
  },
  restore(pid) {
    // One autogroup per session (the leader's write covers it); process nice values per member.
    restoreProcessPriority(pid);
    for (const member of processGroupMembers(pid)) {
      if (member.pid !== pid && member.state === 'alive') restoreProcessNice(member.pid);
    }
  },
  now: () => performance.now(),
};

/**
 * One server attempt's watch. {@link check} is called once per window with the pid of the server
 * process the attempt runs now; it returns the group's longest wait for a CPU (ms) when it gave
 * the server normal priority back, else undefined. The longest wait of the group counts: a
 * wrapper waits in `wait()` while its child runs.
 */
export class StarvationWatch {
  private last: { pid: number; at: number; waited: number };

  constructor(private readonly probe: StarvationProbe = realProbe) {
    this.last = { pid: 0, at: probe.now(), waited: 0 };
  }

  check(pid: number): number | undefined {
    const at = this.probe.now();
    const waited = Math.max(0, ...this.probe.waits(pid));
    // A new process (a respawn) started waiting from zero, after the previous check.
    const before = this.last.pid === pid ? this.last.waited : 0;
    const window = at - this.last.at;
    this.last = { pid, at, waited };
    if (window <= 0 || waited - before < window * STARVED_SHARE) return undefined;
    this.probe.restore(pid);
    return waited;
  }
}
