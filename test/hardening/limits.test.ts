/**
 * Nothing a server sends can crash the host or fail its neighbours (docs/ARCHITECTURE.md §8), with real
 * processes and real sizes: a 20 MB tool result and a 12 MB `tools/list`, over stdio and
 * Streamable HTTP, and a schema 5 000 levels deep. Each fails only its own server or call, with
 * MESSAGE_TOO_LARGE (or `too_large` in discovery) naming the limit; the neighbour is ready and the
 * host keeps working.
 */
import test from 'ava';
import { rawFixtureConfig, startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

const TWENTY_MB = 20 * 1024 * 1024;

test('stdio: a 20 MB result fails that call with MESSAGE_TOO_LARGE naming the limit; the host, the neighbour and the next call are fine', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { big: stdioFixtureConfig([], { tag }), neighbour: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  t.is(turn.status, 'ready');
  const error = await callError(t, turn.callTool('mcp__big__blob', { bytes: TWENTY_MB }), 'MESSAGE_TOO_LARGE');
  t.regex(error.modelText, /10485760 bytes/);
  t.regex(error.modelText, /limits\.maxMessageBytes/);
  t.false(error.retryable);
  t.is(textOf(await turn.callTool('mcp__neighbour__echo', { text: 'next door' })), 'next door');
  // The offending server was killed for it; the next call gets a fresh process.
  t.is(textOf(await turn.callTool('mcp__big__echo', { text: 'again' })), 'again');
});

test('stdio: a 12 MB tools/list fails that server alone (too_large, naming the limit); its neighbour is ready', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { huge: stdioFixtureConfig(['--tools', '4000', '--output-schemas'], { tag }), neighbour: stdioFixtureConfig([], { tag }) });
  const view = await host.ready();
  const huge = view.servers['huge'];
  t.is(huge?.status, 'failed');
  t.is(huge?.status === 'failed' ? huge.kind : undefined, 'too_large');
  t.regex(huge?.status === 'failed' ? huge.message : '', /limits\.maxMessageBytes \(10485760 bytes\)/);
  t.is(view.servers['neighbour']?.status, 'ready');
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__neighbour__echo', { text: 'fine' })), 'fine');
});

test('HTTP: a 20 MB result and a 12 MB tools/list fail only their call and their server', async (t) => {
  const tag = useFixtureTag(t);
  const small = await startHttpFixture([], { tag });
  const huge = await startHttpFixture(['--tools', '4000', '--output-schemas'], { tag });
  const json = await startHttpFixture(['--json-response'], { tag });
  t.teardown(() => Promise.all([small.stop(), huge.stop(), json.stop()]).then(() => undefined));
  const host = newHost(t, { web: { url: small.url }, huge: { url: huge.url }, json: { url: json.url } });
  const view = await host.ready();
  t.like(view.servers['huge'], { status: 'failed', kind: 'too_large' });
  t.is(view.servers['web']?.status, 'ready');
  const turn = await host.beginTurn();
  for (const server of ['web', 'json']) {
    const error = await callError(t, turn.callTool(`mcp__${server}__blob`, { bytes: TWENTY_MB }), 'MESSAGE_TOO_LARGE');
    t.regex(error.modelText, /10485760 bytes/);
    // The session survives: an HTTP answer over the limit fails that request only.
    t.is(textOf(await turn.callTool(`mcp__${server}__echo`, { text: `${server} after` })), `${server} after`);
  }
});

test('a schema 5 000 levels deep fails that server alone with the reason; its neighbour settles normally', async (t) => {
  const tag = useFixtureTag(t);
  // The raw fixture writes JSON no SDK server could serialise (JSON.stringify overflows first).
  const host = newHost(t, { deep: rawFixtureConfig(['--deep-tool', '5000'], { tag }), neighbour: stdioFixtureConfig([], { tag }) });
  const view = await host.ready();
  const deep = view.servers['deep'];
  t.is(deep?.status === 'failed' ? deep.kind : deep?.status, 'too_large');
  t.regex(deep?.status === 'failed' ? deep.message : '', /tool "deep".*limits\.maxSchemaDepth \(64\)/);
  t.is(view.servers['neighbour']?.status, 'ready');
  t.is(view.status, 'degraded');
});

test('a schema too deep to clone across threads (SDK fixture, 2 000 levels) fails that server alone, not the whole discovery', async (t) => {
  const tag = useFixtureTag(t);
  // Deep enough that a structured clone into the main thread overflows its stack.
  const host = newHost(t, { deep: stdioFixtureConfig(['--deep-schema', '2000'], { tag }), neighbour: stdioFixtureConfig([], { tag }) }, { limits: { maxSchemaDepth: 512 } });
  const view = await host.ready();
  t.like(view.servers['deep'], { status: 'failed', kind: 'too_large' });
  t.is(view.servers['neighbour']?.status, 'ready', 'the neighbour settled normally, not cancelled');
  t.throws(() => newHost(t, {}, { limits: { maxSchemaDepth: 100_000 } }), { code: 'INVALID_CONFIG', message: /limits\.maxSchemaDepth.*at most 512/ });
});

test('garbage between messages is ignored; the server works', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { raw: rawFixtureConfig(['--garbage'], { tag }) });
  const turn = await host.beginTurn();
  t.is(turn.status, 'ready');
  t.is(textOf(await turn.callTool('mcp__raw__echo', { text: 'through the noise' })), 'through the noise');
});

test('limits are options: a lower maxMessageBytes is the one named and enforced', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { limits: { maxMessageBytes: 64 * 1024 } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__fx__blob', { bytes: 1000 })).length, 1000);
  const error = await callError(t, turn.callTool('mcp__fx__blob', { bytes: 100_000 }), 'MESSAGE_TOO_LARGE');
  t.regex(error.modelText, /65536 bytes/);
  t.throws(() => newHost(t, {}, { limits: { maxMessageBytes: -1 } }), { code: 'INVALID_CONFIG', message: /limits\.maxMessageBytes/ });
});
