/**
 * Discovery bodies against real fixture processes: per-server outcomes with honest kinds, the
 * quiescence ladder (cooperative and hard), and the generation filter.
 */
import test from 'ava';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DiscoveryCoordinator, type SettledOutcome } from '../../src/discovery/index.js';
import type { BodyTestHooks } from '../../src/discovery/types.js';
import { parseProfileConfig, type ServerConfig } from '../../src/index.js';
import { refusedUrl, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil, procState } from '../helpers/processes.js';

function servers(mcpServers: Record<string, unknown>): ServerConfig[] {
  return Object.values(parseProfileConfig({ mcpServers }, { profile: 'test' }).servers);
}

interface Run {
  outcomes: Map<string, SettledOutcome>;
  done: Promise<{ generation: number; error?: Error }>;
  generation: number;
  /** The worker thread the body started on (once it has). */
  threadId: number | undefined;
}

function run(coordinator: DiscoveryCoordinator, key: string, list: ServerConfig[], hooks?: BodyTestHooks): Run {
  const outcomes = new Map<string, SettledOutcome>();
  let resolveDone!: (info: { generation: number; error?: Error }) => void;
  const done = new Promise<{ generation: number; error?: Error }>((resolve) => (resolveDone = resolve));
  const started: Run = { outcomes, done, generation: 0, threadId: undefined };
  started.generation = coordinator.start(
    key,
    list,
    {
      onStarted: (info) => (started.threadId = info.threadId),
      onOutcome: (outcome) => outcomes.set(outcome.server, outcome),
      onDone: (info) => resolveDone(info),
    },
    hooks,
  ).generation;
  return started;
}

function newCoordinator(t: import('ava').ExecutionContext, options: ConstructorParameters<typeof DiscoveryCoordinator>[0] = {}): DiscoveryCoordinator {
  const coordinator = new DiscoveryCoordinator({ maxThreads: 2, ...options });
  t.teardown(() => coordinator.close().then(() => undefined));
  return coordinator;
}

test('fail-fast failures settle per server with the right kind, never as timeouts', async (t) => {
  const tag = useFixtureTag(t);
  // A 10-minute connect timeout: had any failure waited for it, the test would time out instead.
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000 });
  const list = servers({
    healthy: stdioFixtureConfig(['--tools', '7', '--page-size', '3'], { tag }),
    exits: stdioFixtureConfig(['--exit-at-start', '3'], { tag }),
    missing: { command: '/nonexistent/mcp-server' },
    refused: { url: await refusedUrl() },
    off: { command: 'never-started', disabled: true },
  });
  const { outcomes, done } = run(coordinator, 'p', list);
  const finished = await done;
  t.is(finished.error, undefined);
  const healthy = outcomes.get('healthy');
  t.is(healthy?.status, 'ready');
  // 7 generated tools + the fixture's fixed tools, across three or more pages.
  t.true(healthy?.status === 'ready' && healthy.tools.some((tool) => tool.name === 'gen_6') && healthy.tools.some((tool) => tool.name === 'echo'));
  t.true(healthy?.status === 'ready' && healthy.prompts.length > 0 && healthy.resources.length > 0);
  t.like(outcomes.get('exits'), { status: 'failed', failure: { kind: 'exited', exitCode: 3 } });
  const exits = outcomes.get('exits');
  t.regex((exits?.status === 'failed' && exits.failure.stderrTail) || '', /exit/i);
  t.like(outcomes.get('missing'), { status: 'failed', failure: { kind: 'spawn' } });
  t.like(outcomes.get('refused'), { status: 'failed', failure: { kind: 'refused' } });
  t.like(outcomes.get('off'), { status: 'disabled' });
  t.is(coordinator.stats().ownerOverlaps, 0);
});

test('outcomes stream as each server settles, before slower servers finish', async (t) => {
  const tag = useFixtureTag(t);
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000 });
  const list = servers({
    exits: stdioFixtureConfig(['--exit-at-start', '2'], { tag }),
    hang: stdioFixtureConfig(['--hang-initialize'], { tag }),
  });
  const seen: string[] = [];
  let exitedSeen!: () => void;
  const exitedOutcome = new Promise<void>((resolve) => (exitedSeen = resolve));
  coordinator.start('p', list, {
    onOutcome: (outcome) => {
      seen.push(outcome.server);
      if (outcome.server === 'exits') exitedSeen();
    },
    onDone: () => seen.push('done'),
  });
  await exitedOutcome;
  // The hanging server never answers, so anything after this point would only come from retirement.
  t.deepEqual(seen, ['exits']);
  const report = await coordinator.quiesce('p', 'test over');
  t.true(report.quiesced);
  t.deepEqual(seen, ['exits'], 'a retired generation delivers nothing more');
});

test('a body whose server hangs on initialize is retired: worker done, server and wrapper grandchild gone, no late outcome accepted', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-disc-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pidFile = path.join(dir, 'pids');
  // A generous grace: the cooperative rung alone must do it, however loaded the machine is.
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000, quiesceGraceMs: 20_000 });
  const list = servers({
    hang: stdioFixtureConfig(['--hang-initialize', '--wrapper', '--pid-file', pidFile], { tag }),
    // Would answer after 400 ms, i.e. after the retirement below: its outcome must never be accepted.
    late: stdioFixtureConfig(['--start-delay', '400'], { tag }),
  });
  const first = run(coordinator, 'p', list);
  // Wait until the wrapper, its server and its grandchild all exist.
  const pidLines = (): number => (existsSync(pidFile) ? readFileSync(pidFile, 'utf8').trim().split('\n').length : 0);
  t.true(await pollUntil(() => pidLines() >= 3, { timeoutMs: 30_000 }));
  const tagged = pidsWithTag(tag);
  t.true(tagged.length >= 4, `wrapper, server, grandchild and the late server run (${tagged.length})`);

  const report = await coordinator.quiesce('p', 'retry');
  t.true(report.quiesced);
  t.is(report.rung, 'cooperative');
  t.deepEqual(report.survivors, []);
  for (const pid of tagged) t.not(procState(pid), 'alive', `pid ${pid} still running after quiesce`);
  t.is(coordinator.liveOwners('p'), 0);

  // A new generation runs to completion; by then the retired one would long have published.
  const second = run(coordinator, 'p', servers({ quick: stdioFixtureConfig([], { tag }) }));
  await second.done;
  t.deepEqual([...first.outcomes.keys()], []);
  t.false(coordinator.isCurrent('p', first.generation));
  t.is(second.outcomes.get('quick')?.status, 'ready');
  t.is(coordinator.stats().ownerOverlaps, 0);
});

test('a body stuck in a synchronous loop is quiesced through the hard rungs (terminate, then kill)', async (t) => {
  const tag = useFixtureTag(t);
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000, quiesceGraceMs: 100 });
  const list = servers({ hang: stdioFixtureConfig(['--hang-initialize', '--wrapper'], { tag }) });
  const stuck = run(coordinator, 'p', list, { blockAfterSpawnMs: -1 });
  t.true(await pollUntil(() => coordinator.stats().recordedChildren === 1, { timeoutMs: 10_000 }));
  t.true(await pollUntil(() => pidsWithTag(tag).length >= 2, { timeoutMs: 30_000 }));
  const tagged = pidsWithTag(tag);
  const stuckThread = stuck.threadId;
  t.truthy(stuckThread);

  const report = await coordinator.quiesce('p', 'stuck');
  t.true(report.quiesced, JSON.stringify(report));
  t.is(report.rung, 'kill');
  t.true((report.terminateMs ?? -1) >= 0);
  t.true((report.killMs ?? -1) >= 0);
  t.deepEqual(report.survivors, []);
  for (const pid of tagged) t.not(procState(pid), 'alive');
  t.is(coordinator.liveOwners('p'), 0);
  t.false(coordinator.threadIds().includes(stuckThread!), 'the stuck worker was terminated');
  t.is(stuck.outcomes.size, 0);
});

test('a server spawned in the instant before its pid was recorded, its worker terminated right there, is found by the body\'s marker and killed', async (t) => {
  const tag = useFixtureTag(t);
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000, quiesceGraceMs: 100 });
  run(coordinator, 'p', servers({ hang: stdioFixtureConfig(['--hang-initialize', '--wrapper'], { tag }) }), { blockBeforeRecordMs: -1 });
  // The server and its wrapper grandchild run; the body's thread is stuck before recording the pid.
  t.true(await pollUntil(() => pidsWithTag(tag).length >= 2, { timeoutMs: 30_000 }));
  const tagged = pidsWithTag(tag);
  t.is(coordinator.stats().recordedChildren, 0, 'no slot names the server');

  const report = await coordinator.quiesce('p', 'stuck before recording');
  t.is(report.rung, 'kill', JSON.stringify(report));
  t.true(report.quiesced, JSON.stringify(report));
  t.deepEqual(report.survivors, []);
  for (const pid of tagged) t.not(procState(pid), 'alive', `pid ${pid}`);
  t.is(coordinator.liveOwners('p'), 0);
});

/** The nice value in a `/proc/…/stat` file (field 19; the command name may hold spaces and parentheses). */
function niceInStat(file: string): number {
  const stat = readFileSync(file, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

/** The nice value of a process and of its scheduler autogroup, if the kernel has autogroups. */
function niceOf(pid: number): { process: number; autogroup: number | undefined } {
  const nice = niceInStat(`/proc/${pid}/stat`);
  const autogroup = existsSync(`/proc/${pid}/autogroup`) ? Number(/nice (-?\d+)/.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'))?.[1]) : undefined;
  return { process: nice, autogroup };
}

/**
 * Nice values of this process's threads (a discovery body's worker thread is one of them).
 * A thread may end between the directory listing and the read of its stat file (a worker
 * retiring, a pool thread exiting): it has no nice value left to check, so it is skipped.
 */
function threadNiceValues(): number[] {
  const values: number[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      values.push(niceInStat(`/proc/self/task/${tid}/stat`));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' && (error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
  return values;
}

test('servers a body spawns run at its niceness, their own session\'s scheduler autogroup included, its thread at 5 at most; niceness 0 leaves all alone', async (t) => {
  for (const niceness of [19, 0]) {
    const tag = useFixtureTag(t);
    const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000, niceness });
    run(coordinator, 'p', servers({ hang: stdioFixtureConfig(['--hang-initialize'], { tag }) }));
    // Recorded means the body has set the server's priority (it does so just before recording it).
    t.true(await pollUntil(() => coordinator.stats().recordedChildren === 1 && pidsWithTag(tag).length === 1, { timeoutMs: 10_000 }));
    const [pid] = pidsWithTag(tag);
    const nice = niceOf(pid!);
    t.is(nice.process, niceness, `niceness ${niceness}: the process`);
    // Without autogroups (CONFIG_SCHED_AUTOGROUP off) there is nothing more to check.
    if (nice.autogroup !== undefined) t.is(nice.autogroup, niceness, `niceness ${niceness}: its autogroup`);
    // The body's thread must still get a core to stop when retired: never nicer than 5.
    const threads = threadNiceValues();
    t.false(threads.some((value) => value > 5), `niceness ${niceness}: threads ${threads.join(',')}`);
    if (niceness > 0) t.true(threads.includes(5), `niceness ${niceness}: the discovery thread at 5, threads ${threads.join(',')}`);
    await coordinator.quiesce('p', 'checked');
  }
});

test('a body queued behind one that needs the terminate rung starts once it is gone (one thread: piscina must replace the aborted worker)', async (t) => {
  const tag = useFixtureTag(t);
  const coordinator = newCoordinator(t, { maxThreads: 1, connectTimeoutMs: 600_000, quiesceGraceMs: 100 });
  run(coordinator, 'stuck', servers({ hang: stdioFixtureConfig(['--hang-initialize'], { tag }) }), { blockAfterSpawnMs: -1 });
  t.true(await pollUntil(() => coordinator.stats().recordedChildren === 1, { timeoutMs: 10_000 }));
  const queued = run(coordinator, 'queued', servers({ ok: stdioFixtureConfig([], { tag }) }));
  const report = await coordinator.quiesce('stuck', 'stuck');
  t.is(report.rung, 'kill', JSON.stringify(report));
  const finished = await queued.done;
  t.is(finished.error, undefined);
  t.is(queued.outcomes.get('ok')?.status, 'ready');
});

test('the zombie path: a server killed after its stuck worker was terminated is reported as a zombie, never as alive, and counted in stats', async (t) => {
  const tag = useFixtureTag(t);
  // The coordinator's waits are unref'd (a host keeps its loop alive while it quiesces or
  // closes): the test does too, until after the coordinator's close() in teardown.
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  const coordinator = newCoordinator(t, { connectTimeoutMs: 600_000, quiesceGraceMs: 100 });
  // No wrapper: the recorded pid is the server itself, a direct child of the worker's event loop.
  const list = servers({ hang: stdioFixtureConfig(['--hang-initialize'], { tag }) });
  run(coordinator, 'p', list, { blockAfterSpawnMs: -1 });
  t.true(await pollUntil(() => coordinator.stats().recordedChildren === 1 && pidsWithTag(tag).length === 1, { timeoutMs: 10_000 }));
  const [pid] = pidsWithTag(tag);
  t.is(procState(pid!), 'alive');
  t.is(coordinator.stats().zombies, 0);

  const report = await coordinator.quiesce('p', 'stuck');
  t.is(report.rung, 'kill');
  // Its worker's loop was terminated, so nothing reaps it: dead, but a zombie.
  t.is(procState(pid!), 'zombie');
  t.deepEqual(report.zombies, [pid], 'reported as a zombie');
  t.deepEqual(report.survivors, [], 'never as alive');
  t.true(report.quiesced, 'a zombie does not fail quiescence');
  t.is(coordinator.stats().zombies, 1, 'stats count it');
  t.is(coordinator.stats().recordedChildren, 0);
  t.is(coordinator.liveOwners('p'), 0);
});

test('after close(), no process started for discovery is alive and the pool is empty', async (t) => {
  const tag = useFixtureTag(t);
  const coordinator = new DiscoveryCoordinator({ maxThreads: 2, connectTimeoutMs: 600_000 });
  run(coordinator, 'a', servers({ hang: stdioFixtureConfig(['--hang-initialize', '--wrapper'], { tag }) }));
  run(coordinator, 'b', servers({ slow: stdioFixtureConfig(['--start-delay', '60000'], { tag }) }));
  t.true(await pollUntil(() => coordinator.stats().recordedChildren === 2, { timeoutMs: 10_000 }));
  const reports = await coordinator.close();
  t.is(reports.length, 2);
  t.true(reports.every((report) => report.quiesced));
  t.deepEqual(pidsWithTag(tag), []);
  t.is(coordinator.stats().workers, 0);
  t.throws(() => coordinator.start('a', [], { onOutcome: () => undefined, onDone: () => undefined }), { message: /closed/ });
});
