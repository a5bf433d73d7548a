/**
 * README behaviours that had no test, each against real fixture processes and the real discovery
 * pool (only the readiness timer is injected where a deadline is the subject):
 *
 * - `share: true`: profiles whose server has the same fingerprint share one live session (one
 *   process, both profiles answered) — and never when client handlers or OAuth are configured;
 * - `loadProfile`: called with the canonical key; `undefined` → UNKNOWN_PROFILE; a throw → the
 *   view's error;
 * - `sessions.eager`: a session connects right after discovery, without a call;
 * - legacy SSE (`type: 'sse'`): discovery and a call;
 * - `discovery.readinessCapMs` with real workers: the hung server fails as `timeout`, its
 *   neighbour is ready, every waiter wakes, the hung process is gone;
 * - UNKNOWN_PROFILE after a reload that removed the profile;
 * - `discovery.serverConcurrency: 1`: never two servers of a profile being connected at once.
 *
 * Unlisted profiles read from disk are in test/hardening/profiles.test.ts; the zombie rung of the
 * quiescence ladder is in test/integration/discovery.test.ts.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { mkdir, symlink } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { McpSupervisorError, createHost, isMcpSupervisorError } from '../../src/index.js';
import type { Host, HostOptions } from '../../src/host.js';
import { ManualClock } from '../helpers/clock.js';
import { STDIO_FIXTURE, startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil, procState } from '../helpers/processes.js';
import { guardOpenHandles, nextEvent, structured, tempDir, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

/** A host closed when the test ends (one discovery thread: these tests run side by side). */
function host(t: ExecutionContext, options: HostOptions): Host {
  const created = createHost({ ...options, discovery: { maxThreads: 1, connectTimeoutMs: 20_000, ...options.discovery } });
  t.teardown(() => created.close());
  return created;
}

/** Rejects when `promise` has not settled within `ms` (a bounded wait, never a sleep). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

const pidOf = async (host: Host, profile: string, server: string): Promise<number> =>
  structured<{ pid: number }>(await host.callTool(profile, server, 'pid')).pid;

// ---------------------------------------------------------------- share

test('share: true — two profiles with the same server fingerprint share one live session: one process, both answered', async (t) => {
  const tag = useFixtureTag(t);
  const server = { ...stdioFixtureConfig([], { tag }), share: true };
  const h = host(t, { profiles: { alpha: { mcpServers: { fx: server } }, beta: { mcpServers: { fx: server } } }, sessions: { eager: false } });
  const [alpha, beta] = await Promise.all([h.beginTurn('alpha'), h.beginTurn('beta')]);
  t.is(textOf(await alpha.callTool('mcp__fx__echo', { text: 'from alpha' })), 'from alpha');
  t.is(textOf(await beta.callTool('mcp__fx__echo', { text: 'from beta' })), 'from beta');
  const [pidAlpha, pidBeta] = [await pidOf(h, 'alpha', 'fx'), await pidOf(h, 'beta', 'fx')];
  t.is(pidAlpha, pidBeta, 'one session process answers both profiles');
  const supervisors = h.stats().sessions.filter((entry) => entry.server === 'fx');
  t.is(supervisors.length, 1);
  t.deepEqual([...(supervisors[0]?.profiles ?? [])].sort(), ['alpha', 'beta']);
  // The server itself counted both profiles' calls: 2 echo + 2 pid + this one.
  t.deepEqual(structured(await beta.callTool('mcp__fx__calls')), { calls: 5 });
  // Discovery's own processes are gone once it is over: the shared session is the one left.
  t.true(await pollUntil(() => pidsWithTag(tag).length === 1, { timeoutMs: 10_000 }), `tagged: ${pidsWithTag(tag).join(', ')}`);
  t.deepEqual(pidsWithTag(tag), [pidAlpha]);
});

test('share: true is ignored when the host configured client handlers or OAuth: one session (and process) per profile', async (t) => {
  const tag = useFixtureTag(t);
  const server = { ...stdioFixtureConfig([], { tag }), share: true };
  const profiles = { alpha: { mcpServers: { fx: server } }, beta: { mcpServers: { fx: server } } };
  const variants: [string, Partial<HostOptions>][] = [
    ['an elicitation handler', { client: { elicitation: async () => ({ action: 'decline' as const }) } }],
    ['an OAuth provider factory', { auth: { provider: () => undefined } }],
  ];
  for (const [what, options] of variants) {
    const h = host(t, { profiles, ...options, sessions: { eager: false } });
    const pids = [await pidOf(h, 'alpha', 'fx'), await pidOf(h, 'beta', 'fx')];
    t.not(pids[0], pids[1], `${what}: each profile has its own process`);
    const supervisors = h.stats().sessions.filter((entry) => entry.server === 'fx');
    t.deepEqual(supervisors.map((entry) => entry.profiles).sort(), [['alpha'], ['beta']], what);
    await h.close();
    t.deepEqual(pids.filter((pid) => procState(pid) === 'alive'), [], `${what}: closed`);
  }
});

// ---------------------------------------------------------------- loadProfile

test('loadProfile: called once per canonical key (every spelling of a path is one key), its document is discovered and callable', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'load');
  await mkdir(path.join(dir, 'tenants', 't1'), { recursive: true });
  const real = realpathSync(path.join(dir, 'tenants', 't1'));
  await symlink(real, path.join(dir, 'link'));
  const calls: { key: string; aborted: boolean }[] = [];
  const h = host(t, {
    cwd: dir,
    profiles: { listed: { mcpServers: {} } },
    loadProfile: async (key, signal) => {
      calls.push({ key, aborted: signal.aborted });
      return key === real || key === 'tenant-a' ? { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } : undefined;
    },
  });
  const spellings = ['./tenants/t1', `${real}/`, path.join(dir, 'tenants', '.', 't1'), path.join(dir, 'link'), './link/../link'];
  t.true(spellings.every((ref) => h.profileKey(ref) === real), 'every spelling has the same canonical key');
  const views = await Promise.all(spellings.map((ref) => h.ready(ref)));
  t.true(views.every((view) => view === views[0]), 'one entry, one settlement');
  t.is(views[0]?.status, 'ready');
  t.is(views[0]?.key, real);
  const turn = await h.beginTurn('tenant-a');
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'loaded' })), 'loaded');
  t.is((await h.ready('listed')).status, 'ready');
  t.deepEqual(calls, [
    { key: real, aborted: false },
    { key: 'tenant-a', aborted: false },
  ], 'called with the canonical key, once per profile; never for a listed one');
});

test('loadProfile: undefined is UNKNOWN_PROFILE; a throw becomes the view\'s error (and the turn\'s); neither runs anything', async (t) => {
  const h = host(t, {
    loadProfile: async (key) => {
      if (key === 'broken') throw new Error('the tenant store is down');
      if (key === 'typed') throw new McpSupervisorError('AUTH_REQUIRED', 'tenant needs to sign in');
      return undefined;
    },
  });
  const unknown = await h.ready('nobody');
  t.is(unknown.status, 'failed');
  t.is(unknown.error?.code, 'UNKNOWN_PROFILE');
  t.deepEqual(unknown.servers, {});

  const broken = await h.ready('broken');
  t.is(broken.status, 'failed');
  t.is(broken.error?.code, 'INVALID_CONFIG', 'a plain error is reported as a config problem of that profile');
  t.regex(broken.error?.message ?? '', /the tenant store is down/);
  const turn = await h.beginTurn('broken');
  t.is(turn.status, 'failed');
  t.deepEqual(turn.tools, []);
  t.is((await h.ready('typed')).error?.code, 'AUTH_REQUIRED', 'a library error keeps its code');
  t.is(h.stats().sessions.length, 0);
  t.is(h.stats().discovery.liveOwners, 0);
});

// ---------------------------------------------------------------- sessions.eager

test('sessions.eager: the session connects right after discovery, before any call; the first call uses it', async (t) => {
  const tag = useFixtureTag(t);
  const h = host(t, { profiles: { p: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } }, sessions: { eager: true } });
  const connected = nextEvent(h, 'server:connected', (event) => event.server === 'fx');
  h.start();
  const event = await within(connected, 20_000, 'server:connected after discovery');
  t.deepEqual(event.profiles, ['p']);
  const pid = event.pid ?? -1;
  t.is(procState(pid), 'alive');
  const stats = h.stats().sessions.find((entry) => entry.server === 'fx');
  t.like(stats, { state: 'ready', calls: 0, connects: 1, pid });
  t.is(await pidOf(h, 'p', 'fx'), pid, 'the first call went to the warm session');
  t.like(h.stats().sessions.find((entry) => entry.server === 'fx'), { connects: 1, calls: 1 });
});

test('sessions.eager: false — after discovery no session exists until the first call', async (t) => {
  const tag = useFixtureTag(t);
  const h = host(t, { profiles: { p: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } }, sessions: { eager: false } });
  let connects = 0;
  h.on('server:connected', () => connects++);
  t.is((await h.ready('p')).status, 'ready');
  // Settlement hands the outcomes to the session layer synchronously: had it wanted a session,
  // its supervisor would exist now.
  t.deepEqual(h.stats().sessions, []);
  t.is(connects, 0);
  await pidOf(h, 'p', 'fx');
  t.is(connects, 1);
});

// ---------------------------------------------------------------- legacy SSE

test('legacy SSE (type: "sse"): discovered and called over the HTTP+SSE transport, not Streamable HTTP', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const h = host(t, { profiles: { p: { mcpServers: { legacy: { type: 'sse', url: fixture.sseUrl } } } } });
  const turn = await h.beginTurn('p');
  t.is(turn.status, 'ready', JSON.stringify(turn.failed));
  t.true(turn.tools.some((tool) => tool.name === 'mcp__legacy__echo'));
  t.is(textOf(await turn.callTool('mcp__legacy__echo', { text: 'over sse' })), 'over sse');
  t.deepEqual((await turn.callTool('mcp__legacy__add', { a: 2, b: 3 })).structuredContent, { sum: 5 });
  const stats = await fixture.stats();
  t.is(stats.sseSessions, 1, 'the session is a legacy SSE one');
  t.is(stats.sessions, 0, 'no Streamable HTTP session was ever opened');
  t.is(stats.gets, 0, 'nothing went to /mcp');
  t.deepEqual(stats.executions, { echo: 1, add: 1 });
});

// ---------------------------------------------------------------- readiness cap

test('readinessCapMs with real workers: the hung server fails as timeout, its neighbour is ready, every waiter wakes, the hung process is gone', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'cap');
  const pidFile = path.join(dir, 'hang.pid');
  // Only the readiness timer runs on the manual clock: the cap fires when the test says, after the
  // neighbour is provably ready and the hung server provably running. Discovery itself is real.
  const clock = new ManualClock();
  const h = host(t, {
    clock,
    profiles: { p: { mcpServers: { ok: stdioFixtureConfig([], { tag }), hang: stdioFixtureConfig(['--hang-initialize', '--pid-file', pidFile], { tag }) } } },
    discovery: { readinessCapMs: 1000, connectTimeoutMs: 600_000 },
    // No session for `ok` until a call: every tagged process below is discovery's.
    sessions: { eager: false },
  });
  const okReady = nextEvent(h, 'discovery:outcome', (event) => event.server === 'ok');
  const retired = nextEvent(h, 'discovery:retired', (event) => event.reason === 'readiness cap');
  const first = h.ready('p');
  const second = h.ready('p', { maxWaitMs: 600_000 });
  t.is((await within(okReady, 20_000, 'ok discovered')).status, 'ready');
  t.true(await pollUntil(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', { timeoutMs: 10_000 }));
  const hungPid = Number(/^server (\d+)$/m.exec(readFileSync(pidFile, 'utf8'))?.[1]);
  t.is(procState(hungPid), 'alive');
  t.is(h.status('p').status, 'pending');

  await clock.advance(1000);
  const [view, other] = await within(Promise.all([first, second]), 5000, 'waiters woken by the cap');
  t.is(view, other, 'both waiters woke with the one settlement');
  t.is(view.status, 'degraded');
  t.like(view.servers['ok'], { status: 'ready' });
  t.like(view.servers['hang'], { status: 'failed', kind: 'timeout' });
  t.regex((view.servers['hang'] as { message: string }).message, /readiness cap of 1000 ms/);
  t.deepEqual(view.failed, ['hang']);
  const report = await within(retired, 20_000, 'the capped body retired');
  t.true(report.quiesced);
  t.true(await pollUntil(() => procState(hungPid) !== 'alive', { timeoutMs: 10_000 }), 'the hung server is gone');
  t.deepEqual(pidsWithTag(tag), [], 'nothing of the capped discovery is left');
  t.is(h.stats().discovery.liveOwners, 0);
  const turn = await h.beginTurn('p');
  t.is(textOf(await turn.callTool('mcp__ok__echo', { text: 'still fine' })), 'still fine');
});

// ---------------------------------------------------------------- UNKNOWN_PROFILE after reload

test('a reload that removes a profile: its waiters and later references get UNKNOWN_PROFILE, its sessions are gone, the others keep working', async (t) => {
  const tag = useFixtureTag(t);
  const keep = { mcpServers: { fx: stdioFixtureConfig([], { tag }) } };
  const dir = await tempDir(t, 'removed');
  const hangPidFile = path.join(dir, 'hang.pid');
  const h = host(t, {
    profiles: { keep, gone: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } }, pending: { mcpServers: { hang: stdioFixtureConfig(['--hang-initialize', '--pid-file', hangPidFile], { tag }) } } },
    discovery: { connectTimeoutMs: 600_000 },
  });
  const gonePid = await pidOf(h, 'gone', 'fx');
  await pidOf(h, 'keep', 'fx');
  const waiting = h.ready('pending');
  waiting.catch(() => undefined);
  t.true(await pollUntil(() => existsSync(hangPidFile), { timeoutMs: 10_000 }), 'the pending profile is being discovered');

  const { changes } = await h.reload(undefined, { profiles: { keep } });
  t.like(changes.find((change) => change.key === 'gone'), { profileRemoved: true, removed: ['fx'] });
  t.like(changes.find((change) => change.key === 'pending'), { profileRemoved: true });
  const error = await t.throwsAsync(waiting);
  t.true(isMcpSupervisorError(error) && error.code === 'UNKNOWN_PROFILE', String(error));
  for (const ref of ['gone', 'pending']) {
    const view = await h.ready(ref);
    t.is(view.status, 'failed', ref);
    t.is(view.error?.code, 'UNKNOWN_PROFILE', ref);
    t.is(h.status(ref).error?.code, 'UNKNOWN_PROFILE', ref);
    t.is((await h.beginTurn(ref)).status, 'failed', ref);
  }
  t.true(await pollUntil(() => procState(gonePid) !== 'alive', { timeoutMs: 10_000 }), 'the removed profile\'s session process is gone');
  t.is((await h.ready('keep')).status, 'ready');
  t.is(textOf(await h.callTool('keep', 'fx', 'echo', { text: 'kept' })), 'kept', 'the kept profile works after the reload');
});

// ---------------------------------------------------------------- serverConcurrency

test.serial('discovery.serverConcurrency: 1 — a server of the profile is started only after the previous one answered', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'conc');
  const log = path.join(dir, 'starts');
  const delayMs = 1000;
  // Each server logs its start (wall clock, ns) from a launcher, then becomes a fixture that holds
  // initialize for `delayMs`: it cannot have answered before start + delayMs. With one server at
  // a time, the next start is therefore at least `delayMs` after the previous one; with two at
  // once, two servers start within moments of each other.
  const server = (name: string) => ({
    command: '/bin/sh',
    args: ['-c', 'echo "$1 $(date +%s%N)" >> "$START_LOG"; shift; exec "$@"', 'launch', name, process.execPath, STDIO_FIXTURE, '--start-delay', String(delayMs)],
    env: { START_LOG: log, MCP_FIXTURE_TAG: tag },
  });
  const names = ['s1', 's2', 's3'];
  const h = host(t, {
    profiles: { p: { mcpServers: Object.fromEntries(names.map((name) => [name, server(name)])) } },
    discovery: { serverConcurrency: 1 },
    // Only discovery starts the servers (a warm session would log a start of its own).
    sessions: { eager: false },
  });
  const outcomes: string[] = [];
  h.on('discovery:outcome', (event) => outcomes.push(`${event.server}:${event.status}`));
  const view = await h.ready('p');
  t.is(view.status, 'ready', JSON.stringify(view.servers));
  const starts = readFileSync(log, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [name, ns] = line.split(' ');
      return { name: name ?? '', ms: Number(BigInt(ns ?? '0') / 1_000_000n) };
    });
  t.deepEqual(starts.map((start) => start.name), names, 'started one after the other, in config order');
  const gaps = starts.slice(1).map((start, index) => start.ms - starts[index]!.ms);
  t.log(`gaps between starts: ${gaps.join(', ')} ms`);
  for (const gap of gaps) t.true(gap >= delayMs, `a server started ${gap} ms after the previous one, before that one could have answered`);
  t.deepEqual(outcomes, names.map((name) => `${name}:ready`));
});
