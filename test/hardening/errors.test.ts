/**
 * Errors that mean what they say, whatever the entry point (docs/ARCHITECTURE.md §7):
 * - server names that are also Object.prototype members are just names; `__proto__` is refused
 *   by config validation, naming it;
 * - arguments that are not a plain JSON object are INVALID_ARGUMENTS, and nothing is sent;
 * - an HTTP answer that is not MCP (a sign-in page) says what came back.
 * (A parked server through `host.callTool`: test/sessions/park.test.ts.)
 */
import test from 'ava';
import { createHost } from '../../src/index.js';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

test('servers named constructor and toString are ordinary servers; unknown ones are UNKNOWN_SERVER, also with errorsAsResults', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { constructor: stdioFixtureConfig([], { tag }), toString: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  t.is(turn.status, 'ready');
  t.is(textOf(await host.callTool(undefined, 'constructor', 'echo', { text: 'c' })), 'c');
  t.is(textOf(await turn.callTool('mcp__toString__echo', { text: 's' })), 's');
  await callError(t, host.callTool(undefined, 'hasOwnProperty', 'echo', {}), 'UNKNOWN_SERVER');
  await callError(t, host.callTool(undefined, '__proto__', 'echo', {}), 'UNKNOWN_SERVER');
  const asResult = await host.callTool(undefined, 'valueOf', 'echo', {}, { errorsAsResults: true });
  t.true(asResult.isError);
  t.like(asResult._meta?.['mcp-supervisor/error'], { code: 'UNKNOWN_SERVER' });
  await callError(t, turn.callTool('mcp__constructor__nope'), 'UNKNOWN_TOOL');
});

test('a server named __proto__ is refused by config validation with the field named, never dropped', (t) => {
  const document = JSON.parse('{"mcpServers":{"__proto__":{"command":"node"},"ok":{"command":"node"}}}') as unknown;
  const error = t.throws(() => createHost({ profiles: { default: document } }));
  t.is((error as { code?: string }).code, 'INVALID_CONFIG');
  t.regex(error?.message ?? '', /__proto__/);
});

test('arguments that are not a plain JSON object: INVALID_ARGUMENTS naming the problem, and nothing reaches the server', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic['self'] = cyclic;
  const bad: [unknown, RegExp][] = [
    [null, /they are null/],
    [5, /they are a number/],
    [[1, 2], /they are an array/],
    ['text', /they are a string/],
    [{ n: 10n }, /`arguments\.n` is a bigint/],
    [{ s: Symbol('x') }, /`arguments\.s` is a symbol/],
    [{ [Symbol('k')]: 1 }, /symbol keys/],
    [{ f: () => 1 }, /`arguments\.f` is a function/],
    [{ nested: [{ bad: Number.NaN }] }, /`arguments\.nested\[0\]\.bad` is NaN/],
    [{ when: new Date(0) }, /`arguments\.when` is a Date object/],
    [cyclic, /`arguments\.self` refers back/],
  ];
  for (const [args, expected] of bad) {
    const error = await callError(t, turn.callTool('mcp__web__echo', args as never), 'INVALID_ARGUMENTS');
    t.regex(error.modelText, expected);
    await callError(t, host.callTool(undefined, 'web', 'echo', args as never), 'INVALID_ARGUMENTS');
  }
  const asResult = await turn.callTool('mcp__web__echo', null as never, { errorsAsResults: true });
  t.true(asResult.isError);
  t.is((await fixture.stats()).toolCalls, 0, 'not one request reached the server');
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'plain', extra: { list: [1, 'two', null, true] }, skipped: undefined })), 'plain');
});

test('an HTTP answer that is not MCP says what came back (status, content type, first line): never "HTTP -1"', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  await fixture.setLoginPage(true);
  const error = await callError(t, turn.callTool('mcp__web__echo', { text: 'x' }), 'PROTOCOL_ERROR');
  t.regex(error.modelText, /HTTP 200 with text\/html/);
  t.regex(error.modelText, /Sign in/);
  t.regex(error.modelText, /was not run/);
  t.notRegex(error.modelText, /HTTP -1|<html/);
  // Discovery says the same of such a server.
  const view = await host.retry();
  t.like(view.servers['web'], { status: 'failed', kind: 'http' });
  const state = view.servers['web'];
  t.regex(state?.status === 'failed' ? state.message : '', /text\/html.*Sign in/);
  await fixture.setLoginPage(false);
  t.is((await host.retry()).servers['web']?.status, 'ready');
  t.is(textOf(await (await host.beginTurn()).callTool('mcp__web__echo', { text: 'back' })), 'back');
});

test('a profile that failed to load answers every request with its own error (UNKNOWN_PROFILE, INVALID_CONFIG), never "no such server"', async (t) => {
  const host = createHost({
    loadProfile: async (key) => {
      if (key === 'broken') throw new Error('the tenant database is down');
      return undefined;
    },
  });
  t.teardown(() => host.close());
  for (const [ref, code, text] of [
    ['ghost', 'UNKNOWN_PROFILE', /not configured/],
    ['broken', 'INVALID_CONFIG', /tenant database is down/],
  ] as const) {
    const turn = await host.beginTurn(ref);
    t.is(turn.status, 'failed', ref);
    t.is(turn.error?.code, code, ref);
    for (const attempt of [
      host.callTool(ref, 'fx', 'echo', { text: 'x' }),
      host.readResource(ref, 'fx', 'fixture://info'),
      host.getPrompt(ref, 'fx', 'greeting'),
      host.finishAuth(ref, 'fx', 'code'),
    ]) {
      const error = await callError(t, attempt, code);
      t.regex(error.message, text, ref);
    }
    const asResult = await host.callTool(ref, 'fx', 'echo', {}, { errorsAsResults: true });
    t.true(asResult.isError === true && textOf(asResult).includes(code === 'UNKNOWN_PROFILE' ? 'not configured' : 'tenant database'), textOf(asResult));
  }
});
