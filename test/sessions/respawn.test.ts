/**
 * Stdio liveness and respawn through `createHost`, against real fixture processes: a child
 * killed between calls, a child dying during a call (replay or OUTCOME_UNCERTAIN), a respawn that
 * does not come back in time, and a crash loop.
 */
import path from 'node:path';
import test from 'ava';
import { ManualClock } from '../helpers/clock.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { signal } from '../helpers/processes.js';
import { StartPlan, callError, countEvents, guardOpenHandles, newHost, nextEvent, sessionStats, sideEffects, structured, tempDir, textOf } from './helpers.js';

guardOpenHandles(test);

test('child SIGKILLed between calls: the next call succeeds through exactly one respawn and one RPC', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  const host = newHost(t, { fx: plan.config() });
  const respawned = countEvents(host, 'server:respawned');
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'one' })), 'one');
  const first = sessionStats(host, 'fx');
  t.truthy(first.pid);
  const exited = nextEvent(host, 'server:exited');
  t.true(signal(first.pid!, 'SIGKILL'));
  t.like(await exited, { server: 'fx', signal: 'SIGKILL' });

  const result = await turn.callTool('mcp__fx__calls');
  t.is(structured<{ calls: number }>(result).calls, 1, 'exactly one RPC reached the new server');
  const after = sessionStats(host, 'fx');
  t.is(after.respawns, 1);
  t.is(respawned(), 1);
  t.not(after.pid, first.pid);
  t.is(after.breakerFailures, 0);
  t.is(after.breaker.kind, 'closed');
});

test('child dies during a read-only call: the call is replayed once on a fresh server and returns its result', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  // Start 1 is discovery's, start 2 the first session's: that one dies inside `echo`.
  plan.set(2, ['--die-in-tool', 'echo']);
  const host = newHost(t, { fx: plan.config() });
  const turn = await host.beginTurn();
  const result = await turn.callTool('mcp__fx__echo', { text: 'replayed' });
  t.is(textOf(result), 'replayed');
  const stats = sessionStats(host, 'fx');
  t.is(stats.replays, 1);
  t.is(stats.respawns, 1);
  t.is(plan.starts(), 3);
  // The replay and this call: nothing else reached the fresh server.
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 2);
});

test('child dies during a non-idempotent call: OUTCOME_UNCERTAIN, the tool ran once and is not replayed', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const effects = path.join(dir, 'effects');
  const plan = await StartPlan.create(t, tag, [], { MCP_FIXTURE_SIDE_EFFECT_FILE: effects });
  plan.set(2, ['--die-in-tool', 'increment']);
  const host = newHost(t, { fx: plan.config() });
  const turn = await host.beginTurn();
  const error = await callError(t, turn.callTool('mcp__fx__increment'), 'OUTCOME_UNCERTAIN');
  t.false(error.retryable);
  t.regex(error.message, /may or may not have taken effect/);
  t.is(sideEffects(effects).length, 1, 'ran exactly once');
  t.is(sessionStats(host, 'fx').replays, 0);
  // The next call goes to a fresh server that never saw the uncertain call.
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 1);
  t.is(sideEffects(effects).length, 1);
});

test('replay: "always" replays a non-idempotent call after a mid-call death', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const effects = path.join(dir, 'effects');
  const plan = await StartPlan.create(t, tag, [], { MCP_FIXTURE_SIDE_EFFECT_FILE: effects });
  plan.set(2, ['--die-in-tool', 'increment']);
  const host = newHost(t, { fx: plan.config() }, { sessions: { replay: 'always' } });
  const result = await host.callTool(undefined, 'fx', 'increment');
  t.deepEqual(structured(result), { value: 1 });
  t.is(sideEffects(effects).length, 2, 'the host asked for replays: the effect happened twice');
});

test('idempotent call whose server dies again on the replay: SERVER_EXITED_AGAIN, one respawn, no loop', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  plan.set(2, ['--die-in-tool', 'add']);
  plan.set(3, ['--die-in-tool', 'add']);
  const host = newHost(t, { fx: plan.config() }, { clock: new ManualClock() });
  const error = await callError(t, host.callTool(undefined, 'fx', 'add', { a: 1, b: 2 }), 'SERVER_EXITED_AGAIN');
  t.regex(error.message, /exited again/);
  t.regex(error.message, /do NOT retry/);
  t.false(error.retryable);
  t.is(plan.starts(), 3, 'exactly one respawn for the call');
  t.is(sessionStats(host, 'fx').replays, 1);
});

test('no fresh session within respawnWaitMs: SERVER_EXITED (never a timeout), 0 RPCs, breaker count 1', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const effects = path.join(dir, 'effects');
  const plan = await StartPlan.create(t, tag, [], { MCP_FIXTURE_SIDE_EFFECT_FILE: effects });
  plan.hold(3);
  const clock = new ManualClock();
  const respawnWaitMs = 7000;
  const callTimeoutMs = 54_321;
  const host = newHost(t, { fx: plan.config() }, { clock, sessions: { respawnWaitMs, callTimeoutMs } });
  const turn = await host.beginTurn();
  t.deepEqual(structured(await turn.callTool('mcp__fx__increment')), { value: 1 });
  const exited = nextEvent(host, 'server:exited');
  signal(sessionStats(host, 'fx').pid!, 'SIGKILL');
  await exited;

  const call = turn.callTool('mcp__fx__increment', {}, { timeoutMs: callTimeoutMs });
  // The respawn has begun and is held at its barrier: no session can come back.
  await plan.waitForStart(3);
  await clock.advance(respawnWaitMs);
  const error = await callError(t, call, 'SERVER_EXITED');
  for (const text of [error.message, error.modelText]) {
    t.regex(text, /exited/);
    t.notRegex(text, /timed? ?out/i);
    t.notRegex(text, /TimeoutError/);
    t.false(text.includes(String(respawnWaitMs)) || /\b7(\.0)? ?s\b/.test(text), text);
    t.false(text.includes(String(callTimeoutMs)), text);
  }
  t.regex(error.message, /SIGKILL/);
  t.is(sessionStats(host, 'fx').breakerFailures, 1);

  // Let the respawn through: the call that failed was never sent to it.
  const connected = nextEvent(host, 'server:connected');
  plan.release(3);
  await connected;
  t.is(structured<{ calls: number }>(await turn.callTool('mcp__fx__calls')).calls, 1);
  t.is(sideEffects(effects).length, 1);
});

test('crash-loop server: "exited again", "do NOT retry", one respawn per call, 0 RPCs', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const effects = path.join(dir, 'effects');
  // Discovery (start 1) and the first session (start 2) are healthy; the session dies after
  // its first answer; every later start crashes before the SDK is even loaded.
  const plan = await StartPlan.create(t, tag, ['--crash-loop'], { MCP_FIXTURE_SIDE_EFFECT_FILE: effects });
  plan.set(1, []);
  plan.set(2, ['--die-after-calls', '1']);
  const host = newHost(t, { fx: plan.config() }, { clock: new ManualClock(), sessions: { reconnectBudget: 10 }, breaker: { failureThreshold: 10 } });
  const turn = await host.beginTurn();
  const exited = nextEvent(host, 'server:exited');
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'last good answer' })), 'last good answer');
  await exited;
  for (let call = 1; call <= 3; call++) {
    const error = await callError(t, turn.callTool('mcp__fx__increment'), 'SERVER_EXITED_AGAIN');
    t.regex(error.modelText, /exited again/);
    t.regex(error.modelText, /do NOT retry/);
    t.is(plan.starts(), 2 + call, `call ${call} caused exactly one respawn`);
  }
  t.is(sideEffects(effects).length, 0, 'no call reached any server');
  t.is(sessionStats(host, 'fx').respawnRequests, 3);
});
