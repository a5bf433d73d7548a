/**
 * The lifeline (`src/process/lifeline.ts`), with real processes: marked process groups — a stdio
 * fixture that ignores stdin EOF and SIGTERM, a `/bin/sh` wrapper with a grandchild, and a
 * descendant that escaped its group with `setsid` — must all be gone within 2 s of the host
 * ending, however it ends, and the host's own exit status must be exactly what it would be
 * without the library.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LIFELINE_ENV, Lifeline } from '../../src/process/lifeline.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { killGroups, spawnTree, type TreeProcess } from '../helpers/lifeline-trees.js';
import { cmdline, guardOpenHandles, pollUntil, procState, readStat, signal, waitGone } from '../helpers/processes.js';

const PROGRAM = fileURLToPath(new URL('../programs/lifeline-host.js', import.meta.url));
/** The promise under test: every marked process is gone this long after the host ended. */
const GONE_WITHIN_MS = 2000;
/** The reaper must stay a small shell process. */
const REAPER_RSS_LIMIT_KB = 5 * 1024;
/** What keeps the event loop alive when this module loads (the runner's own pipes). */

/** The JSON line `lifeline-host` prints once its tree is up. */
interface HostReport {
  host: number;
  reaper: number;
  processes: TreeProcess[];
  leaderGroups: number[];
  listenersAdded: { SIGTERM: number; SIGINT: number; SIGHUP: number; exit: number };
  listeners: { SIGTERM: number; SIGINT: number; SIGHUP: number; exit: number };
}

interface HostExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface RunningHost {
  child: ChildProcess;
  report: HostReport;
  /** Settles on `close`: exited, and stdout/stderr fully read. */
  closed: Promise<HostExit>;
  stdout(): string;
  stderr(): string;
}

async function tempDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-lifeline-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** SIGKILLs `pid` in a teardown if it is still our reaper (checked by its command line, against pid reuse). */
function reapReaperInTeardown(t: ExecutionContext, pid: () => number | undefined): void {
  t.teardown(() => {
    const reaper = pid();
    if (reaper !== undefined && procState(reaper) === 'alive' && cmdline(reaper).includes('mcp-supervisor-lifeline')) signal(reaper, 'SIGKILL');
  });
}

/** Starts `lifeline-host` and resolves with its report once its whole tree is up. */
async function startHost(t: ExecutionContext, tag: string, ending: string, dir: string): Promise<RunningHost> {
  const child = spawn(process.execPath, [PROGRAM, ending, tag, dir, 'test'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MCP_FIXTURE_TAG: tag },
  });
  child.stdin.on('error', () => undefined);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const closed = new Promise<HostExit>((resolve) => child.once('close', (code: number | null, sig: NodeJS.Signals | null) => resolve({ code, signal: sig })));
  let report: HostReport | undefined;
  reapReaperInTeardown(t, () => report?.reaper);
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
  });
  const ready = await pollUntil(() => stdout.includes('\n') || child.exitCode !== null, { timeoutMs: 20_000 });
  if (!ready || child.exitCode !== null) throw new Error(`lifeline-host not up (exit ${child.exitCode}); stdout: ${stdout}; stderr: ${stderr}`);
  report = JSON.parse(stdout.slice(0, stdout.indexOf('\n'))) as HostReport;
  return { child, report, closed, stdout: () => stdout, stderr: () => stderr };
}

/** The JSON payload of the first stdout line starting with `prefix `. */
function lineOf(text: string, prefix: string): unknown {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${prefix} `));
  return line === undefined ? undefined : JSON.parse(line.slice(prefix.length + 1));
}

interface Ending {
  name: 'sigkill' | 'sigterm' | 'exit' | 'throw' | 'close';
  how: string;
  trigger(host: RunningHost): void;
  /** What Node does with this ending without the library. */
  expected: HostExit;
}

const endStdin = (host: RunningHost) => host.child.stdin?.end();
const ENDINGS: Ending[] = [
  { name: 'sigkill', how: 'SIGKILL', trigger: (host) => host.child.kill('SIGKILL'), expected: { code: null, signal: 'SIGKILL' } },
  { name: 'sigterm', how: 'SIGTERM with no listener', trigger: (host) => host.child.kill('SIGTERM'), expected: { code: null, signal: 'SIGTERM' } },
  { name: 'exit', how: 'process.exit(3)', trigger: endStdin, expected: { code: 3, signal: null } },
  { name: 'throw', how: 'an uncaught exception', trigger: endStdin, expected: { code: 1, signal: null } },
  { name: 'close', how: 'a normal close()', trigger: endStdin, expected: { code: 0, signal: null } },
];

for (const ending of ENDINGS) {
  test(`host ended by ${ending.how}: every marked process is gone within ${GONE_WITHIN_MS} ms, the reaper exits, the exit status is untouched`, async (t) => {
    const tag = useFixtureTag(t);
    const dir = await tempDir(t);
    const host = await startHost(t, tag, ending.name, dir);
    const { report } = host;
    const pids = report.processes.map((entry) => entry.pid);
    const role = (name: string) => report.processes.find((entry) => entry.role === name);

    // The set-up is what it claims to be.
    t.deepEqual(report.listenersAdded, { SIGTERM: 0, SIGINT: 0, SIGHUP: 0, exit: 1 }, 'Lifeline.start() added its exit hook and no signal listener');
    t.like(report.listeners, { SIGTERM: 0, SIGINT: 0, SIGHUP: 0 }, 'no signal listener in the host at all');
    t.deepEqual(pids.filter((pid) => procState(pid) !== 'alive'), [], 'the whole tree is running');
    t.is(procState(report.reaper), 'alive', 'the reaper is running');
    const hostGroup = readStat(report.host)?.pgid;
    t.is(readStat(report.reaper)?.pgid, report.reaper, 'the reaper leads its own process group');
    t.true(report.processes.every((entry) => entry.pgid !== hostGroup), 'no marked process is in the host\'s group');
    const escaper = role('escaper');
    t.truthy(escaper);
    t.is(escaper?.pgid, escaper?.pid, 'the escaper leads a group of its own (setsid)');
    t.not(escaper?.pgid, role('escaper-shell')?.pgid, 'the escaper left its shell\'s group');
    t.truthy(role('grandchild'));

    const started = performance.now();
    ending.trigger(host);
    let guard: NodeJS.Timeout | undefined;
    const exit = await Promise.race([host.closed, new Promise<undefined>((resolve) => (guard = setTimeout(resolve, 15_000, undefined)))]);
    clearTimeout(guard);
    t.deepEqual(exit, ending.expected, `host exit status; stderr: ${host.stderr()}`);

    const survivors = await waitGone(pids, GONE_WITHIN_MS - (performance.now() - started));
    const goneMs = performance.now() - started;
    t.deepEqual(survivors, [], `still running ${Math.round(goneMs)} ms after the ending: ${survivors.map((pid) => `${pid} ${cmdline(pid)}`).join('; ')}`);
    const reaperGone = await pollUntil(() => procState(report.reaper) !== 'alive', { timeoutMs: Math.max(0, GONE_WITHIN_MS - (performance.now() - started)) });
    t.true(reaperGone, 'the reaper exited');
    t.log(`${ending.how}: ${pids.length} marked processes gone ${Math.round(goneMs)} ms after the ending; host ${JSON.stringify(exit)}`);

    const hookLine = lineOf(host.stdout(), 'exit-hook') as { code: number; running: number[] } | undefined;
    if (ending.name === 'sigkill' || ending.name === 'sigterm') {
      t.is(hookLine, undefined, 'signals run no exit listener: the reaper did it');
    } else {
      // Exit listeners run in order: the lifeline's hook ran before the program's, synchronously.
      // It SIGKILLs and waits a bounded moment; on a loaded machine a killed process may not have
      // exited yet when it returns (the reaper finishes the job: asserted above), so this only
      // checks that the hook ran, and reports how much it left.
      t.is(hookLine?.code ?? null, ending.expected.code, 'the exit hook ran');
      t.log(`exit hook left ${hookLine?.running.length ?? '?'} of ${pids.length} still exiting`);
    }
    if (ending.name === 'throw') t.regex(host.stderr(), /uncaught on purpose/);
    if (ending.name === 'close') {
      // Group kills (what host.close() does) cannot reach the escaper; the reaper's scan did.
      t.deepEqual(lineOf(host.stdout(), 'closed'), { runningBeforeClose: [escaper?.pid], reaperRunning: false });
    }
  });
}

test('killAllSync() alone kills a marked tree synchronously, without the reaper', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const lifeline = Lifeline.start();
  reapReaperInTeardown(t, () => lifeline.pid);
  t.teardown(() => lifeline.close());
  const tree = await spawnTree('test', { env: { MCP_FIXTURE_TAG: tag, ...lifeline.env }, tmpDir: dir, label: 'sync' });
  const exits = tree.leaders.map((child) => (child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : once(child, 'exit')));
  t.teardown(() => killGroups(tree.processes.map((entry) => entry.pgid)));
  const pids = tree.processes.map((entry) => entry.pid);

  const started = performance.now();
  const killed = lifeline.killAllSync();
  const elapsed = performance.now() - started;
  // Checked synchronously, before any event-loop turn: killAllSync already waited them out.
  const running = pids.filter((pid) => procState(pid) === 'alive');

  t.deepEqual(running, [], 'every marked process had exited when killAllSync() returned');
  t.deepEqual([...killed].sort((a, b) => a - b), [...pids].sort((a, b) => a - b), 'it found exactly the marked processes');
  t.true(lifeline.running, 'the reaper was not involved (still blocked on its stdin)');
  t.deepEqual(lifeline.killAllSync(), [], 'a second call finds nothing');
  t.log(`killAllSync(): ${killed.length} processes killed and exited in ${elapsed.toFixed(1)} ms`);
  await Promise.all(exits);
});

test('start() installs no signal listener and one exit hook for every lifeline; close() ends the reaper, idempotently', async (t) => {
  const count = () => ({ SIGTERM: process.listenerCount('SIGTERM'), SIGINT: process.listenerCount('SIGINT'), SIGHUP: process.listenerCount('SIGHUP') });
  const signalsBefore = count();
  const exitBefore = process.listenerCount('exit');
  const a = Lifeline.start();
  const b = Lifeline.start();
  reapReaperInTeardown(t, () => a.pid);
  reapReaperInTeardown(t, () => b.pid);
  t.deepEqual(count(), signalsBefore);
  // Another test of this file may have installed the hook already: at most one, ever.
  const exitAfterTwo = process.listenerCount('exit');
  t.true(exitAfterTwo - exitBefore <= 1);
  const c = Lifeline.start();
  reapReaperInTeardown(t, () => c.pid);
  t.is(process.listenerCount('exit'), exitAfterTwo, 'a third lifeline adds no listener');

  t.deepEqual(Object.keys(a.env), [LIFELINE_ENV]);
  t.true(Object.isFrozen(a.env));
  t.not(a.env[LIFELINE_ENV], b.env[LIFELINE_ENV]);
  t.regex(a.env[LIFELINE_ENV] ?? '', new RegExp(`^${process.pid}-[0-9a-f]{24}$`));

  const pids = [a.pid, b.pid, c.pid];
  t.true(pids.every((pid) => pid !== undefined && procState(pid) === 'alive'));
  await Promise.all([a.close(), b.close(), c.close()]);
  t.false(a.running || b.running || c.running);
  t.true(pids.every((pid) => pid !== undefined && procState(pid) !== 'alive'));
  await a.close(); // idempotent, resolves at once
  t.deepEqual(count(), signalsBefore);
});

test(`the reaper is a small shell process (RSS < ${REAPER_RSS_LIMIT_KB / 1024} MB) in its own group, without the marker or the host's environment`, async (t) => {
  const lifeline = Lifeline.start();
  reapReaperInTeardown(t, () => lifeline.pid);
  t.teardown(() => lifeline.close());
  const pid = lifeline.pid;
  if (pid === undefined) return t.fail('no reaper pid');
  // Up = /bin/sh exec'd and blocked in read(2) on its stdin.
  t.true(await pollUntil(() => {
    const stat = readStat(pid);
    return stat !== undefined && stat.comm !== 'node' && stat.state === 'S';
  }, { timeoutMs: 5000 }), `reaper not blocked: ${JSON.stringify(readStat(pid))}`);
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
  t.true(Number.isFinite(rssKb));
  t.true(rssKb < REAPER_RSS_LIMIT_KB, `reaper RSS ${rssKb} kB`);
  t.log(`reaper: ${readStat(pid)?.comm} pid ${pid}, VmRSS ${rssKb} kB (${(rssKb / 1024).toFixed(2)} MB)`);
  t.is(readStat(pid)?.pgid, pid, 'leads its own process group');
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  t.false(environ.some((entry) => entry.startsWith(`${LIFELINE_ENV}=`)), 'it carries no marker itself');
  t.true(environ.every((entry) => entry === '' || /^(PATH|LC_ALL)=/.test(entry)), `environment: ${environ.join(' ')}`);
  await lifeline.close();
  t.false(lifeline.running);
});

guardOpenHandles(test);

