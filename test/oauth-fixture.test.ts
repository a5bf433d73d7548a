/**
 * Proves the OAuth fixture (`test/fixtures/oauth-server.ts`) behaves as documented, against the
 * SDK's own client-side OAuth (`StreamableHTTPClientTransport({ authProvider })`, `auth()`):
 * discovery, dynamic registration, the auto-approved authorization-code flow with PKCE, expiry
 * and transparent refresh, refresh-token revocation, and per-client token binding. Real
 * processes, no mocks, no sleeps; every test takes a leak-guard tag first.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { BASE_TOOL_NAMES } from './fixtures/tools.js';
import { spawnFixture, useFixtureTag } from './helpers/fixtures.js';
import { InMemoryOAuthClientProvider, OAUTH_FIXTURE, startOAuthFixture } from './helpers/oauth-fixture.js';
import type { OAuthFixture } from './helpers/oauth-fixture.js';

const clientInfo = { name: 'oauth-fixture-test', version: '0.0.0' };

async function start(t: ExecutionContext, flags: string[] = []): Promise<OAuthFixture> {
  const tag = useFixtureTag(t, 'oauth');
  const fixture = await startOAuthFixture(flags, { tag });
  t.teardown(() => fixture.stop());
  return fixture;
}

function connectClient(t: ExecutionContext, fixture: OAuthFixture, provider: InMemoryOAuthClientProvider) {
  // Resolves once the standalone GET stream (opened by the SDK, unawaited, after
  // `notifications/initialized`) got its answer: the server has seen and counted it by then.
  let opened: () => void = () => {};
  const getStream = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const observingFetch: FetchLike = async (url, init) => {
    const response = await fetch(url, init);
    if (init?.method === 'GET' && String(url) === fixture.url) opened();
    return response;
  };
  const transport = new StreamableHTTPClientTransport(new URL(fixture.url), { authProvider: provider, fetch: observingFetch });
  const client = new Client(clientInfo);
  t.teardown(() => client.close());
  return { client, transport, getStream, connected: client.connect(transport) };
}

/**
 * The whole browserless flow: a first connect is refused (the SDK registers the client and
 * asks for an authorization), the provider plays the user agent, `finishAuth` exchanges the
 * code, and a fresh client connects with the token. Resolves once the standalone GET stream
 * is open too, so no request of this client is still on its way to the server.
 */
async function authorizedClient(t: ExecutionContext, fixture: OAuthFixture, provider: InMemoryOAuthClientProvider) {
  const first = connectClient(t, fixture, provider);
  await t.throwsAsync(first.connected, { instanceOf: UnauthorizedError });
  await first.transport.finishAuth(await provider.authorize());
  const second = connectClient(t, fixture, provider);
  await second.connected;
  await second.getStream;
  return second;
}

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((part) => part.text ?? '').join('');
}

test('flags are strict: unknown, malformed and stdio-only flags exit 64', async (t) => {
  const tag = useFixtureTag(t, 'oauth');
  for (const flags of [['--tols', '3'], ['--token-ttl-ms', 'soon'], ['--crash-loop'], ['--scope']]) {
    const proc = await spawnFixture(OAUTH_FIXTURE, flags, { tag });
    t.teardown(() => proc.stop());
    t.is((await proc.exited).code, 64, flags.join(' '));
    t.regex(await proc.waitForStderr(/usage error/), /usage error: (unknown flag|flag --)/, flags.join(' '));
  }
});

test('the fixture exits by itself when its stdin ends', async (t) => {
  const fixture = await start(t);
  fixture.child.stdin?.end();
  const exit = await fixture.exited;
  t.is(exit.code, 0);
});

test('metadata: RFC 9728 resource metadata, RFC 8414 server metadata, and the 401 challenge', async (t) => {
  const fixture = await start(t, ['--scope', 'mcp:tools mcp:admin']);
  const base = `http://127.0.0.1:${fixture.port}`;

  const prm = (await (await fetch(fixture.resourceMetadataUrl)).json()) as Record<string, unknown>;
  t.like(prm, { resource: fixture.url, authorization_servers: [fixture.issuer], scopes_supported: ['mcp:tools', 'mcp:admin'] });

  const asm = (await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
  t.like(asm, {
    issuer: fixture.issuer,
    authorization_endpoint: `${base}/authorize`,
    token_endpoint: `${base}/token`,
    registration_endpoint: `${base}/register`,
    code_challenge_methods_supported: ['S256'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    scopes_supported: ['mcp:tools', 'mcp:admin'],
  });

  const denied = await fetch(fixture.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.is(denied.status, 401);
  t.is(
    denied.headers.get('www-authenticate'),
    `Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="${fixture.resourceMetadataUrl}"`,
  );
  t.deepEqual(await denied.json(), { error: 'invalid_token', error_description: 'Missing Authorization header' });

  const forged = await fetch(fixture.url, { method: 'POST', headers: { authorization: 'Bearer nope', 'content-type': 'application/json' }, body: '{}' });
  t.is(forged.status, 401);
  t.regex(forged.headers.get('www-authenticate') ?? '', /error="invalid_token", error_description="Unknown access token"/);

  t.like(await fixture.stats(), { rejected401: 2, rejectionReasons: { 'Missing Authorization header': 1, 'Unknown access token': 1 }, initializes: 0 });
});

test('SDK client: unauthorized connect, auto-approved authorization, then tools/list and calls', async (t) => {
  const fixture = await start(t);
  const provider = new InMemoryOAuthClientProvider({ label: 'a' });

  const first = connectClient(t, fixture, provider);
  await t.throwsAsync(first.connected, { instanceOf: UnauthorizedError });
  t.is(provider.redirects, 1);
  const authorizationUrl = provider.lastAuthorizationUrl;
  t.truthy(authorizationUrl);
  t.is(`${authorizationUrl?.origin}${authorizationUrl?.pathname}`, `http://127.0.0.1:${fixture.port}/authorize`);
  t.is(authorizationUrl?.searchParams.get('code_challenge_method'), 'S256');
  t.is(authorizationUrl?.searchParams.get('resource'), fixture.url);
  t.truthy(provider.clientId, 'the SDK registered the client dynamically');
  t.is(provider.tokens(), undefined);

  const code = await provider.authorize();
  t.regex(code, /^code-[0-9a-f]{32}$/);
  await first.transport.finishAuth(code);
  t.is(provider.tokensSaved, 1);
  const tokens = provider.tokens();
  t.is(tokens?.expires_in, 3600, 'default --token-ttl-ms is one hour');
  t.regex(tokens?.refresh_token ?? '', /^rt-/);

  const { client, connected, getStream } = connectClient(t, fixture, provider);
  await connected;
  await getStream;
  t.deepEqual((await client.listTools()).tools.map((tool) => tool.name), [...BASE_TOOL_NAMES]);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'authorized' } })), 'authorized');
  t.deepEqual((await client.callTool({ name: 'increment', arguments: {} })).structuredContent, { value: 1 });

  const stats = await fixture.stats();
  t.like(stats, {
    initializes: 1,
    toolCalls: 2,
    sessions: 1,
    registeredClients: 1,
    authorizeRequests: 1,
    codesIssued: 1,
    tokensIssued: 1,
    refreshes: 0,
    lastAuthorizeScope: null,
    rejected401: 1,
  });
  const clientId = provider.clientId ?? '';
  t.deepEqual(Object.keys(stats.requestsByClient), [clientId]);
  const requests = await fixture.requests();
  t.deepEqual(
    requests.map((request) => request.rpcMethod ?? request.httpMethod),
    ['initialize', 'notifications/initialized', 'GET', 'tools/list', 'tools/call', 'tools/call'],
  );
  t.true(requests.every((request) => request.clientId === clientId && request.token === provider.accessToken));
  t.deepEqual(requests.filter((r) => r.rpcMethod === 'tools/call').length, 2);
  t.is(stats.requestsByClient[clientId], requests.length);
});

test('after expireTokens() the SDK refreshes transparently: one refresh, no new authorization', async (t) => {
  const fixture = await start(t);
  const provider = new InMemoryOAuthClientProvider({ label: 'refresh' });
  const { client } = await authorizedClient(t, fixture, provider);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'before' } })), 'before');
  const oldToken = provider.accessToken;
  const refreshToken = provider.tokens()?.refresh_token;

  t.is(await fixture.expireTokens(), 1);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'after' } })), 'after');

  const newToken = provider.accessToken;
  t.truthy(newToken);
  t.not(newToken, oldToken, 'a new access token string');
  t.is(provider.tokens()?.refresh_token, refreshToken, 'the refresh token is kept (not rotated by default)');
  t.is(provider.redirects, 1, 'no second authorization');
  t.is(provider.tokensSaved, 2);
  const stats = await fixture.stats();
  t.like(stats, { refreshes: 1, refreshFailures: 0, authorizeRequests: 1, tokensIssued: 2, initializes: 1, rejectionReasons: { 'Token has expired': 1 } });

  const calls = (await fixture.requests()).filter((request) => request.rpcMethod === 'tools/call');
  t.deepEqual(calls.map((request) => request.token), [oldToken, newToken]);
});

test('two providers get two client registrations and their own tokens', async (t) => {
  const fixture = await start(t);
  const alice = new InMemoryOAuthClientProvider({ label: 'alice' });
  const bob = new InMemoryOAuthClientProvider({ label: 'bob', tokenEndpointAuthMethod: 'client_secret_post' });
  const a = await authorizedClient(t, fixture, alice);
  const b = await authorizedClient(t, fixture, bob);
  await a.client.callTool({ name: 'echo', arguments: { text: 'a' } });
  await b.client.callTool({ name: 'echo', arguments: { text: 'b' } });
  await b.client.callTool({ name: 'echo', arguments: { text: 'b' } });

  t.truthy(alice.clientId);
  t.truthy(bob.clientId);
  t.not(alice.clientId, bob.clientId);
  t.not(alice.accessToken, bob.accessToken);
  t.is((alice.clientInformation() as { client_secret?: string }).client_secret, undefined, 'public client');
  t.truthy((bob.clientInformation() as { client_secret?: string }).client_secret, 'confidential client');

  const stats = await fixture.stats();
  t.like(stats, { registeredClients: 2, authorizeRequests: 2, tokensIssued: 2, initializes: 2 });
  t.deepEqual(Object.keys(stats.requestsByClient).sort(), [alice.clientId ?? '', bob.clientId ?? ''].sort());
  const requests = await fixture.requests();
  for (const provider of [alice, bob]) {
    const mine = requests.filter((request) => request.clientId === provider.clientId);
    t.true(mine.length > 0);
    t.true(mine.every((request) => request.token === provider.accessToken), `${provider.label}'s requests carry ${provider.label}'s token`);
    t.is(stats.requestsByClient[provider.clientId ?? ''], mine.length);
  }
  t.is(requests.filter((r) => r.rpcMethod === 'tools/call' && r.clientId === bob.clientId).length, 2);
});

test('--scope: the SDK asks for the advertised scopes and the token carries them', async (t) => {
  const fixture = await start(t, ['--scope', 'mcp:tools mcp:read']);
  const provider = new InMemoryOAuthClientProvider({ label: 'scoped' });
  t.is(await auth(provider, { serverUrl: fixture.url }), 'REDIRECT');
  t.is(provider.lastAuthorizationUrl?.searchParams.get('scope'), 'mcp:tools mcp:read');
  t.is(await auth(provider, { serverUrl: fixture.url, authorizationCode: await provider.authorize() }), 'AUTHORIZED');
  t.is(provider.tokens()?.scope, 'mcp:tools mcp:read');
  t.like(await fixture.stats(), { lastAuthorizeScope: 'mcp:tools mcp:read', tokensIssued: 1 });

  // A scope the server does not support is refused with an error redirect.
  const greedy = new InMemoryOAuthClientProvider({ label: 'greedy' });
  t.is(await auth(greedy, { serverUrl: fixture.url, scope: 'mcp:root' }), 'REDIRECT');
  const error = await t.throwsAsync(greedy.authorize());
  t.regex(error?.message ?? '', /invalid_scope/);
  t.like(await fixture.stats(), { lastAuthorizeScope: 'mcp:root', codesIssued: 1, authorizeRequests: 2 });
});

test('--token-ttl-ms: expires_in follows it; 0 makes tokens born expired and the SDK gives up after one refresh', async (t) => {
  const fixture = await start(t, ['--token-ttl-ms', '0']);
  const provider = new InMemoryOAuthClientProvider({ label: 'ttl0' });
  const first = connectClient(t, fixture, provider);
  await t.throwsAsync(first.connected, { instanceOf: UnauthorizedError });
  await first.transport.finishAuth(await provider.authorize());
  t.is(provider.tokens()?.expires_in, 0);

  const raw = await fetch(fixture.url, {
    method: 'POST',
    headers: { authorization: `Bearer ${provider.accessToken}`, 'content-type': 'application/json' },
    body: '{}',
  });
  t.is(raw.status, 401);
  t.is(
    raw.headers.get('www-authenticate'),
    `Bearer error="invalid_token", error_description="Token has expired", resource_metadata="${fixture.resourceMetadataUrl}"`,
  );

  const second = connectClient(t, fixture, provider);
  const error = await t.throwsAsync(second.connected, { instanceOf: StreamableHTTPError });
  t.is((error as StreamableHTTPError).code, 401);
  t.regex(error?.message ?? '', /401 after successful authentication/);
  t.like(await fixture.stats(), { refreshes: 1, initializes: 0, rejectionReasons: { 'Token has expired': 3 } });

  const ttl = await startOAuthFixture(['--token-ttl-ms', '120000'], { tag: useFixtureTag(t, 'oauth-ttl') });
  t.teardown(() => ttl.stop());
  const other = new InMemoryOAuthClientProvider({ label: 'ttl120' });
  t.is(await auth(other, { serverUrl: ttl.url }), 'REDIRECT');
  t.is(await auth(other, { serverUrl: ttl.url, authorizationCode: await other.authorize() }), 'AUTHORIZED');
  t.is(other.tokens()?.expires_in, 120);
});

test('revokeRefreshTokens(): the refresh fails, the SDK drops the tokens and asks for a new authorization', async (t) => {
  const fixture = await start(t);
  const provider = new InMemoryOAuthClientProvider({ label: 'revoked' });
  const { client, transport } = await authorizedClient(t, fixture, provider);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'one' } })), 'one');

  t.deepEqual(await fixture.revokeRefreshTokens(), { revoked: 1, expired: 1 });
  await t.throwsAsync(client.callTool({ name: 'echo', arguments: { text: 'two' } }), { instanceOf: UnauthorizedError });
  t.deepEqual(provider.invalidations, ['tokens']);
  t.is(provider.redirects, 2, 'a second authorization was requested');
  t.like(await fixture.stats(), { refreshes: 0, refreshFailures: 1, toolCalls: 1 });

  // Re-authorize on the same transport: its session survives, the next call goes through.
  await transport.finishAuth(await provider.authorize());
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'three' } })), 'three');
  t.like(await fixture.stats(), { initializes: 1, authorizeRequests: 2, tokensIssued: 2, toolCalls: 2 });
});

test('--rotate-refresh-tokens: each refresh hands out a new refresh token and kills the old one', async (t) => {
  const fixture = await start(t, ['--rotate-refresh-tokens']);
  const provider = new InMemoryOAuthClientProvider({ label: 'rotate' });
  const { client } = await authorizedClient(t, fixture, provider);
  const seen = [provider.tokens()?.refresh_token];
  for (const text of ['x', 'y']) {
    t.is(await fixture.expireTokens(), 1);
    t.is(textOf(await client.callTool({ name: 'echo', arguments: { text } })), text);
    seen.push(provider.tokens()?.refresh_token);
  }
  t.is(new Set(seen).size, 3);
  t.like(await fixture.stats(), { refreshes: 2, activeRefreshTokens: 1, tokensIssued: 3 });
});
