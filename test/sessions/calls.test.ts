/**
 * Call-level behaviour through `createHost` against real fixture processes: real timeouts,
 * cancellation, `tools/list_changed` and frozen turns, and `close()` ending every process group
 * (wrapper grandchildren included), in-flight connects and queued calls.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, procState } from '../helpers/processes.js';
import { StartPlan, callError, guardOpenHandles, newHost, nextEvent, sessionStats, structured, tempDir, textOf } from './helpers.js';

guardOpenHandles(test);

test('CALL_TIMEOUT names the configured value for a real timeout (slow tool); the live session is kept', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { sessions: { callTimeoutMs: 321 } });
  const turn = await host.beginTurn();
  const configured = await callError(t, turn.callTool('mcp__fx__slow', { ms: 600_000 }), 'CALL_TIMEOUT');
  t.regex(configured.modelText, /\b321 ms\b/);
  const perCall = await callError(t, turn.callTool('mcp__fx__slow', { ms: 600_000 }, { timeoutMs: 123 }), 'CALL_TIMEOUT');
  t.regex(perCall.modelText, /\b123 ms\b/);
  t.notRegex(perCall.modelText, /exited/);
  const pid = sessionStats(host, 'fx').pid;
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'alive' })), 'alive');
  t.is(sessionStats(host, 'fx').pid, pid, 'a timeout does not cost the session');
});

test('an AbortSignal cancels a call in flight (CANCELLED); an already-aborted one never reaches the server', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  const controller = new AbortController();
  const slow = turn.callTool('mcp__fx__slow', { ms: 600_000 }, { signal: controller.signal });
  // `calls` counts requests received; 2 means the slow call is running on the server.
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 2);
  controller.abort();
  await callError(t, slow, 'CANCELLED');
  const aborted = AbortSignal.abort();
  await callError(t, turn.callTool('mcp__fx__increment', {}, { signal: aborted }), 'CANCELLED');
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 3);
  t.is(sessionStats(host, 'fx').breakerFailures, 0);
});

test('errorsAsResults: a supervisor error becomes an isError result carrying the model text', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  const result = await turn.callTool('mcp__fx__slow', { ms: 600_000 }, { timeoutMs: 50, errorsAsResults: true });
  t.true(result.isError);
  t.regex(textOf(result), /did not answer within 50 ms/);
  t.like(result._meta, { 'mcp-supervisor/error': { code: 'CALL_TIMEOUT' } });
});

test('tools/list_changed (stdio): the next turn has the new tool, a turn taken before does not', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { sessions: { listChangedDebounceMs: 0 } });
  const before = await host.beginTurn();
  const changed = nextEvent(host, 'tools:changed');
  t.is(textOf(await before.callTool('mcp__fx__add_tool', { name: 'fresh_tool' })), 'added fresh_tool');
  t.like(await changed, { server: 'fx' });
  const after = await host.beginTurn();
  t.true(after.tools.some((tool) => tool.name === 'mcp__fx__fresh_tool'));
  t.false(before.tools.some((tool) => tool.name === 'mcp__fx__fresh_tool'));
  t.is(textOf(await after.callTool('mcp__fx__fresh_tool')), 'fresh_tool called');
  await callError(t, before.callTool('mcp__fx__fresh_tool'), 'UNKNOWN_TOOL');
});

test('tools/list_changed (HTTP, resumed discovery session): the next turn has the new tool', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { listChangedDebounceMs: 0 } });
  const before = await host.beginTurn();
  const changed = nextEvent(host, 'tools:changed');
  t.is(textOf(await before.callTool('mcp__web__add_tool', { name: 'fresh_tool' })), 'added fresh_tool');
  await changed;
  const after = await host.beginTurn();
  t.true(after.tools.some((tool) => tool.name === 'mcp__web__fresh_tool'));
  t.false(before.tools.some((tool) => tool.name === 'mcp__web__fresh_tool'));
  t.is((await fixture.stats()).initializes, 1);
});

test('close(): every session\'s process group is gone, a wrapper\'s grandchild included', async (t) => {
  const tag = useFixtureTag(t);
  const pidFile = path.join(await tempDir(t), 'pids');
  const host = newHost(t, {
    wrapped: stdioFixtureConfig(['--wrapper', '--pid-file', pidFile], { tag }),
    plain: stdioFixtureConfig(['--pid-file', pidFile], { tag }),
  });
  const turn = await host.beginTurn();
  const wrappedPid = structured<{ pid: number; pgid: number }>(await turn.callTool('mcp__wrapped__pid'));
  const plainPid = structured<{ pid: number }>(await turn.callTool('mcp__plain__pid'));
  t.not(wrappedPid.pid, sessionStats(host, 'wrapped').pid, 'the wrapped server is a grandchild of the session leader');
  t.is(wrappedPid.pgid, sessionStats(host, 'wrapped').pid!, 'in the leader\'s process group');
  const pids = readFileSync(pidFile, 'utf8')
    .trim()
    .split('\n')
    .map((line) => Number(line.split(' ')[1]));
  t.true(pids.includes(plainPid.pid));
  t.true(pids.length >= 8, `wrapper, shell, sleeper and server for discovery and for the session, plus plain twice (${pids.length})`);
  t.true(pids.some((pid) => procState(pid) === 'alive'));
  await host.close();
  t.deepEqual(pids.filter((pid) => procState(pid) === 'alive'), []);
  t.deepEqual(pidsWithTag(tag), []);
});

test('close() during a connect that never completes returns at once and kills the half-started process', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  plan.hold(2);
  // A 10-minute connect timeout: had close() waited for the connect, the test would time out.
  const host = newHost(t, { fx: plan.config() }, { discovery: { connectTimeoutMs: 600_000 } });
  const turn = await host.beginTurn();
  const call = turn.callTool('mcp__fx__echo', { text: 'never' });
  await plan.waitForStart(2);
  await host.close();
  await callError(t, call, 'HOST_CLOSED');
  t.deepEqual(pidsWithTag(tag), []);
});

test('close() settles calls in flight and calls queued behind maxConcurrentCalls with HOST_CLOSED', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { sessions: { maxConcurrentCalls: 2 } });
  const turn = await host.beginTurn();
  const running = turn.callTool('mcp__fx__slow', { ms: 600_000 });
  // `calls` counts requests received; 1 before it means the slow call is running on the server.
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 2);
  const alsoRunning = turn.callTool('mcp__fx__slow', { ms: 600_000 });
  const queued = turn.callTool('mcp__fx__echo', { text: 'queued' });
  await host.close();
  const inFlight = await callError(t, running, 'HOST_CLOSED');
  t.regex(inFlight.modelText, /may or may not have taken effect/);
  // Sent or not by the time the host closed: either way HOST_CLOSED, worded by what the pipe saw.
  await callError(t, alsoRunning, 'HOST_CLOSED');
  const waiting = await callError(t, queued, 'HOST_CLOSED');
  t.regex(waiting.modelText, /was not run/);
});


test('warm sessions (the default): a stdio server found ready is connected right after discovery, so the first call spawns nothing', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) });
  const connected = nextEvent(host, 'server:connected');
  host.start();
  const { pid } = await connected;
  t.truthy(pid);
  t.like(sessionStats(host, 'fx'), { state: 'ready', calls: 0, connects: 1 });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'first' })), 'first');
  t.like(sessionStats(host, 'fx'), { connects: 1, pid });
});
