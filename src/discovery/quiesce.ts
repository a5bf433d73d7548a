/**
 * The quiescence ladder: how the coordinator retires a profile's discovery body.
 *
 *   1. cooperative — bump the generation, raise the cancel flag, `Atomics.notify`; the body kills
 *      its process groups from its own loop and returns;
 *   2. terminate   — after `quiesceGraceMs`, abort the piscina task: the worker is terminated, and
 *      we wait for its `exit` event;
 *   3. kill        — SIGKILL every process group whose leader the body recorded in the
 *      SharedArrayBuffer — and, after a terminated worker, every process carrying the body's
 *      spawn marker (one spawned in the instant before it could be recorded) — and wait (bounded)
 *      until `/proc` shows none of them running.
 *
 * A retirement resolves only when the worker has exited and every recorded process is gone
 * (zombies are counted as dead, and reported); it says how long each rung took. Every wait of the
 * ladder (the grace, the hard waits, the kill poll) runs on the injected {@link Clock}, so a test
 * decides when a rung gives up; the durations it reports are real (`performance.now()`).
 */
import { once } from 'node:events';
import type { MessagePort, Worker } from 'node:worker_threads';
import { type Clock, sleepOn } from '../clock.js';
import { DEADLINE, withDeadline } from '../deadline.js';
import { type ProcessState, pidsWithEnvEntry, processState, runningGroupMembers, signalGroup } from '../process/proc.js';
import type { EntrySlots } from './slots.js';
import type { BodyResult } from './types.js';

/** Which rung finished the job. */
export type QuiesceRung = 'idle' | 'cooperative' | 'terminate' | 'kill';

/** What `quiesce()` did and how long each rung took. */
export interface QuiesceReport {
  key: string;
  /** The generation that was retired (undefined when no body had run). */
  generation: number | undefined;
  reason: string;
  /** The highest rung that was needed. */
  rung: QuiesceRung;
  cooperativeMs?: number;
  terminateMs?: number;
  killMs?: number;
  totalMs: number;
  /** True when the worker exited and no recorded process is still running. */
  quiesced: boolean;
  /** Recorded pids (or group members) still running after the kill rung: a failure. */
  survivors: number[];
  /** Recorded pids left as zombies (dead, not reaped: their worker was terminated). */
  zombies: number[];
}

/** Quiescences so far: how many by rung, and recent durations of each rung (ms). */
export interface QuiesceStats {
  total: number;
  byRung: Record<QuiesceRung, number>;
  cooperativeMs: number[];
  terminateMs: number[];
  killMs: number[];
}

/** One discovery body, as the coordinator started it. */
export interface Owner {
  generation: number;
  abort: AbortController;
  /** Settles (never rejects) when the piscina task is over. */
  task: Promise<BodyResult | undefined>;
  taskSettled: boolean;
  port: MessagePort;
  /** The `NAME=value` environment entry every server this body spawns carries. */
  marker?: string;
}

/** The coordinator's state of one profile key. */
export interface Entry {
  slots: EntrySlots;
  owner: Owner | undefined;
  /** Zombies left by terminated workers, remembered for stats. */
  zombies: Set<number>;
}

/** How the kill rung reaches processes: `kill(2)` and `/proc`, or a test's stand-in. */
export interface ProcessControl {
  /** SIGKILLs the process group led by `pgid`. */
  kill(pgid: number): void;
  /** True while the leader or any member of its group is running. */
  running(pgid: number): boolean;
  state(pid: number): ProcessState;
  /** Pids whose environment carries exactly `entry` (`NAME=value`). */
  marked(entry: string): number[];
}

/** The real processes. */
export const systemProcesses: ProcessControl = Object.freeze({
  kill: (pgid: number): void => void signalGroup(pgid, 'SIGKILL'),
  running: (pgid: number): boolean => processState(pgid) === 'alive' || runningGroupMembers(pgid).length > 0,
  state: processState,
  marked: pidsWithEnvEntry,
});

/** What the ladder needs from its coordinator. */
export interface LadderOptions {
  clock: Clock;
  /** The cooperative rung's grace before the worker is terminated (ms). */
  graceMs: number;
  /** How long the terminate and kill rungs wait for an exit before giving up (ms). */
  hardWaitMs: number;
  /** The pool's worker running on `threadId`, if it is still there. */
  workerOf(threadId: number): Worker | undefined;
  processes?: ProcessControl;
}

/** Between two checks of the kill rung: short, since a SIGKILLed group usually goes at once. */
const KILL_POLL_MS = 5;

function elapsedSince(start: number): number {
  return Math.round((performance.now() - start) * 100) / 100;
}

/** Walks the ladder for one entry at a time; holds no state of its own. */
export class QuiescenceLadder {
  private readonly processes: ProcessControl;

  constructor(private readonly options: LadderOptions) {
    this.processes = options.processes ?? systemProcesses;
  }

  /**
   * Retires the entry's current generation (synchronously, before the first await), then climbs
   * until the body's worker has exited (or returned) and every process it recorded is gone.
   * Without an entry nothing ever ran: the report is `idle`.
   */
  async retire(key: string, reason: string, entry: Entry | undefined): Promise<QuiesceReport> {
    const started = performance.now();
    const owner = entry?.owner;
    const report: QuiesceReport = { key, generation: owner?.generation, reason, rung: 'idle', totalMs: 0, quiesced: true, survivors: [], zombies: [] };
    if (!entry) return report;
    entry.slots.retire();
    if (owner) owner.port.close();
    if (owner && !owner.taskSettled) await this.stopBody(entry, owner, report);

    const recorded = entry.slots.pids();
    // A worker terminated between a spawn and its recording left a process no slot names (the
    // pid reaches the slot a few instructions after the fork, but a busy or nice'd thread can be
    // stopped right there): its marker names it. A body that returned recorded all it spawned.
    if (report.rung === 'terminate' && owner?.marker !== undefined) {
      for (const pid of this.processes.marked(owner.marker)) if (!recorded.includes(pid)) recorded.push(pid);
    }
    if (recorded.length > 0) {
      // Processes outlived the body (terminated worker, or a cooperative cancel that missed one).
      report.rung = 'kill';
      const killStart = performance.now();
      const { survivors, zombies } = await this.killRecorded(entry, recorded);
      report.killMs = elapsedSince(killStart);
      report.survivors = survivors;
      report.zombies = zombies;
      if (survivors.length > 0) report.quiesced = false;
    }
    if (entry.slots.liveOwners() > 0) report.quiesced = false;
    if (entry.owner === owner && owner?.taskSettled) entry.owner = undefined;
    report.totalMs = elapsedSince(started);
    return report;
  }

  /** Cooperative rung, then (if the grace ran out) the terminate rung. */
  private async stopBody(entry: Entry, owner: Owner, report: QuiesceReport): Promise<void> {
    report.rung = 'cooperative';
    const cooperativeStart = performance.now();
    const finished = (await withDeadline(owner.task, { ms: this.options.graceMs, clock: this.options.clock })) !== DEADLINE;
    report.cooperativeMs = elapsedSince(cooperativeStart);
    if (finished) return;
    report.rung = 'terminate';
    const terminateStart = performance.now();
    const exited = await this.terminateOwner(entry, owner);
    report.terminateMs = elapsedSince(terminateStart);
    if (!exited) report.quiesced = false;
  }

  /** Terminate rung: abort the piscina task and wait for the worker's exit. */
  private async terminateOwner(entry: Entry, owner: Owner): Promise<boolean> {
    const threadId = entry.slots.ownerThread(owner.generation);
    const worker = threadId === undefined ? undefined : this.options.workerOf(threadId);
    const exit = worker ? once(worker, 'exit') : Promise.resolve();
    owner.abort.abort(new Error('quiescence: cooperative cancel did not finish in time'));
    const deadline = this.options.clock.now() + this.options.hardWaitMs;
    const exited = (await withDeadline(Promise.all([exit, owner.task]), { ms: this.options.hardWaitMs, clock: this.options.clock })) !== DEADLINE;
    if (!exited) return false;
    // A body can take ownership after the look above: its generation check passed before the
    // retirement, and a busy machine kept its thread off the CPU until after it. It took it in the
    // worker the abort terminated, which cannot leave it any more: wait for that worker's exit
    // too (a worker the pool no longer lists is gone), then leave for it.
    const lateThread = threadId === undefined ? entry.slots.ownerThread(owner.generation) : undefined;
    const lateWorker = lateThread === undefined ? undefined : this.options.workerOf(lateThread);
    if (lateWorker !== undefined && lateWorker.threadId !== -1) {
      const remaining = Math.max(0, deadline - this.options.clock.now());
      if ((await withDeadline(once(lateWorker, 'exit'), { ms: remaining, clock: this.options.clock })) === DEADLINE) return false;
    }
    // The body cannot decrement its ownership from a terminated thread: do it for it, exactly once.
    entry.slots.leaveOwner(owner.generation);
    return true;
  }

  /** Kill rung: SIGKILL each recorded group and wait until none of its members is running. */
  private async killRecorded(entry: Entry, pids: number[]): Promise<{ survivors: number[]; zombies: number[] }> {
    const { clock, hardWaitMs } = this.options;
    const processes = this.processes;
    for (const pid of pids) processes.kill(pid);
    const deadline = clock.now() + hardWaitMs;
    let running = pids.filter((pid) => processes.running(pid));
    while (running.length > 0 && clock.now() < deadline) {
      await sleepOn(clock, KILL_POLL_MS);
      // Again: a group member forked between the first kill and now is killed too.
      for (const pid of running) processes.kill(pid);
      running = running.filter((pid) => processes.running(pid));
    }
    const zombies: number[] = [];
    for (const pid of pids) {
      if (running.includes(pid)) continue;
      if (processes.state(pid) === 'zombie') {
        zombies.push(pid);
        entry.zombies.add(pid);
      }
      entry.slots.clearPid(pid);
    }
    return { survivors: running, zombies };
  }
}

/** Durations kept per rung for the stats (a ring; enough for p99). */
const TIMING_HISTORY = 512;

function pushBounded(list: number[], value: number): void {
  list.push(value);
  if (list.length > TIMING_HISTORY) list.shift();
}

/** The quiescence part of the discovery stats. */
export class QuiesceHistory {
  private readonly stats: QuiesceStats = { total: 0, byRung: { idle: 0, cooperative: 0, terminate: 0, kill: 0 }, cooperativeMs: [], terminateMs: [], killMs: [] };

  /** Counts one retirement and keeps its rungs' durations. */
  record(report: QuiesceReport): void {
    const stats = this.stats;
    stats.total++;
    stats.byRung[report.rung]++;
    // A cooperative retirement is measured whole (retire to quiesced), the hard rungs one by one.
    if (report.rung === 'cooperative') pushBounded(stats.cooperativeMs, report.totalMs);
    if (report.terminateMs !== undefined) pushBounded(stats.terminateMs, report.terminateMs);
    if (report.killMs !== undefined) pushBounded(stats.killMs, report.killMs);
  }

  /** A copy (callers may keep it). */
  snapshot(): QuiesceStats {
    const stats = this.stats;
    return { total: stats.total, byRung: { ...stats.byRung }, cooperativeMs: [...stats.cooperativeMs], terminateMs: [...stats.terminateMs], killMs: [...stats.killMs] };
  }
}
