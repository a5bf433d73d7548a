/**
 * The lifeline: stdio servers die with the host, however the host dies.
 *
 * Stdio servers are spawned as leaders of their own sessions/process groups (so a group kill
 * reaches `npx`/shell grandchildren), which also means nothing takes them down when the host
 * process ends without `host.close()`: `process.exit()`, an uncaught exception, SIGTERM, SIGKILL.
 * A server that ignores stdin EOF — or a hung discovery server — lives on, reparented to init.
 * Node has no `prctl(PR_SET_PDEATHSIG)`, and a signal handler cannot help against SIGKILL, so:
 *
 * - every stdio server the library spawns gets one extra environment variable, the host's marker
 *   ({@link Lifeline.env}); its descendants inherit it, so `/proc/<pid>/environ` identifies the
 *   whole tree — wrapper grandchildren, and even descendants that left the group with `setsid`;
 * - one reaper per host, a `/bin/sh` script (about 1 MB, not a 30 MB Node process), blocks reading
 *   a pipe whose only write end the host holds. The kernel closes that end when the host dies,
 *   whatever killed it, so the reaper's read returns EOF; it then SIGKILLs the process group of
 *   every process carrying the marker, and the process itself, in a few bounded rounds (a wrapper
 *   that is being killed may just have forked), and exits. It leads its own process group, so a
 *   Ctrl-C to the host's group or a `kill(-pgid)` of the host does not take it down first;
 * - for `process.exit()` and uncaught exceptions, an `exit` hook does the same scan-and-kill
 *   synchronously from Node ({@link Lifeline.killAllSync}) before the process is gone.
 *
 * No SIGTERM/SIGINT listener is ever installed: adding one changes how Node reacts to the signal
 * (it no longer exits), and the library must not change the host's signal behaviour. The reaper
 * covers signals, SIGKILL included.
 *
 * Out of reach, honestly:
 * - a descendant that clears or replaces its environment (`env -i`, an `execve` with a fresh
 *   environment) is found only through the process group of a marked process still alive at scan
 *   time; if it also left the group (`setsid`), or every marked member of its group is already
 *   gone, nothing identifies it;
 * - processes of another user (setuid programs, `sudo`): their environ is unreadable and
 *   `kill()` is refused;
 * - the reaper itself being SIGKILLed (`kill -9 -1`, the OOM killer): the exit hook still covers
 *   `process.exit()` and uncaught exceptions, not signals;
 * - a pid that dies and is reused by an unrelated process between the scan and the kill (a window
 *   of microseconds, the same one every pid-based kill has);
 * - platforms without `/proc` (the library is Linux-only in this respect: there the scans find
 *   nothing and the lifeline is inert).
 * The reaper matches the marker as a substring of the environ (a fixed-length random value makes
 * a false match require a copy of this very marker); the Node-side scan matches the exact entry.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { pidsWithEnvEntry, processGroupOf, processState, signalGroup } from './proc.js';

/** The environment variable that marks every process spawned for a host. */
export const LIFELINE_ENV = 'MCP_SUPERVISOR_LIFELINE';

/** How long {@link Lifeline.killAllSync} may block (it runs in `exit` handlers, which cannot await). */
const KILL_SYNC_BUDGET_MS = 250;
/** Pause between two sync kill rounds, so processes already SIGKILLed get to finish exiting. */
const KILL_SYNC_PAUSE_MS = 1;
/** Bounded wait of {@link Lifeline.close} for the reaper to exit (per step: EOF, then SIGKILL). */
const CLOSE_WAIT_MS = 2000;

/**
 * The reaper. `$1`: the marker `NAME=value`; `$2`: the host's process group, never signalled (on
 * `close()` the host is alive, and a marked process can never legitimately share its group).
 *
 * `read` is a shell builtin, so the reaper is a single process blocked in read(2) until EOF (no
 * trap is set and it has no child while it waits, so nothing interrupts that read). Then: one
 * `grep -l` over every environ (one exec, not one per process), and for each match read its pgrp
 * from `/proc/<pid>/stat` (the fields after the last ") ", since the command name may contain
 * spaces) and SIGKILL group and pid. Rounds repeat until a scan finds nothing (a killed process
 * is still listed until it has exited, and a wrapper may fork between scan and kill), at most 20.
 * `kill -9 -N` is the group form both dash and bash accept (dash has no `kill --`).
 * stdout/stderr are /dev/null, so errors need no redirection.
 */
const REAPER_SCRIPT = `m=$1 keep=$2
while read -r _; do :; done
n=0
while [ "$n" -lt 20 ]; do
  found=
  for f in $(grep -lF -e "$m" /proc/[0-9]*/environ); do
    p=\${f#/proc/}; p=\${p%/environ}
    [ "$p" = "$$" ] && continue
    read -r s < "/proc/$p/stat" || continue
    set -- \${s##*") "}
    if [ "$3" -gt 1 ] && [ "$3" != "$keep" ] && [ "$3" != "$$" ]; then kill -9 -"$3"; fi
    kill -9 "$p"
    found=1
  done
  [ -z "$found" ] && exit 0
  n=$((n + 1))
  sleep 0.02 || :
done
exit 0
`;

/** Lifelines whose host is still running; the `exit` hook kills what each of them marked. */
const live = new Set<Lifeline>();
let exitHookInstalled = false;

/**
 * The process-wide `exit` hook (registered once): `process.exit()` and uncaught exceptions run
 * `exit` listeners, signals and SIGKILL do not (the reaper covers those).
 */
function killAllOnExit(): void {
  for (const lifeline of live) {
    try {
      lifeline.killAllSync();
    } catch {
      // An exception in an exit listener would replace the host's exit code: swallow it.
    }
  }
}

/** Blocks the calling thread for `ms` (only ever a millisecond or two, inside killAllSync). */
function pauseSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * One host's lifeline: a marker for the environment of every stdio server it spawns, and a tiny
 * reaper process that kills every marked process when the host dies. Linux (`/proc`) only.
 *
 * Start one per host with {@link Lifeline.start}, add {@link Lifeline.env} to the environment of
 * every stdio server (main thread and discovery workers alike), and call {@link Lifeline.close}
 * after a normal shutdown has ended every server.
 */
export class Lifeline {
  /** `{ [LIFELINE_ENV]: marker }`: add it to the environment of every spawned stdio server. */
  readonly env: Readonly<Record<string, string>>;
  /** The `NAME=value` entry that identifies this host's processes in `/proc/<pid>/environ`. */
  private readonly entry: string;
  private readonly child: ChildProcess;
  private exitSeen = false;
  private readonly exitWaiters: (() => void)[] = [];
  private closing: Promise<void> | undefined;

  private constructor(value: string) {
    this.env = Object.freeze({ [LIFELINE_ENV]: value });
    this.entry = `${LIFELINE_ENV}=${value}`;
    this.child = spawn('/bin/sh', ['-c', REAPER_SCRIPT, 'mcp-supervisor-lifeline', this.entry, String(processGroupOf(process.pid) ?? 0)], {
      // Its own process group: a Ctrl-C to the host's group or a kill(-pgid) of the host must
      // not end the reaper before it has done its job.
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      // Not the host's environment: the reaper must not carry a marker itself (an outer host's
      // reaper would kill it before it reaped this host's servers), nor the host's secrets.
      // LC_ALL=C: grep then matches bytes, no locale decoding of other processes' environments.
      env: { PATH: [process.env.PATH, '/usr/bin', '/bin'].filter(Boolean).join(':'), LC_ALL: 'C' },
      windowsHide: true,
    });
    // A spawn failure (no /bin/sh) leaves the exit hook as the only guard; never crash the host.
    this.child.on('error', () => this.markExited());
    this.child.once('exit', () => this.markExited());
    const stdin = this.child.stdin as Socket | null;
    // EPIPE if the reaper died and we end() later: nothing to report, the exit is recorded.
    stdin?.on('error', () => undefined);
    // Never keep the host's event loop alive: the reaper is a safety net, not work.
    stdin?.unref();
    this.child.unref();
  }

  /**
   * Spawns this host's reaper and registers the lifeline with the process-wide `exit` hook.
   * Synchronous, never throws for a failed spawn (the `exit` hook still works without a reaper).
   * Call it from the host's main thread.
   */
  static start(): Lifeline {
    const lifeline = new Lifeline(`${process.pid}-${randomBytes(12).toString('hex')}`);
    live.add(lifeline);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', killAllOnExit);
    }
    return lifeline;
  }

  /** The reaper's pid (undefined if it could not be spawned). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** True while the reaper process is running (it stops after close() or when the host dies). */
  get running(): boolean {
    return !this.exitSeen && this.child.pid !== undefined;
  }

  /**
   * Synchronously SIGKILLs every process carrying this host's marker — its process group and the
   * pid itself — repeating the scan until none is left and every killed pid has exited (zombies
   * count as exited), within a budget of {@link KILL_SYNC_BUDGET_MS}. Never signals the calling
   * process's own group. Meant for `exit` handlers, which cannot await.
   * @returns the pids that were found carrying the marker (and killed).
   */
  killAllSync(): number[] {
    const ownGroup = processGroupOf(process.pid);
    const killed = new Set<number>();
    const deadline = performance.now() + KILL_SYNC_BUDGET_MS;
    for (;;) {
      const found = pidsWithEnvEntry(this.entry);
      for (const pid of found) {
        killed.add(pid);
        const pgid = processGroupOf(pid);
        if (pgid !== undefined && pgid !== ownGroup) signalGroup(pgid, 'SIGKILL');
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // ESRCH: it died between the scan and here.
        }
      }
      const done = found.length === 0 && [...killed].every((pid) => processState(pid) !== 'alive');
      if (done || performance.now() >= deadline) return [...killed];
      pauseSync(KILL_SYNC_PAUSE_MS);
    }
  }

  /**
   * Ends the reaper after a normal shutdown: its stdin is ended, so it runs its scan (which kills
   * any marked process still alive — call this once every server has been ended) and exits.
   * Resolves once it has exited, SIGKILLing it after a bounded wait; never rejects. Idempotent.
   * Also unregisters the lifeline from the `exit` hook.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    live.delete(this);
    const pid = this.child.pid;
    if (this.exitSeen || pid === undefined) return;
    // Keep the loop alive until the reaper's exit is seen (a caller awaiting close() expects it
    // to resolve); the waits below are bounded, and the handle goes away with the exit.
    this.child.ref();
    try {
      this.child.stdin?.end();
      if (!(await this.exitWithin(CLOSE_WAIT_MS))) {
        signalGroup(pid, 'SIGKILL');
        await this.exitWithin(CLOSE_WAIT_MS);
      }
    } catch {
      // close() never throws.
    } finally {
      this.child.unref();
    }
  }

  private markExited(): void {
    this.exitSeen = true;
    for (const waiter of this.exitWaiters.splice(0)) waiter();
  }

  private exitWithin(ms: number): Promise<boolean> {
    if (this.exitSeen) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      timer.unref();
      this.exitWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
