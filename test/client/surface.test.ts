/**
 * The rest of the client surface, against the fixture servers (the reference servers are in
 * test/reference/): structured results checked against the tool's output schema (compiled on
 * first use, never in discovery), per-server tool filters as a security control, resources and
 * prompts through a turn and through the host, sampling and roots handlers with their context,
 * roots/list_changed, and server logs as events.
 */
import test from 'ava';
import type { HandlerContext } from '../../src/client/sides.js';
import { createHost } from '../../src/index.js';
import type { HostEvents } from '../../src/index.js';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, pollUntilAsync, structured, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

// Serial: the compile counter is process-wide, and this file's other tests call tools with schemas.
test.serial('a structured result that breaks the tool\'s output schema is an honest error naming the tool and the violation; a conforming one is returned', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig(['--tools', '40', '--output-schemas'], { tag }) });
  const compiledBefore = host.stats().outputSchemas.compiled;
  const turn = await host.beginTurn();
  t.true(turn.tools.filter((tool) => tool.outputSchema !== undefined).length >= 40);
  t.is(host.stats().outputSchemas.compiled, compiledBefore, 'discovery compiled no output schema');
  const error = await callError(t, turn.callTool('mcp__fx__bad_output'), 'PROTOCOL_ERROR');
  t.regex(error.modelText, /"bad_output".*ran, but its structured content does not match its output schema: data\/count must be integer/);
  const asResult = await turn.callTool('mcp__fx__bad_output', {}, { errorsAsResults: true });
  t.true(asResult.isError);
  t.deepEqual(structured(await turn.callTool('mcp__fx__bad_output', { valid: true })), { count: 3 });
  t.is(host.stats().outputSchemas.compiled, compiledBefore + 1, 'compiled once, on the first call, reused after');
  t.deepEqual(structured(await turn.callTool('mcp__fx__read_once')), { count: 1 });
  t.is(host.stats().outputSchemas.compiled, compiledBefore + 2);
});

test('tool filters: include narrows, exclude (and disabledTools) wins; hidden tools are absent and refused, nothing is sent', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, {
    web: { url: fixture.url, tools: { include: ['e*', 'read_*', 'cal?s', 'add*'], exclude: ['echo'] }, disabledTools: ['add_tool'] },
  });
  const turn = await host.beginTurn();
  // `?` is one character (picomatch); `*` any run; echo matched `e*` but the exclude wins.
  t.deepEqual(turn.tools.map((tool) => tool.tool).sort(), ['add', 'calls', 'elicit', 'read_once']);
  const view = host.status();
  const state = view.servers['web'];
  t.like(state, { status: 'ready', tools: 4 });
  t.true(state?.status === 'ready' && (state.toolsHidden ?? 0) >= 10);
  for (const tool of ['echo', 'add_tool', 'increment', 'slow_read']) {
    await callError(t, host.callTool(undefined, 'web', tool, { text: 'x' }), 'UNKNOWN_TOOL');
  }
  await callError(t, turn.callTool('mcp__web__echo', { text: 'x' }), 'UNKNOWN_TOOL');
  t.is((await fixture.stats()).toolCalls, 0, 'no request for a hidden tool reached the server');
  t.deepEqual(structured(await turn.callTool('mcp__web__add', { a: 2, b: 3 })), { sum: 5 });
});

test('tool filters are validated strictly: a typo in a security control is an error naming the field', (t) => {
  const error = t.throws(() => createHost({ profiles: { default: { mcpServers: { fx: { command: 'node', tools: { exlude: ['echo'] } } } } } }));
  t.is((error as { code?: string }).code, 'INVALID_CONFIG');
  t.regex(error?.message ?? '', /server "fx", field `tools`/);
});

test('resources and prompts: listed in the turn with their server, read and fetched through the turn and the host, supervised', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }), plain: stdioFixtureConfig(['--no-extras'], { tag }) });
  const turn = await host.beginTurn();
  t.deepEqual(turn.prompts.map((prompt) => [prompt.server, prompt.name]), [['fx', 'greeting']]);
  t.deepEqual(turn.resources.map((resource) => [resource.server, resource.uri]), [['fx', 'fixture://info']]);
  t.true(Object.isFrozen(turn.resources[0]));
  const resource = await turn.readResource('fx', 'fixture://info');
  t.is(resource.contents[0]?.uri, 'fixture://info');
  const prompt = await turn.getPrompt('fx', 'greeting', { name: 'Ada' });
  t.regex(JSON.stringify(prompt.messages), /Ada/);
  t.is((await host.readResource(undefined, 'fx', 'fixture://info')).contents.length, 1);
  t.regex(JSON.stringify((await host.getPrompt(undefined, 'fx', 'greeting', { name: 'Bo' })).messages), /Bo/);
  await callError(t, turn.getPrompt('fx', 'greeting', { name: 5 } as never), 'INVALID_ARGUMENTS');
  await callError(t, turn.readResource('nope', 'fixture://info'), 'UNKNOWN_SERVER');
  await callError(t, turn.readResource('fx', 'fixture://missing'), 'PROTOCOL_ERROR');
});

test('sampling and roots: capabilities declared only when given; handlers get the request with { profile, server }; rootsChanged reaches the live servers', async (t) => {
  const tag = useFixtureTag(t);
  const asked: { op: string; profile: string; server: string }[] = [];
  let rootsVersion = 1;
  const host = createHost({
    profiles: { alpha: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } }, beta: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } },
    discovery: { maxThreads: 1 },
    client: {
      sampling: (params, context: HandlerContext) => {
        asked.push({ op: 'sample', profile: context.profile, server: context.server });
        const prompt = JSON.stringify(params.messages[0]?.content ?? '').match(/"text":"([^"]*)"/)?.[1] ?? '?';
        return { role: 'assistant', model: 'test-model', content: { type: 'text', text: `${context.profile} answers ${prompt}` } };
      },
      roots: (context) => {
        asked.push({ op: 'roots', profile: context.profile, server: context.server });
        return [{ uri: `file:///work/${context.profile}/v${rootsVersion}`, name: 'work' }];
      },
    },
  });
  t.teardown(() => host.close());
  const [alpha, beta] = await Promise.all([host.beginTurn('alpha'), host.beginTurn('beta')]);
  const info = structured<{ capabilities: Record<string, unknown> }>(await alpha.callTool('mcp__fx__client_info'));
  t.deepEqual(info.capabilities, { sampling: {}, roots: { listChanged: true } });
  const [a, b] = await Promise.all([alpha.callTool('mcp__fx__sample', { prompt: 'hi' }), beta.callTool('mcp__fx__sample', { prompt: 'hey' })]);
  t.is(structured<{ text: string }>(a).text, 'alpha answers hi');
  t.is(structured<{ text: string }>(b).text, 'beta answers hey');
  t.deepEqual(structured(await alpha.callTool('mcp__fx__roots')), { roots: ['file:///work/alpha/v1'], changes: 0 });
  rootsVersion = 2;
  t.is(await host.rootsChanged('alpha'), 1);
  t.deepEqual(structured(await alpha.callTool('mcp__fx__roots')), { roots: ['file:///work/alpha/v2'], changes: 1 });
  t.true(asked.every((entry) => entry.server === 'fx'));
  t.deepEqual([...new Set(asked.filter((entry) => entry.op === 'sample').map((entry) => entry.profile))].sort(), ['alpha', 'beta']);
});

test('server logs: logLevel is sent to servers that declare logging; every line at or above it becomes a server:log event with profile and server', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { client: { logLevel: 'warning' } });
  const lines: HostEvents['server:log'][] = [];
  host.on('server:log', (event) => lines.push(event));
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__fx__log', { level: 'info', message: 'too chatty' })), 'logged at info');
  t.is(textOf(await turn.callTool('mcp__fx__log', { level: 'error', message: 'disk on fire' })), 'logged at error');
  t.true(await pollUntilAsync(async () => lines.length >= 1, 5000));
  t.deepEqual(lines, [{ profile: 'default', server: 'fx', level: 'error', logger: 'fixture', data: 'disk on fire' }], 'the info line was below the level the host set');
});

test('client options are validated: roots must be file: URIs, logLevel a level, sampling a function', (t) => {
  t.throws(() => createHost({ client: { roots: [{ uri: 'https://x' }] } }), { code: 'INVALID_CONFIG', message: /client\.roots\[0\]\.uri/ });
  t.throws(() => createHost({ client: { logLevel: 'loud' as never } }), { code: 'INVALID_CONFIG', message: /client\.logLevel/ });
  t.throws(() => createHost({ client: { sampling: {} as never } }), { code: 'INVALID_CONFIG', message: /client\.sampling/ });
});
