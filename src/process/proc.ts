/**
 * Process liveness read from `/proc`, and process-group signalling.
 *
 * Liveness never uses `kill(pid, 0)`: it succeeds on a zombie, which has exited but not yet been
 * reaped, so it would report a dead server as alive. `/proc/<pid>/stat` tells the three states
 * apart. Killing always targets the process group (`kill(-pgid)`), because stdio servers are
 * spawned as group leaders and wrappers such as `npx`, `uvx` or a shell leave grandchildren behind.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** What `/proc` says of a pid. `zombie`: exited, not yet reaped (holds no resources but its pid). */
export type ProcessState = 'alive' | 'zombie' | 'gone';

interface StatFields {
  state: string;
  ppid: number;
  pgrp: number;
}

/** Parses `/proc/<pid>/stat`; the command name may contain spaces and parentheses, so split after the last `)`. */
function readStat(pid: number): StatFields | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '?', ppid: Number(fields[1]), pgrp: Number(fields[2]) };
}

/** The state of one pid. `X` (dead) counts as gone; `Z` as zombie; everything else as alive. */
export function processState(pid: number): ProcessState {
  if (!Number.isInteger(pid) || pid <= 0) return 'gone';
  const stat = readStat(pid);
  if (stat === undefined || stat.state === 'X' || stat.state === 'x') return 'gone';
  return stat.state === 'Z' ? 'zombie' : 'alive';
}

/** The process group of `pid`; undefined when it is gone. */
export function processGroupOf(pid: number): number | undefined {
  const pgrp = readStat(pid)?.pgrp;
  return pgrp !== undefined && Number.isInteger(pgrp) ? pgrp : undefined;
}

/**
 * Pids (other than this process) whose initial environment holds exactly `entry` (`NAME=value`):
 * how a marked process is found when its pid was never recorded, and how its descendants are
 * found even after they left its group. Zombies have an empty environ, so they are never listed
 * (they are dead already); so are other users' processes (unreadable). Scans `/proc`: a few ms.
 */
export function pidsWithEnvEntry(entry: string): number[] {
  const needle = `\0${entry}\0`;
  const found: number[] = [];
  for (const pid of allPids()) {
    if (pid === process.pid) continue;
    let environ: string;
    try {
      // latin1: a byte-for-byte decoding, cheap, and markers are ASCII.
      environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue; // exited meanwhile, or another user's
    }
    if (`\0${environ}\0`.includes(needle)) found.push(pid);
  }
  return found;
}

/** True when `pid` is running (not gone, not a zombie). */
export function isRunning(pid: number): boolean {
  return processState(pid) === 'alive';
}

/** Every pid `/proc` lists now (empty where there is no `/proc`). */
export function allPids(): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const entry of entries) {
    const pid = Number(entry);
    if (Number.isInteger(pid) && pid > 0) pids.push(pid);
  }
  return pids;
}

/** Every pid whose process group is `pgid`, with its state (scans `/proc`; a few ms). */
export function processGroupMembers(pgid: number): { pid: number; state: ProcessState }[] {
  const members: { pid: number; state: ProcessState }[] = [];
  for (const pid of allPids()) {
    const stat = readStat(pid);
    if (stat?.pgrp !== pgid) continue;
    members.push({ pid, state: stat.state === 'Z' ? 'zombie' : stat.state === 'X' ? 'gone' : 'alive' });
  }
  return members;
}

/** Running (non-zombie) members of a process group. */
export function runningGroupMembers(pgid: number): number[] {
  return processGroupMembers(pgid)
    .filter((member) => member.state === 'alive')
    .map((member) => member.pid);
}

/**
 * Sends `signal` to the whole process group `pgid` (and to `pgid` itself, in case it left the
 * group). Returns false when nothing was there to signal. Never throws.
 */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (!Number.isInteger(pgid) || pgid <= 1) return false;
  let delivered = false;
  for (const target of [-pgid, pgid]) {
    try {
      process.kill(target, signal);
      delivered = true;
    } catch {
      // ESRCH: already gone; EPERM cannot happen for our own children.
    }
  }
  return delivered;
}
