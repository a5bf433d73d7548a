/**
 * Regressions the fault-injection soak found, each pinned with real fixtures:
 *
 * - reload-during-call: a reload closes the profile's sessions; calls caught in it are not told
 *   the host closed;
 * - forget-concurrent-404s: after an HTTP server forgets its sessions, every concurrent call gets
 *   its own re-initialise-and-retry, not just the first;
 * - forget-mid-call: a call running on a session the server forgets may have run: it is a mid-call
 *   death (replay if read-only, else OUTCOME_UNCERTAIN) — never "not run", never a timeout.
 */
import test from 'ava';
import { isMcpSupervisorError } from '../../src/index.js';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, pollUntilAsync, sessionStats, structured, textOf } from './helpers.js';

guardOpenHandles(test);

test('reload-during-call: a running non-idempotent call gets OUTCOME_UNCERTAIN, a read-only one RECONNECTING — never HOST_CLOSED', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fs: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  const slow = turn.callTool('mcp__fs__slow', { ms: 30_000 });
  const slowRead = turn.callTool('mcp__fs__slow_read', { ms: 30_000 });
  // Both calls have reached the server (it counts them) before the reload.
  t.true(await pollUntilAsync(async () => structured<{ calls: number }>(await turn.callTool('mcp__fs__calls')).calls >= 3, 10_000));
  await host.reload();
  const uncertain = await callError(t, slow, 'OUTCOME_UNCERTAIN');
  t.regex(uncertain.message, /reload/);
  const safe = await callError(t, slowRead, 'RECONNECTING');
  t.true(safe.retryable);
  // The host is fine: the same turn works on the restarted server.
  t.is(textOf(await turn.callTool('mcp__fs__echo', { text: 'after reload' })), 'after reload');
});

test('forget-concurrent-404s: every concurrent call after a forget is re-initialised and retried once', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'warm' })), 'warm');
  await fixture.forgetSessions();
  const results = await Promise.allSettled(['a', 'b', 'c', 'd'].map((text) => turn.callTool('mcp__web__echo', { text })));
  t.deepEqual(
    results.map((result) => (result.status === 'fulfilled' ? textOf(result.value) : `${isMcpSupervisorError(result.reason) ? result.reason.code : 'raw'}`)),
    ['a', 'b', 'c', 'd'],
  );
  const stats = host.stats().sessions.find((entry) => entry.server === 'web');
  t.is(stats?.breakerFailures, 0);
});

test('forget-mid-call: a call running when the server forgets its session is a mid-call death, not "not run" and not a timeout', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  // A call timeout far beyond the test's own limit: waiting for it would fail the test.
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { callTimeoutMs: 600_000 } });
  const turn = await host.beginTurn();
  // The barrier: both calls are held on the server, after they were counted and before their
  // bodies run, so neither can finish before the forget.
  await fixture.setHold('slow', true);
  await fixture.setHold('slow_read', true);
  t.teardown(() => Promise.all([fixture.setHold('slow', false), fixture.setHold('slow_read', false)]).catch(() => undefined));
  const slow = turn.callTool('mcp__web__slow', { ms: 0 });
  const slowRead = turn.callTool('mcp__web__slow_read', { ms: 0 });
  slowRead.catch(() => undefined); // awaited below; a failure must fail an assertion, not the run
  const executions = async (): Promise<Record<string, number>> => (await fixture.stats()).executions;
  t.true(await pollUntilAsync(async () => { const seen = await executions(); return seen['slow'] === 1 && seen['slow_read'] === 1; }, 10_000), 'both calls reached the server');
  t.is(sessionStats(host, 'web').replays, 0);
  t.is(await fixture.forgetSessions(), 1);
  const uncertain = await callError(t, slow, 'OUTCOME_UNCERTAIN');
  t.regex(uncertain.message, /lost the connection while running "slow"/);
  t.notRegex(uncertain.message, /not run|timed out/);
  // Read-only: replayed once on a new session. The replay reaches the server while the first
  // execution is still held there: the first was in flight when the session was forgotten.
  t.true(await pollUntilAsync(async () => (await executions())['slow_read'] === 2, 10_000), 'the read-only call was replayed');
  await fixture.setHold('slow_read', false);
  t.is(textOf(await slowRead), 'slept 0 ms');
  const stats = sessionStats(host, 'web');
  t.is(stats.replays, 1, 'exactly one replay');
  t.is(stats.reinitialisations, 1, 'on a new session');
  t.deepEqual(await executions(), { slow: 1, slow_read: 2 }, 'the non-idempotent call ran once and was not replayed');
});
