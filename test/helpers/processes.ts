/**
 * Process inspection and killing for tests, read straight from /proc (Linux only).
 *
 * Liveness comes from `/proc/<pid>/stat`, never from `kill(pid, 0)`: a zombie answers
 * `kill(pid, 0)` as if it were alive. Zombies matter here because an orphan's parent becomes
 * pid 1, and in containers and sandboxes pid 1 is often not a real init: it reaps late (this
 * sandbox: seconds to minutes) or never, so a killed orphan can stay a zombie for a long time.
 * A zombie holds no memory, fds or pipes: for every check below it counts as dead.
 *
 * Everything that waits polls /proc with a bounded deadline: it waits for a state to be
 * reached, it never sleeps a fixed time and hopes.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { pidsWithEnvEntry } from '../../src/process/proc.js';

/** What /proc says about a pid. */
export type ProcState = 'alive' | 'zombie' | 'gone';

/** The fields of `/proc/<pid>/stat` the tests use. */
export interface ProcStat {
  pid: number;
  /** Command name (truncated to 15 characters by the kernel). */
  comm: string;
  /** One-letter state: R, S, D, T, t, Z, X, … */
  state: string;
  ppid: number;
  pgid: number;
}

/** Reads `/proc/<pid>/stat`; `undefined` when the pid does not exist (any more). */
export function readStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // comm is in parentheses and may itself contain spaces and ')': split after the last ')'.
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  return {
    pid,
    comm: text.slice(text.indexOf('(') + 1, close),
    state: fields[0] ?? '?',
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
  };
}

/** `'alive'`, `'zombie'` (exited, not reaped: dead for every practical purpose) or `'gone'`. */
export function procState(pid: number): ProcState {
  const stat = readStat(pid);
  if (stat === undefined) return 'gone';
  return stat.state === 'Z' || stat.state === 'X' ? 'zombie' : 'alive';
}

/** Every pid currently listed in /proc. */
export function listPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** The command line of a pid, space-joined; `''` for zombies and vanished pids. */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}

/**
 * Live pids whose *initial* environment holds `MCP_FIXTURE_TAG=<tag>`. `/proc/<pid>/environ`
 * shows the environment the process was exec'd with, which is exactly what a child inherits,
 * so every descendant of a tagged process carries the tag too (unless someone scrubs the env).
 * Zombies have an empty environ and are therefore never listed. The calling process is never
 * listed.
 */
export function pidsWithTag(tag: string, envName = 'MCP_FIXTURE_TAG'): number[] {
  return pidsWithEnvEntry(`${envName}=${tag}`).filter((pid) => procState(pid) === 'alive');
}

/** Live members of process group `pgid`. */
export function pidsInGroup(pgid: number): number[] {
  return listPids().filter((pid) => {
    const stat = readStat(pid);
    return stat !== undefined && stat.pgid === pgid && stat.state !== 'Z' && stat.state !== 'X';
  });
}

/** The process group of the calling process: the one group {@link killTree} refuses to kill. */
export function ownProcessGroup(): number {
  const stat = readStat(process.pid);
  if (stat === undefined) throw new Error('cannot read /proc/self/stat');
  return stat.pgid;
}

/**
 * Polls `check` every `intervalMs` until it returns true or `timeoutMs` passed; resolves to
 * whether it became true.
 */
export async function pollUntil(check: () => boolean, { timeoutMs = 5000, intervalMs = 10 } = {}): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (performance.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

/** Waits until none of `pids` is alive; resolves to those still alive at the deadline. */
export async function waitGone(pids: readonly number[], timeoutMs = 5000): Promise<number[]> {
  const alive = () => pids.filter((pid) => procState(pid) === 'alive');
  await pollUntil(() => alive().length === 0, { timeoutMs });
  return alive();
}

/** Sends `signal` to `pid`; false when there was nothing to signal. */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** Outcome of {@link killTree}. */
export interface KillTreeResult {
  /** The strongest signal that had to be sent; `'none'` if the group was already empty. */
  signalled: 'none' | 'SIGTERM' | 'SIGKILL';
  /** Members still alive after the whole ladder (should be empty). */
  survivors: number[];
}

/**
 * Kills the whole process group `pgid` with a ladder: SIGTERM, wait up to `graceMs` for every
 * member to die, then SIGKILL and wait up to `killWaitMs`. Refuses to touch the caller's own
 * group (a child spawned without `detached` shares it).
 */
export async function killTree(pgid: number, { graceMs = 1000, killWaitMs = 3000 } = {}): Promise<KillTreeResult> {
  if (!Number.isInteger(pgid) || pgid <= 1) throw new Error(`killTree: refusing pgid ${pgid}`);
  if (pgid === ownProcessGroup()) throw new Error(`killTree: ${pgid} is the caller's own process group`);
  if (pidsInGroup(pgid).length === 0) return { signalled: 'none', survivors: [] };
  signal(-pgid, 'SIGTERM');
  if (await pollUntil(() => pidsInGroup(pgid).length === 0, { timeoutMs: graceMs })) {
    return { signalled: 'SIGTERM', survivors: [] };
  }
  signal(-pgid, 'SIGKILL');
  await pollUntil(() => pidsInGroup(pgid).length === 0, { timeoutMs: killWaitMs });
  return { signalled: 'SIGKILL', survivors: pidsInGroup(pgid) };
}

/** What keeps the event loop alive when this module loads (the runner's own pipes). */
const BASELINE_RESOURCES = process.getActiveResourcesInfo().sort();

/**
 * Fails the file if, once every test and teardown is over, anything beyond the runner's own
 * resources still keeps the event loop alive (a ref'd timer, socket, child or worker). Polls a
 * bounded while: a closed socket's handle goes away a tick or two after `close()` resolves.
 */
export function guardOpenHandles(testApi: { after: { always: (title: string, fn: () => Promise<void>) => void } }): void {
  testApi.after.always('no open handles are left behind', async () => {
    const extra = (): string[] => {
      const left = [...BASELINE_RESOURCES];
      return process.getActiveResourcesInfo().filter((name) => {
        const index = left.indexOf(name);
        if (index < 0) return true;
        left.splice(index, 1);
        return false;
      });
    };
    if (await pollUntil(() => extra().length === 0, { timeoutMs: 3000 })) return;
    throw new Error(`open handles left behind: ${extra().join(', ')}`);
  });
}
