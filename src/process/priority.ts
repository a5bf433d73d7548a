/**
 * CPU priority of the servers discovery spawns: lowered so discovery yields the CPU to the host,
 * and given back when yielding would cost a server its discovery.
 *
 * A stdio server leads its own session (`setsid`, for group kills), and with the kernel's
 * scheduler autogroups (Linux `CONFIG_SCHED_AUTOGROUP`, on by default on most distributions)
 * every session is a scheduling group of its own that competes with the host's at equal weight:
 * a process nice value then only orders threads *within* the server's session. Twenty servers
 * starting at nice 19 still took twenty shares of the CPU against the host's one, and the host's
 * main thread waited up to ~80 ms at a time for a core. Writing the value to
 * `/proc/<pid>/autogroup` gives the whole session that weight (its wrapper children included).
 *
 * The kernel rate-limits that write: without `CAP_SYS_ADMIN` one autogroup change per 100 ms is
 * accepted *system-wide*, and the others fail with `EAGAIN` (`proc_sched_autogroup_set_nice`).
 * An unprivileged host starting twenty servers at once would see nineteen of them keep full
 * weight; {@link AutogroupWriter} queues the refused writes and retries them at that pace. Written
 * by hand because nothing in the ecosystem wraps `/proc/<pid>/autogroup`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';

/** How one write to `/proc/<pid>/autogroup` went. */
export type AutogroupWriteResult = 'applied' | 'rate-limited' | 'impossible';

/** Writes a nice value to a process's autogroup. */
export function writeAutogroupNice(pid: number, nice: number): AutogroupWriteResult {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
    return 'applied';
  } catch (error) {
    // EAGAIN: the kernel's rate limit for unprivileged writers. Anything else (ENOENT: gone, or
    // no autogroups on this kernel; EPERM; EINVAL) will not change by waiting.
    return (error as NodeJS.ErrnoException).code === 'EAGAIN' ? 'rate-limited' : 'impossible';
  }
}

/** Where the writer waits between retries (injectable for tests). */
export interface RetryScheduler {
  schedule(callback: () => void, ms: number): { cancel(): void };
}

const realScheduler: RetryScheduler = {
  schedule(callback, ms) {
    const timer = setTimeout(callback, ms);
    // Never what keeps a discovery worker (or a host) alive.
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};

/** Options of an {@link AutogroupWriter}; the defaults are the kernel's limit and the real `/proc`. */
export interface AutogroupWriterOptions {
  write?: (pid: number, nice: number) => AutogroupWriteResult;
  scheduler?: RetryScheduler;
  /** Pause before retrying a rate-limited write: the kernel accepts one per 100 ms (`HZ / 10`). */
  retryMs?: number;
  /** Retries per pid before it is given up (a server still starting after that is a slow one). */
  maxAttempts?: number;
}

/**
 * Sets autogroup nice values, queuing the writes the kernel's rate limit refuses and retrying
 * them in order, one per {@link AutogroupWriterOptions.retryMs}. A pid is retried until the write
 * applies, fails for good, is {@link forget forgotten} (its process exited: the pid may be
 * reused by a process that is not ours) or runs out of attempts. The latest value asked for a pid
 * is the one written.
 */
export class AutogroupWriter {
  private readonly pending = new Map<number, { nice: number; attempts: number }>();
  private retry: { cancel(): void } | undefined;
  private readonly write: (pid: number, nice: number) => AutogroupWriteResult;
  private readonly scheduler: RetryScheduler;
  private readonly retryMs: number;
  private readonly maxAttempts: number;
  private applied = 0;
  private rateLimited = 0;
  private abandoned = 0;

  constructor(options: AutogroupWriterOptions = {}) {
    this.write = options.write ?? writeAutogroupNice;
    this.scheduler = options.scheduler ?? realScheduler;
    this.retryMs = options.retryMs ?? 110;
    this.maxAttempts = options.maxAttempts ?? 100;
  }

  /**
   * Asks for `nice` on the autogroup of `pid`: written now when the kernel accepts it, else
   * queued. Returns what happened to the first attempt.
   */
  set(pid: number, nice: number): AutogroupWriteResult {
    const queued = this.pending.get(pid);
    if (queued) {
      queued.nice = nice;
      return 'rate-limited';
    }
    // Behind a queue, a write now would take the slot of an earlier pid: wait in line.
    if (this.pending.size > 0) {
      this.pending.set(pid, { nice, attempts: 0 });
      return 'rate-limited';
    }
    const result = this.write(pid, nice);
    if (result === 'applied') this.applied++;
    if (result === 'rate-limited') {
      this.rateLimited++;
      this.pending.set(pid, { nice, attempts: 1 });
      this.arm();
    }
    return result;
  }

  /** Drops what is queued for `pid` (its process exited; the pid is no longer ours). */
  forget(pid: number): void {
    this.pending.delete(pid);
    if (this.pending.size === 0) this.disarm();
  }

  /** Writes queued now; what was applied, refused by the rate limit, or given up since creation. */
  stats(): { queued: number; applied: number; rateLimited: number; abandoned: number } {
    return { queued: this.pending.size, applied: this.applied, rateLimited: this.rateLimited, abandoned: this.abandoned };
  }

  private arm(): void {
    this.retry ??= this.scheduler.schedule(() => {
      this.retry = undefined;
      this.flush();
    }, this.retryMs);
  }

  private disarm(): void {
    this.retry?.cancel();
    this.retry = undefined;
  }

  /** Writes queued values in order until the kernel refuses one; the rest wait for the next slot. */
  private flush(): void {
    for (const [pid, entry] of this.pending) {
      const result = this.write(pid, entry.nice);
      if (result === 'rate-limited') {
        this.rateLimited++;
        entry.attempts++;
        if (entry.attempts >= this.maxAttempts) {
          this.pending.delete(pid);
          this.abandoned++;
          continue;
        }
        break;
      }
      this.pending.delete(pid);
      if (result === 'applied') this.applied++;
    }
    if (this.pending.size > 0) this.arm();
  }
}

/** The writer of this thread (the kernel's limit is global; one queue per thread keeps order). */
export const autogroups = new AutogroupWriter();

/**
 * Lowers the CPU priority of a server process to `nice`: its own (main-thread) nice value, and
 * that of its scheduler autogroup, through {@link autogroups}. Unprivileged processes may only
 * make either nicer. Best effort: false when neither applied nor was queued.
 */
export function lowerProcessPriority(pid: number, nice: number, writer: AutogroupWriter = autogroups): boolean {
  let applied = false;
  try {
    setPriority(pid, nice);
    applied = true;
  } catch {
    // Gone already, or not permitted: the autogroup may still apply.
  }
  return writer.set(pid, nice) !== 'impossible' || applied;
}

/**
 * Gives a process its normal nice value back, where that is permitted: an unprivileged process
 * cannot make another less nice (inside a server's own autogroup the process nice orders only the
 * session's own threads, so the group's weight, {@link restoreProcessPriority}, is what counts).
 */
export function restoreProcessNice(pid: number): void {
  try {
    setPriority(pid, 0);
  } catch {
    // EACCES without CAP_SYS_NICE.
  }
}

/**
 * Gives a server's scheduling group normal weight back (autogroup nice 0, which an unprivileged
 * process may do to its own), and the server process its nice value where permitted.
 */
export function restoreProcessPriority(pid: number, writer: AutogroupWriter = autogroups): void {
  restoreProcessNice(pid);
  writer.set(pid, 0);
}

/**
 * Milliseconds the main thread of `pid` has spent runnable but waiting for a CPU (field 2 of
 * `/proc/<pid>/schedstat`); undefined where the kernel does not keep it or the process is gone.
 */
export function runQueueWaitMs(pid: number): number | undefined {
  try {
    const waitingNs = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]);
    return Number.isFinite(waitingNs) ? waitingNs / 1e6 : undefined;
  } catch {
    return undefined;
  }
}
