/**
 * Process trees for the lifeline tests and bench: several detached process groups, as the library
 * spawns stdio servers, every process carrying the environment it is given (the fixture tag and a
 * lifeline marker), started and waited for until every member is up.
 *
 * Layouts:
 *   - `test`:  the stdio fixture with `--ignore-stdin-eof --ignore-sigterm` (stdin a pipe from the
 *              spawner, like a real server); a `/bin/sh` wrapper with a `sleep` grandchild; and a
 *              shell whose `setsid sleep` child escaped into a session and group of its own.
 *   - `bench`: five servers: four stdio fixtures `--ignore-stdin-eof --ignore-sigterm` and one
 *              `--wrapper` tree (node wrapper → /bin/sh → node server + sleep grandchild).
 *
 * "Up" is read from pid files each tree writes, and for the escaper from /proc (setsid done, sleep
 * exec'd), so the trees measured are running processes, not processes still being exec'd.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pollUntil, readStat } from './processes.js';

/** The built stdio fixture (as `fixtures.ts` has it, without loading the SDK client that module imports). */
const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/stdio-server.js', import.meta.url));

/** One process of a tree. */
export interface TreeProcess {
  role: string;
  pid: number;
  pgid: number;
}

/** A spawned tree. */
export interface SpawnedTree {
  /** Every process of every group (and the escaper), once up. */
  processes: TreeProcess[];
  /** The group leaders this process spawned (one per group), for awaiting their `exit`. */
  leaders: ChildProcess[];
  /** Process groups of the leaders: what the library itself would know and kill. */
  leaderGroups: number[];
}

export type TreeLayout = 'test' | 'bench';

const SERVER_FLAGS = ['--ignore-stdin-eof', '--ignore-sigterm'];
/** The shell writes `<role> <pid>` lines here, like the fixtures' `--pid-file`. */
const PIDS_ENV = 'LIFELINE_TREE_PID_FILE';
const WRAPPER_SCRIPT = `sleep 600 & echo "grandchild $!" >> "$${PIDS_ENV}"; echo "shell $$" >> "$${PIDS_ENV}"; wait`;
// In a non-interactive shell a background job stays in the shell's group, so `setsid` (not a
// group leader) calls setsid() itself and execs sleep: $! is the escaper's final pid.
const ESCAPER_SCRIPT = `setsid sleep 600 & echo "escaper $!" >> "$${PIDS_ENV}"; echo "escaper-shell $$" >> "$${PIDS_ENV}"; wait`;

interface Pending {
  child: ChildProcess;
  pidFile: string;
  roles: readonly string[];
}

function readRoles(pidFile: string): Map<string, number> {
  const roles = new Map<string, number>();
  let text = '';
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch {
    return roles;
  }
  for (const line of text.split('\n')) {
    const [role, pid] = line.trim().split(' ');
    if (role && pid && /^\d+$/.test(pid)) roles.set(role, Number(pid));
  }
  return roles;
}

function spawnLeader(command: string, args: readonly string[], env: Record<string, string>, stdin: 'pipe' | 'ignore'): ChildProcess {
  const child = spawn(command, [...args], { detached: true, stdio: [stdin, 'ignore', 'ignore'], env });
  child.on('error', () => undefined); // reported as "not up" below
  child.stdin?.on('error', () => undefined); // EPIPE once the server is dead
  return child;
}

/**
 * Spawns the layout's groups with `env` (added to this process's environment) and resolves once
 * every process is up. On a timeout, kills what it spawned and throws.
 */
export async function spawnTree(layout: TreeLayout, options: { env: Record<string, string>; tmpDir: string; label?: string; timeoutMs?: number }): Promise<SpawnedTree> {
  const env = { ...(process.env as Record<string, string>), ...options.env };
  const prefix = join(options.tmpDir, options.label ?? 'tree');
  const pending: Pending[] = [];
  const fixture = (name: string, flags: readonly string[], roles: readonly string[]) => {
    const pidFile = `${prefix}-${name}.pids`;
    pending.push({ child: spawnLeader(process.execPath, [STDIO_FIXTURE, ...flags, '--pid-file', pidFile], env, 'pipe'), pidFile, roles });
  };
  const shell = (name: string, script: string, roles: readonly string[]) => {
    const pidFile = `${prefix}-${name}.pids`;
    pending.push({ child: spawnLeader('/bin/sh', ['-c', script], { ...env, [PIDS_ENV]: pidFile }, 'ignore'), pidFile, roles });
  };
  if (layout === 'test') {
    fixture('server', SERVER_FLAGS, ['server']);
    shell('wrapper', WRAPPER_SCRIPT, ['shell', 'grandchild']);
    shell('escaper', ESCAPER_SCRIPT, ['escaper-shell', 'escaper']);
  } else {
    for (let i = 1; i <= 4; i++) fixture(`server-${i}`, SERVER_FLAGS, ['server']);
    fixture('wrapper', [...SERVER_FLAGS, '--wrapper'], ['wrapper', 'shell', 'sleeper', 'server']);
  }
  const leaders = pending.map((entry) => entry.child);
  const leaderGroups = leaders.map((child) => child.pid ?? -1);

  const collect = (): TreeProcess[] | undefined => {
    const processes: TreeProcess[] = [];
    for (const entry of pending) {
      const roles = readRoles(entry.pidFile);
      for (const role of entry.roles) {
        const pid = roles.get(role);
        const stat = pid === undefined ? undefined : readStat(pid);
        if (pid === undefined || stat === undefined) return undefined;
        // The escaper is up once setsid() is done and sleep is exec'd.
        if (role === 'escaper' && (stat.pgid !== pid || stat.comm !== 'sleep')) return undefined;
        processes.push({ role, pid, pgid: stat.pgid });
      }
    }
    return processes;
  };
  let processes: TreeProcess[] | undefined;
  const up = await pollUntil(() => (processes = collect()) !== undefined, { timeoutMs: options.timeoutMs ?? 15_000, intervalMs: 5 });
  if (!up || processes === undefined) {
    killGroups(leaderGroups);
    for (const entry of pending) for (const pid of readRoles(entry.pidFile).values()) killPid(pid);
    const states = pending.map((entry) => `${entry.child.spawnfile} pid ${entry.child.pid} exit ${entry.child.exitCode}/${entry.child.signalCode} roles ${JSON.stringify([...readRoles(entry.pidFile)])}`);
    throw new Error(`lifeline tree (${layout}) not up within ${options.timeoutMs ?? 15_000} ms: ${states.join('; ')}`);
  }
  return { processes, leaders, leaderGroups };
}

/** SIGKILLs each process group (`kill(-pgid)`); ignores groups already gone. */
export function killGroups(pgids: readonly number[]): void {
  for (const pgid of new Set(pgids)) {
    if (Number.isInteger(pgid) && pgid > 1) killPid(-pgid);
  }
}

function killPid(target: number): void {
  try {
    process.kill(target, 'SIGKILL');
  } catch {
    // already gone
  }
}
