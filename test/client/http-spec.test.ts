/**
 * Streamable HTTP judged by the spec, against the real HTTP fixture:
 *
 * - stateless servers whose optional GET stream answers 404 (Express-style) or 405: every call
 *   succeeds on one session and runs exactly once;
 * - delivery as a fact: a non-idempotent tool that ran and whose connection was dropped before
 *   the answer is OUTCOME_UNCERTAIN (never "not run"), a read-only one is replayed exactly once;
 * - a server restarted under its client that answers the old session id with 400 "No valid
 *   session ID" (as server-everything does): the next call succeeds through one new session.
 */
import test from 'ava';
import { startHttpFixture, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, pollUntilAsync, sessionStats, structured, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

for (const getStatus of ['404', '405'] as const) {
  test(`stateless server whose GET answers ${getStatus}: 10 of 10 calls succeed on one session, each run exactly once`, async (t) => {
    const tag = useFixtureTag(t);
    const fixture = await startHttpFixture(['--stateless', '--get-status', getStatus], { tag });
    t.teardown(() => fixture.stop());
    const host = newHost(t, { web: { url: fixture.url } });
    const turn = await host.beginTurn();
    t.is(turn.status, 'ready');
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => turn.callTool('mcp__web__increment')));
    const succeeded = results.filter((result) => result.status === 'fulfilled');
    t.is(succeeded.length, 10, JSON.stringify(results.filter((result) => result.status === 'rejected').map((result) => String((result as PromiseRejectedResult).reason))));
    const values = succeeded.map((result) => structured<{ value: number }>((result as PromiseFulfilledResult<Parameters<typeof structured>[0]>).value).value).sort((a, b) => a - b);
    t.deepEqual(values, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const stats = await fixture.stats();
    t.is(stats.executions['increment'], 10, 'the server ran exactly the calls that succeeded');
    t.like(sessionStats(host, 'web'), { connects: 1, reinitialisations: 0, breakerFailures: 0, state: 'ready' });
    t.true(stats.gets >= 1, 'the client did ask for the optional stream');
  });
}

test('a non-idempotent tool that ran and whose connection was dropped: OUTCOME_UNCERTAIN, never "not run", not replayed', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--drop-in-tool', 'increment'], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  const error = await callError(t, turn.callTool('mcp__web__increment'), 'OUTCOME_UNCERTAIN');
  t.notRegex(error.modelText, /not run|timed? ?out/i);
  t.regex(error.modelText, /may or may not have taken effect/);
  t.false(error.retryable);
  const stats = await fixture.stats();
  t.is(stats.executions['increment'], 1, 'it ran once and was not repeated');
  t.is(stats.dropped, 1);
  // The session itself is fine: the next call works on it.
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'still here' })), 'still here');
  t.like(sessionStats(host, 'web'), { replays: 0, connects: 1 });
});

test('a read-only tool whose connection was dropped after it ran is replayed exactly once and returns the replay\'s answer', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--drop-in-tool', 'read_once', '--drop-count', '1'], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  const result = await turn.callTool('mcp__web__read_once');
  t.deepEqual(result.structuredContent, { count: 2 }, 'the answer is the second execution\'s');
  const stats = await fixture.stats();
  t.is(stats.executions['read_once'], 2, 'the dropped run and exactly one replay');
  t.is(stats.dropped, 1);
  t.like(sessionStats(host, 'web'), { replays: 1, connects: 1, reinitialisations: 0 });
});

test('a server restarted under its client that answers the old session id with 400 "No valid session ID": the next call succeeds through one new session', async (t) => {
  const tag = useFixtureTag(t);
  const first = await startHttpFixture(['--unknown-session-status', '400'], { tag });
  let current = first;
  t.teardown(() => current.stop());
  const host = newHost(t, { web: { url: first.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'before' })), 'before');
  // Restart on the same port: the client keeps its old session id.
  await first.stop();
  current = await startHttpFixture(['--unknown-session-status', '400', '--port', String(first.port)], { tag });
  const result = await turn.callTool('mcp__web__increment');
  t.deepEqual(result.structuredContent, { value: 1 }, 'the new server ran it exactly once');
  const stats = await current.stats();
  t.like(stats, { initializes: 1, sessions: 1 });
  t.is(stats.executions['increment'], 1);
  t.like(sessionStats(host, 'web'), { reinitialisations: 1, breakerFailures: 0 });
});

test('JSON answers: calls waiting when the server forgets its session fail as lost, never as a timeout (the standalone stream\'s 404 makes the client ask)', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--json-response'], { tag });
  t.teardown(() => fixture.stop());
  // A call timeout far beyond the test's own limit: waiting for it would fail the test.
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { callTimeoutMs: 600_000 } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'warm' })), 'warm');
  const slow = turn.callTool('mcp__web__slow', { ms: 60_000 });
  const slowRead = turn.callTool('mcp__web__slow_read', { ms: 1500 });
  t.true(await pollUntilAsync(async () => {
    const { executions } = await fixture.stats();
    return executions['slow'] === 1 && executions['slow_read'] === 1;
  }, 10_000));
  // Both are being processed; their JSON answers will never be written once the session is gone.
  await fixture.forgetSessions();
  const uncertain = await callError(t, slow, 'OUTCOME_UNCERTAIN');
  t.regex(uncertain.modelText, /lost its session while running "slow"/);
  t.is(textOf(await slowRead), 'slept 1500 ms', 'the read-only call was replayed on a new session');
  const stats = await fixture.stats();
  t.is(stats.executions['slow_read'], 2);
  t.is(stats.executions['slow'], 1);
  t.like(sessionStats(host, 'web'), { replays: 1, reinitialisations: 1 });
});
