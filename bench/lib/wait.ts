/**
 * Bounded waiting for the bench: every wait names what it waits for and throws when its deadline
 * passes, so a stuck scenario errors out (and cleans up in its `finally`) instead of hanging the
 * run. Deadline timers are ref'd on purpose: an awaited promise that nothing else keeps alive must
 * not let Node exit silently in the middle of a run.
 */
import { readFileSync } from 'node:fs';
import { procState } from '../../test/helpers/processes.js';

/** Resolves after `ms` (a ref'd timer). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` (synchronously first, then every `intervalMs`) until it returns true.
 * @throws Error naming `what` when `timeoutMs` passes first.
 */
export async function waitFor(what: string, check: () => boolean, { timeoutMs = 10_000, intervalMs = 2 } = {}): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/**
 * Awaits `promise`, or throws naming `what` once `timeoutMs` passed. The promise itself is not
 * cancelled: the caller's `finally` must tear down whatever it was waiting on.
 */
export async function withDeadline<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The `<role> <pid>` lines a fixture wrote to its `--pid-file` (empty while it has none). */
export function readPidFile(path: string): { role: string; pid: number }[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((line) => line.trim().split(' '))
    .filter((fields): fields is [string, string] => fields.length === 2 && /^\d+$/.test(fields[1] ?? ''))
    .map(([role, pid]) => ({ role, pid: Number(pid) }));
}

/** True once the pid file lists every role in `roles` (e.g. wrapper, shell, sleeper, server). */
export function hasRoles(path: string, roles: readonly string[]): boolean {
  const seen = new Set(readPidFile(path).map((entry) => entry.role));
  return roles.every((role) => seen.has(role));
}

/** @throws Error when a process listed in the pid file is still running (zombies count as dead). */
export function assertPidFileDead(path: string, what: string): void {
  const alive = readPidFile(path).filter(({ pid }) => procState(pid) === 'alive');
  if (alive.length > 0) {
    throw new Error(`${what}: still running after it was reported gone: ${alive.map(({ role, pid }) => `${role} ${pid}`).join(', ')}`);
  }
}
