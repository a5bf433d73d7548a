/**
 * OAuth through discovery and sessions, against the OAuth fixture (an authorization server and a
 * protected MCP server built with the SDK's server-side auth pieces, on 127.0.0.1):
 *
 * - discovery (in a worker) runs the SDK's OAuth flow with the host's provider, over the body's
 *   port: the server is `auth_required` (not failed) with the authorization URL, and the event
 *   carries it; `finishAuth` completes the code flow and the next turn has the tools;
 * - an expired access token is refreshed by itself, in a session and in discovery;
 * - two profiles get two providers (one per profile and server) and never see each other's token,
 *   even when the server config says `share: true`.
 */
import test from 'ava';
import type { AuthContext } from '../../src/client/auth.js';
import { createHost } from '../../src/index.js';
import type { Host, HostOptions } from '../../src/index.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { InMemoryOAuthClientProvider, startOAuthFixture } from '../helpers/oauth-fixture.js';
import type { OAuthFixture } from '../helpers/oauth-fixture.js';
import { countEvents, guardOpenHandles, nextEvent, textOf } from '../sessions/helpers.js';
import type { ExecutionContext } from 'ava';

guardOpenHandles(test);

async function oauthFixture(t: ExecutionContext, tag: string): Promise<OAuthFixture> {
  const fixture = await startOAuthFixture([], { tag });
  t.teardown(() => fixture.stop());
  return fixture;
}

function oauthHost(t: ExecutionContext, profiles: HostOptions['profiles'], provider: (context: AuthContext) => InMemoryOAuthClientProvider): Host {
  const host = createHost({ profiles, auth: { provider }, discovery: { maxThreads: 1, connectTimeoutMs: 20_000 } });
  t.teardown(() => host.close());
  return host;
}

/** Discovery → auth_required; the user's code → finishAuth → ready. */
async function authorize(t: ExecutionContext, host: Host, provider: InMemoryOAuthClientProvider, profile?: string): Promise<void> {
  const view = await host.ready(profile);
  t.is(view.servers['secure']?.status, 'auth_required');
  const after = await host.finishAuth(profile, 'secure', await provider.authorize());
  t.is(after.servers['secure']?.status, 'ready');
}

test('discovery in a worker uses the host\'s provider: auth_required with the authorization URL, then finishAuth brings the tools into the next turn', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await oauthFixture(t, tag);
  const provider = new InMemoryOAuthClientProvider({ label: 'only' });
  const contexts: AuthContext[] = [];
  const host = oauthHost(t, { default: { mcpServers: { secure: { url: fixture.url } } } }, (context) => {
    contexts.push(context);
    return provider;
  });
  const asked = nextEvent(host, 'server:auth-required');
  const view = await host.ready();
  const state = view.servers['secure'];
  t.is(state?.status, 'auth_required', 'waiting for the user, not failed');
  t.is(view.status, 'failed', 'no server of the profile is usable yet');
  const event = await asked;
  t.like(event, { profile: 'default', server: 'secure' });
  t.is(event.authorizationUrl, provider.lastAuthorizationUrl?.href, 'the event carries the URL the provider was sent to');
  t.is(state?.status === 'auth_required' ? state.authorizationUrl : undefined, event.authorizationUrl);
  t.like(contexts[0], { profile: 'default', server: 'secure', url: fixture.url });
  t.is(contexts.length, 1, 'one provider per (profile, server), made once');
  const before = await host.beginTurn();
  t.deepEqual(before.tools, []);
  t.like(before.failed[0], { server: 'secure', kind: 'auth' });

  const after = await host.finishAuth(undefined, 'secure', await provider.authorize());
  t.is(after.servers['secure']?.status, 'ready');
  const turn = await host.beginTurn();
  t.true(turn.tools.some((tool) => tool.name === 'mcp__secure__echo'));
  t.is(textOf(await turn.callTool('mcp__secure__echo', { text: 'authorized' })), 'authorized');
  const stats = await fixture.stats();
  t.is(stats.codesIssued, 1);
  t.is(stats.authorizeRequests, 1, 'one trip to the user');
  t.is(provider.tokensSaved, 1);
});

test('an expired access token is refreshed without the host noticing: in a session, and in discovery', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await oauthFixture(t, tag);
  const provider = new InMemoryOAuthClientProvider({ label: 'refresh' });
  const host = oauthHost(t, { default: { mcpServers: { secure: { url: fixture.url } } } }, () => provider);
  await authorize(t, host, provider);
  const asked = countEvents(host, 'server:auth-required');
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__secure__echo', { text: 'one' })), 'one');
  const firstToken = provider.accessToken;

  t.true((await fixture.expireTokens()) >= 1);
  t.is(textOf(await turn.callTool('mcp__secure__echo', { text: 'two' })), 'two', 'the session refreshed and resent');
  t.not(provider.accessToken, firstToken);
  t.is((await fixture.stats()).refreshes, 1);

  await fixture.expireTokens();
  const view = await host.retry();
  t.is(view.servers['secure']?.status, 'ready', 'discovery refreshed through the worker\'s proxy provider');
  const stats = await fixture.stats();
  t.is(stats.refreshes, 2);
  t.is(stats.authorizeRequests, 1, 'never back to the user');
  t.is(asked(), 0);
});

test('two profiles get two providers and never see each other\'s token, even with share: true', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await oauthFixture(t, tag);
  const providers = new Map<string, InMemoryOAuthClientProvider>();
  const server = { url: fixture.url, share: true };
  const host = oauthHost(t, { alpha: { mcpServers: { secure: server } }, beta: { mcpServers: { secure: server } } }, ({ profile }) => {
    const provider = new InMemoryOAuthClientProvider({ label: profile });
    providers.set(profile, provider);
    return provider;
  });
  host.start();
  const alpha = () => providers.get('alpha')!;
  const beta = () => providers.get('beta')!;
  await host.ready('alpha');
  await host.ready('beta');
  await authorize(t, host, alpha(), 'alpha');
  await authorize(t, host, beta(), 'beta');
  t.not(alpha().clientId, beta().clientId, 'each provider registered its own client');
  t.not(alpha().accessToken, beta().accessToken);

  const [a, b] = await Promise.all([host.beginTurn('alpha'), host.beginTurn('beta')]);
  await Promise.all([
    ...['a1', 'a2', 'a3'].map(async (text) => t.is(textOf(await a.callTool('mcp__secure__echo', { text })), text)),
    ...['b1', 'b2', 'b3'].map(async (text) => t.is(textOf(await b.callTool('mcp__secure__echo', { text })), text)),
  ]);
  const records = (await fixture.requests()).filter((record) => record.rpcMethod === 'tools/call');
  t.is(records.length, 6);
  const byClient = new Map<string, Set<string>>();
  for (const record of records) byClient.set(record.clientId, (byClient.get(record.clientId) ?? new Set()).add(record.token));
  t.deepEqual([...byClient.keys()].sort(), [alpha().clientId, beta().clientId].sort());
  t.deepEqual([...byClient.get(alpha().clientId!)!], [alpha().accessToken], 'alpha\'s calls carried only alpha\'s token');
  t.deepEqual([...byClient.get(beta().clientId!)!], [beta().accessToken], 'beta\'s calls carried only beta\'s token');
  t.is(host.stats().sessions.filter((stats) => stats.server === 'secure').length, 2, 'one session per profile: OAuth makes sessions per profile');
});

test('finishAuth refuses what it cannot do, naming it: unknown server, stdio server, empty code, no provider', async (t) => {
  const host = createHost({ profiles: { default: { mcpServers: { local: { command: process.execPath, args: ['-e', ''] , disabled: true }, remote: { url: 'http://127.0.0.1:9/mcp', disabled: true } } } } });
  t.teardown(() => host.close());
  await t.throwsAsync(host.finishAuth(undefined, 'nope', 'code'), { code: 'UNKNOWN_SERVER' });
  await t.throwsAsync(host.finishAuth(undefined, 'constructor', 'code'), { code: 'UNKNOWN_SERVER' });
  await t.throwsAsync(host.finishAuth(undefined, 'local', 'code'), { code: 'INVALID_ARGUMENTS' });
  await t.throwsAsync(host.finishAuth(undefined, 'remote', ''), { code: 'INVALID_ARGUMENTS' });
  const error = await t.throwsAsync(host.finishAuth(undefined, 'remote', 'code'));
  t.is((error as { code?: string }).code, 'INVALID_CONFIG');
  t.regex(error?.message ?? '', /auth\.provider/);
});
