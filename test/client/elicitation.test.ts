/**
 * Elicitation through the host's handler, against real fixtures:
 *
 * - a tool that elicits gets the handler's answer with the schema's defaults applied to the
 *   fields the handler left out (as the SDK does for a client that declares `applyDefaults`);
 * - the handler's context names the profile and the server the request came from, also with two
 *   profiles calling the same server definition at once;
 * - a server that elicits during discovery (in the worker) gets the same handler's answer;
 * - without a handler the capability is not declared, and the server sees none.
 */
import test from 'ava';
import type { HandlerContext } from '../../src/client/sides.js';
import { createHost } from '../../src/index.js';
import type { ElicitationHandler } from '../../src/client/sides.js';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { callError, guardOpenHandles, newHost, structured, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

interface Asked {
  profile: string;
  server: string;
  message: string;
}

/** A handler that answers `note` with the asking profile's name and records who asked. */
function recordingHandler(asked: Asked[]): ElicitationHandler {
  return (params, context: HandlerContext) => {
    asked.push({ profile: context.profile, server: context.server, message: params.message });
    return { action: 'accept', content: { note: `for ${context.profile}` } };
  };
}

test('a tool that elicits gets the handler\'s answer with the schema defaults applied; ctx names the profile and server', async (t) => {
  const tag = useFixtureTag(t);
  const asked: Asked[] = [];
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, { client: { elicitation: recordingHandler(asked) } });
  const turn = await host.beginTurn();
  const result = await turn.callTool('mcp__fx__elicit');
  t.falsy(result.isError);
  t.deepEqual(structured(result), { action: 'accept', content: { name: 'Ada', count: 3, color: 'green', note: 'for default' } });
  t.deepEqual(asked, [{ profile: 'default', server: 'fx', message: 'Tell the fixture about you' }]);
  const info = structured<{ capabilities: Record<string, unknown> }>(await turn.callTool('mcp__fx__client_info'));
  t.deepEqual(info.capabilities, { elicitation: { form: { applyDefaults: true } } }, 'exactly the capability the host configured');
});

test('two profiles calling the same server definition at once: each elicitation reaches the handler with its own profile', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const asked: Asked[] = [];
  const server = { url: fixture.url, share: true };
  const host = createHost({
    profiles: { alpha: { mcpServers: { web: server } }, beta: { mcpServers: { web: server } } },
    client: { elicitation: recordingHandler(asked) },
    discovery: { maxThreads: 1 },
  });
  t.teardown(() => host.close());
  const [alpha, beta] = await Promise.all([host.beginTurn('alpha'), host.beginTurn('beta')]);
  const calls = [alpha, beta, alpha, beta].map((turn) => turn.callTool('mcp__web__elicit'));
  const results = await Promise.all(calls);
  const notes = results.map((result) => structured<{ content: { note: string } }>(result).content.note);
  t.deepEqual(notes, ['for alpha', 'for beta', 'for alpha', 'for beta'], 'every answer went back to the profile that asked');
  t.deepEqual(asked.map((entry) => entry.profile).sort(), ['alpha', 'alpha', 'beta', 'beta']);
  t.true(asked.every((entry) => entry.server === 'web'));
});

test('a server that elicits during discovery gets the handler\'s answer, asked from the discovery worker', async (t) => {
  const tag = useFixtureTag(t);
  const asked: Asked[] = [];
  const host = newHost(t, { fx: stdioFixtureConfig(['--elicit-on-list'], { tag }) }, { client: { elicitation: recordingHandler(asked) } });
  const turn = await host.beginTurn();
  t.is(turn.status, 'ready');
  t.is(turn.tools.find((tool) => tool.tool === 'elicit')?.description, 'asked during discovery: Ada');
  t.deepEqual(asked[0], { profile: 'default', server: 'fx', message: 'Who is discovering me?' });
});

test('a handler that throws fails that elicitation only: the server gets an error, the tool reports it, the host is fine', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig([], { tag }) }, {
    client: {
      elicitation: () => {
        throw new Error('the user closed the dialog');
      },
    },
  });
  const turn = await host.beginTurn();
  // The fixture's tool does not catch the failed elicitation: the server answers the call with
  // that error, which the model reads as the server's refusal.
  const error = await callError(t, turn.callTool('mcp__fx__elicit'), 'PROTOCOL_ERROR');
  t.regex(error.modelText, /the user closed the dialog/);
  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'fine' })), 'fine');
});

test('without a handler the capability is not declared: the server sees none and its tool says so', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { fx: stdioFixtureConfig(['--elicit-on-list'], { tag }) });
  const turn = await host.beginTurn();
  const info = structured<{ capabilities: Record<string, unknown> }>(await turn.callTool('mcp__fx__client_info'));
  t.deepEqual(info.capabilities, {});
  const result = await turn.callTool('mcp__fx__elicit');
  t.true(result.isError);
  t.is(result.content[0]?.type === 'text' ? result.content[0].text : '', 'client declared no elicitation capability');
  t.not(turn.tools.find((tool) => tool.tool === 'elicit')?.description, 'asked during discovery: Ada');
});

test('client options are validated: a handler that is not a function, an info without a name', (t) => {
  t.throws(() => createHost({ client: { elicitation: 'yes' as never } }), { code: 'INVALID_CONFIG', message: /client\.elicitation/ });
  t.throws(() => createHost({ client: { info: { name: '', version: '1' } } }), { code: 'INVALID_CONFIG', message: /client\.info/ });
  t.throws(() => createHost({ auth: { provider: 5 as never } }), { code: 'INVALID_CONFIG', message: /auth\.provider/ });
});
