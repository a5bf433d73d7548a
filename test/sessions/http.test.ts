/**
 * Streamable HTTP sessions through `createHost`, against the real HTTP fixture: the session
 * discovery created is resumed, a forgotten session is re-initialised transparently, 401 is
 * AUTH_REQUIRED, an unreachable server is never a timeout.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { startHttpFixture, useFixtureTag } from '../helpers/fixtures.js';
import type { HttpFixture } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, nextEvent, pollUntilAsync, sessionStats, textOf } from './helpers.js';

guardOpenHandles(test);

async function httpFixture(t: ExecutionContext, tag: string): Promise<HttpFixture> {
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  return fixture;
}

test('without warm sessions, the HTTP session discovery created is resumed by the first call: 1 initialize, not 2', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { eager: false } });
  const turn = await host.beginTurn();
  t.is((await fixture.stats()).initializes, 1);
  const connected = nextEvent(host, 'server:connected');
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'resumed' })), 'resumed');
  t.like(await connected, { server: 'web', resumed: true });
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'again' })), 'again');
  t.like(await fixture.stats(), { initializes: 1, toolCalls: 2, sessions: 1 });
});

test('warm sessions (the default): discovery\'s HTTP session is resumed right after discovery, before any call: still 1 initialize', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } });
  const connected = nextEvent(host, 'server:connected');
  host.start();
  t.like(await connected, { server: 'web', resumed: true });
  t.like(sessionStats(host, 'web'), { state: 'ready', calls: 0, connects: 1 });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'warm' })), 'warm');
  t.like(await fixture.stats(), { initializes: 1, toolCalls: 1, sessions: 1 });
});

test('HTTP fixture forgets its sessions: the next call succeeds through a new session, transparently', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'one' })), 'one');
  t.is(await fixture.forgetSessions(), 1);
  // `increment` is neither read-only nor idempotent: a 404 proves it was never processed, so the
  // retry on the new session is safe, and it runs exactly once.
  const result = await turn.callTool('mcp__web__increment');
  t.deepEqual(result.structuredContent, { value: 1 });
  t.like(await fixture.stats(), { initializes: 2, toolCalls: 2, sessions: 1 });
  t.like(sessionStats(host, 'web'), { reinitialisations: 1, breakerFailures: 0 });
});

test('a discovery session forgotten before the first call is re-initialised transparently', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  await fixture.forgetSessions();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'x' })), 'x');
  t.like(await fixture.stats(), { initializes: 2, toolCalls: 1 });
});

test('HTTP 401 → AUTH_REQUIRED (not retried, breaker untouched); the session works again once authorised', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'one' })), 'one');
  await fixture.setAuthRequired(true);
  const error = await callError(t, turn.callTool('mcp__web__echo', { text: 'two' }), 'AUTH_REQUIRED');
  t.false(error.retryable);
  t.regex(error.modelText, /401/);
  t.like(await fixture.stats(), { toolCalls: 1 });
  t.is(sessionStats(host, 'web').breakerFailures, 0);
  await fixture.setAuthRequired(false);
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'three' })), 'three');
});

test('an HTTP server that stopped listening is unreachable, never a timeout', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { callTimeoutMs: 43_210 } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'one' })), 'one');
  await fixture.stopListening();
  const error = await callError(t, turn.callTool('mcp__web__echo', { text: 'two' }), 'SERVER_UNREACHABLE');
  t.notRegex(error.modelText, /timed? ?out|TimeoutError|43210|43\.2/i);
});

test('a re-discovered HTTP session that will never be resumed is terminated, not left on the server', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'resumed' })), 'resumed');
  await host.retry();
  t.is((await fixture.stats()).initializes, 2, 'the retry created a second session');
  // The unused session is ended in the background: wait for the server to see it go.
  t.true(await pollUntilAsync(async () => (await fixture.stats()).sessions === 1), 'only the live session is left');
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'still' })), 'still');
});

test('close() terminates a discovery-created HTTP session no call resumed', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await httpFixture(t, tag);
  // Without warm sessions, nothing resumes discovery's session before close().
  const host = newHost(t, { web: { url: fixture.url } }, { sessions: { eager: false } });
  await host.beginTurn();
  t.like(await fixture.stats(), { initializes: 1, sessions: 1 });
  await host.close();
  t.like(await fixture.stats(), { sessions: 0 });
});
