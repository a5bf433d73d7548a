#!/usr/bin/env node
/**
 * The conformance client: mcp-supervisor as a host uses it, run by the official MCP conformance
 * suite (`@modelcontextprotocol/conformance client --command "node …/client.js"`). The suite
 * starts a scenario server, appends its URL as the last argument and names the scenario in
 * `MCP_CONFORMANCE_SCENARIO` (credentials, where a scenario has them, in
 * `MCP_CONFORMANCE_CONTEXT`). Everything below goes through the library's public API only:
 * `createHost`, `ready`, `beginTurn`, `turn.callTool`, `finishAuth`, events — with a profile of
 * one server, `s`, at that URL.
 *
 * The OAuth provider plays the user's browser: when the SDK sends it to the authorization URL it
 * fetches it without following the redirect and keeps the callback query (`code`, and `iss` when
 * the authorization server sends one); the program then hands that query back with
 * `host.finishAuth`, as a host's OAuth callback route would.
 *
 * Both conformance CLIs run it: 0.1.16 (2025-11-25 scenarios) and the 0.2.0 pre-release
 * (`conformance-next`, 2026-07-28 scenarios; the CLI names the spec version in
 * `MCP_CONFORMANCE_PROTOCOL_VERSION`). The program does not choose the protocol era: the server is
 * configured as any host would configure it (Streamable HTTP, the library's default era setting),
 * so that negotiating the era is the library's job. `CONFORMANCE_CLIENT_PROTOCOL=<setting>` puts
 * an explicit `protocol` into the server's config, for experiments.
 *
 * `CONFORMANCE_CLIENT_BREAK=no-elicitation` leaves the elicitation handler out (so the capability
 * is not declared): the test suite uses it to prove the harness fails when the library does.
 */
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { createHost, isMcpSupervisorError } from '../../src/index.js';
import type { Host, HostOptions, ReadinessView, Turn } from '../../src/index.js';
import { HeadlessOAuthProvider, type HeadlessProviderOptions, REDIRECT_URL } from './headless-provider.js';

const SERVER = 's';
/** The client id metadata document URL the suite's CIMD scenarios expect a client to offer. */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';
/** A host asks its user at most this many times per call (the suite's retry-limit scenario checks ≤ 3). */
const MAX_AUTHORIZATION_ROUNDS = 2;

/** The provider that plays the user's browser (see ./headless-provider.ts). */
function browserless(options: Omit<HeadlessProviderOptions, 'clientName'>): HeadlessOAuthProvider {
  return new HeadlessOAuthProvider({ clientName: 'mcp-supervisor conformance client', tokenEndpointAuthMethod: 'none', ...options });
}

type Context = Record<string, unknown>;

function context(): Context {
  const raw = process.env['MCP_CONFORMANCE_CONTEXT'];
  return raw ? (JSON.parse(raw) as Context) : {};
}

function required(ctx: Context, name: string): string {
  const value = ctx[name];
  if (typeof value !== 'string') throw new Error(`MCP_CONFORMANCE_CONTEXT has no ${name}`);
  return value;
}

/** http-custom-headers: the calls the CLI wants made (with the values whose header encoding it checks). */
function toolCallsOf(ctx: Context): { name: string; arguments: Record<string, unknown> }[] {
  const calls = ctx['toolCalls'];
  if (!Array.isArray(calls) || calls.length === 0) throw new Error('MCP_CONFORMANCE_CONTEXT has no toolCalls');
  return calls.map((call: { name?: unknown; arguments?: unknown }) => {
    if (typeof call.name !== 'string') throw new Error('MCP_CONFORMANCE_CONTEXT has a toolCall without a name');
    return { name: call.name, arguments: (call.arguments ?? {}) as Record<string, unknown> };
  });
}

/** The OAuth provider a scenario calls for, if any. */
function providerFor(scenario: string, ctx: Context): OAuthClientProvider | undefined {
  if (scenario === 'auth/client-credentials-basic') {
    return new ClientCredentialsProvider({ clientId: required(ctx, 'client_id'), clientSecret: required(ctx, 'client_secret') });
  }
  if (scenario === 'auth/client-credentials-jwt') {
    const algorithm = ctx['signing_algorithm'];
    return new PrivateKeyJwtProvider({ clientId: required(ctx, 'client_id'), privateKey: required(ctx, 'private_key_pem'), algorithm: typeof algorithm === 'string' ? algorithm : 'ES256' });
  }
  if (scenario === 'auth/pre-registration') {
    return browserless({ preRegistered: { client_id: required(ctx, 'client_id'), client_secret: required(ctx, 'client_secret'), redirect_uris: [REDIRECT_URL] } });
  }
  if (scenario === 'auth/cross-app-access-complete-flow') return undefined;
  if (scenario.startsWith('auth/')) return browserless({ clientMetadataUrl: CIMD_URL });
  return undefined;
}

/** Cross-app access (SEP-990): the host's own identity plumbing gets the token; the library gets it as a header. */
async function crossAppAccessToken(serverUrl: string, ctx: Context): Promise<string> {
  const prm = (await (await fetch(new URL('/.well-known/oauth-protected-resource/mcp', serverUrl))).json()) as { resource: string; authorization_servers: string[] };
  const asUrl = prm.authorization_servers[0];
  if (!asUrl) throw new Error('the protected resource names no authorization server');
  const metadata = (await (await fetch(new URL('/.well-known/oauth-authorization-server', asUrl))).json()) as { issuer: string; token_endpoint: string };
  const exchange = await fetch(required(ctx, 'idp_token_endpoint'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
      audience: metadata.issuer,
      resource: prm.resource,
      subject_token: required(ctx, 'idp_id_token'),
      subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
      client_id: required(ctx, 'idp_client_id'),
    }),
  });
  if (!exchange.ok) throw new Error(`token exchange failed: HTTP ${exchange.status}`);
  const { access_token: assertion } = (await exchange.json()) as { access_token: string };
  const basic = Buffer.from(`${encodeURIComponent(required(ctx, 'client_id'))}:${encodeURIComponent(required(ctx, 'client_secret'))}`).toString('base64');
  const grant = await fetch(metadata.token_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
    body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }),
  });
  if (!grant.ok) throw new Error(`jwt-bearer grant failed: HTTP ${grant.status}`);
  return ((await grant.json()) as { access_token: string }).access_token;
}

/**
 * What a host's OAuth callback route does with the query the browser brought back: hands all of
 * it (`code`, and `iss` when the authorization server sent one) to `finishAuth`, so that the
 * library can check the issuer (RFC 9207: the auth/iss-* scenarios, and every 2026-07-28 auth
 * scenario whose authorization server advertises `authorization_response_iss_parameter_supported`).
 */
function completeAuthorization(host: Host, callback: URLSearchParams): Promise<ReadinessView> {
  return host.finishAuth(undefined, SERVER, callback);
}

/** What a host's OAuth callback does: hand the user's code back, as many rounds as the user allows. */
async function authorizeIfAsked(host: Host, provider: OAuthClientProvider | undefined, view: ReadinessView, rounds: { left: number }): Promise<ReadinessView> {
  let current = view;
  while (current.servers[SERVER]?.status === 'auth_required' && provider instanceof HeadlessOAuthProvider && rounds.left > 0) {
    const callback = provider.takeCallback();
    if (!callback) break;
    rounds.left--;
    current = await completeAuthorization(host, callback);
  }
  return current;
}

/** Calls a tool; an AUTH_REQUIRED (step-up) is answered by the user once more, then retried. */
async function callWithAuthorization(host: Host, provider: OAuthClientProvider | undefined, name: string, args: Record<string, unknown>, rounds: { left: number }): Promise<void> {
  for (;;) {
    const turn = await host.beginTurn();
    try {
      await turn.callTool(name, args);
      return;
    } catch (error) {
      if (!isMcpSupervisorError(error) || error.code !== 'AUTH_REQUIRED' || !(provider instanceof HeadlessOAuthProvider) || rounds.left <= 0) throw error;
      const callback = provider.takeCallback();
      if (!callback) throw error;
      rounds.left--;
      await completeAuthorization(host, callback);
    }
  }
}

/** Tries a call that the library may rightly refuse (or the server rightly reject): says what happened, never throws. */
async function tryCall(turn: Turn, name: string, args: Record<string, unknown>): Promise<void> {
  try {
    await turn.callTool(name, args);
  } catch (error) {
    process.stderr.write(`conformance client: ${name} refused: ${isMcpSupervisorError(error) ? `${error.code} ` : ''}${error instanceof Error ? error.message : String(error)}\n`);
  }
}

/** The elicitation answer a scenario expects from the user (the tool only checks the round trip). */
function elicitationAnswer(scenario: string): Record<string, string | number | boolean | string[]> {
  // SEP-2322 asks for `{ confirmed: boolean }`. Elsewhere: accept with nothing filled in, and the
  // library applies the schema's defaults, as the SDK does.
  return scenario === 'sep-2322-client-request-state' ? { confirmed: true } : {};
}

async function run(scenario: string, serverUrl: string): Promise<void> {
  const ctx = context();
  const provider = providerFor(scenario, ctx);
  const headers = scenario === 'auth/cross-app-access-complete-flow' ? { Authorization: `Bearer ${await crossAppAccessToken(serverUrl, ctx)}` } : {};
  const broken = process.env['CONFORMANCE_CLIENT_BREAK'] === 'no-elicitation';
  const protocol = process.env['CONFORMANCE_CLIENT_PROTOCOL'];
  // request-metadata checks every optional capability the client declares: declare them all.
  const everyCapability = scenario === 'request-metadata';
  const options: HostOptions = {
    profiles: { default: { mcpServers: { [SERVER]: { type: 'http', url: serverUrl, headers, ...(protocol ? { protocol } : {}) } } } },
    discovery: { maxThreads: 1, connectTimeoutMs: 20_000 },
    client: {
      info: { name: 'mcp-supervisor-conformance', version: '1.0.0' },
      ...(broken ? {} : { elicitation: () => ({ action: 'accept' as const, content: elicitationAnswer(scenario) }) }),
      ...(everyCapability
        ? {
            roots: [],
            sampling: () => {
              throw new Error('this host has no model');
            },
          }
        : {}),
    },
    ...(provider ? { auth: { provider: () => provider } } : {}),
  };
  const host = createHost(options);
  try {
    const rounds = { left: MAX_AUTHORIZATION_ROUNDS };
    const view = await authorizeIfAsked(host, provider, await host.ready(), rounds);
    const state = view.servers[SERVER];
    if (state?.status !== 'ready') throw new Error(`server ${SERVER} is ${state?.status}: ${'message' in (state ?? {}) ? (state as { message: string }).message : ''}`);
    const turn = await host.beginTurn();
    const tool = (wanted: string): string => {
      const found = turn.tools.find((entry) => entry.tool === wanted);
      if (!found) throw new Error(`the server lists no tool "${wanted}" (it lists ${turn.tools.map((entry) => entry.tool).join(', ')})`);
      return found.name;
    };
    switch (scenario) {
      case 'initialize':
        return;
      case 'tools_call':
        await turn.callTool(tool('add_numbers'), { a: 5, b: 3 });
        return;
      case 'elicitation-sep1034-client-defaults':
        await turn.callTool(tool('test_client_elicitation_defaults'), {});
        return;
      case 'sse-retry':
        await turn.callTool(tool('test_reconnection'), {});
        return;
      // 2026-07-28 (0.2.0 CLI). SEP-2575: the `_meta` envelope and MCP-Protocol-Version header on
      // every request, and a retry after the -32022 the server answers the first request with.
      // Discovery's requests are the whole scenario (it lists no tools).
      case 'request-metadata':
        return;
      // SEP-2322 (MRTR): each tool answers `input_required` with an elicitation (with or without a
      // requestState); the library must fulfil it through the host's elicitation handler and retry.
      case 'sep-2322-client-request-state': {
        for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated']) await turn.callTool(tool(name), {});
        // No `resultType`: the scenario checks only that this is not retried as input_required;
        // refusing the result (the v2 SDK does, on a 2026-07-28 connection) is not a failure.
        await tryCall(turn, tool('test_mrtr_no_result_type'), {});
        return;
      }
      // SEP-2243: Mcp-Method on every POST, Mcp-Name on tools/call, resources/read, prompts/get.
      case 'http-standard-headers': {
        for (const entry of turn.tools) await turn.callTool(entry.name, {});
        for (const resource of turn.resources) await turn.readResource(resource.server, resource.uri);
        for (const prompt of turn.prompts) await turn.getPrompt(prompt.server, prompt.name, {});
        return;
      }
      // SEP-2243: `x-mcp-header` parameters mirrored into Mcp-Param-* headers, encoded.
      case 'http-custom-headers': {
        for (const call of toolCallsOf(context())) await turn.callTool(tool(call.name), call.arguments);
        return;
      }
      // SEP-2243: tools with invalid `x-mcp-header` annotations must never be called, the valid one
      // must. A model may call anything a turn offers: every offered tool is tried.
      case 'http-invalid-tool-headers': {
        tool('valid_tool'); // throws when the library dropped the valid tool as well
        for (const entry of turn.tools) await tryCall(turn, entry.name, entry.tool === 'valid_tool' ? { region: 'us-west1' } : {});
        return;
      }
      // SEP-2106: discovering a schema with a network `$ref` must not fetch it. Listing is all.
      case 'json-schema-ref-no-deref':
        return;
      // SEP-1613/SEP-2106: the schema as the turn offers it goes back to the server verbatim.
      case 'json-schema-2020-12-preservation': {
        const focal = turn.tools.find((entry) => entry.tool === 'json_schema_2020_12_tool');
        if (!focal) throw new Error(`the server lists no tool "json_schema_2020_12_tool" (it lists ${turn.tools.map((entry) => entry.tool).join(', ')})`);
        await turn.callTool(tool('json_schema_echo'), { schema: focal.inputSchema });
        return;
      }
      default: {
        const first = turn.tools[0];
        if (first) await callWithAuthorization(host, provider, first.name, {}, rounds);
      }
    }
  } finally {
    await host.close();
  }
}

const scenario = process.env['MCP_CONFORMANCE_SCENARIO'];
const serverUrl = process.argv.at(-1);
if (!scenario || !serverUrl || !serverUrl.startsWith('http')) {
  process.stderr.write('usage: MCP_CONFORMANCE_SCENARIO=<name> client.js <server-url>\n');
  process.exit(2);
}
run(scenario, serverUrl).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`conformance client (${scenario}): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
