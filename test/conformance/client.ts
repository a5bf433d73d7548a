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
 * fetches it without following the redirect and keeps the `code`; the program then hands the
 * code back with `host.finishAuth`, as a host's OAuth callback route would.
 *
 * `CONFORMANCE_CLIENT_BREAK=no-elicitation` leaves the elicitation handler out (so the capability
 * is not declared): the test suite uses it to prove the harness fails when the library does.
 */
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { createHost, isMcpSupervisorError } from '../../src/index.js';
import type { Host, HostOptions, ReadinessView } from '../../src/index.js';

const SERVER = 's';
/** The client id metadata document URL the suite's CIMD scenarios expect a client to offer. */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json';
const REDIRECT_URL = 'http://localhost:3000/callback';
/** A host asks its user at most this many times per call (the suite's retry-limit scenario checks ≤ 3). */
const MAX_AUTHORIZATION_ROUNDS = 2;

/** An OAuth provider that plays the user agent: it follows the authorization URL and keeps the code. */
class BrowserlessProvider implements OAuthClientProvider {
  private information: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier: string | undefined;
  /** The code of the last authorization, until it is handed to `finishAuth`. */
  code: string | undefined;

  constructor(
    readonly clientMetadataUrl: string | undefined,
    preRegistered?: OAuthClientInformationMixed,
  ) {
    this.information = preRegistered;
  }

  get redirectUrl(): string {
    return REDIRECT_URL;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'mcp-supervisor conformance client',
      redirect_uris: [REDIRECT_URL],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.information;
  }

  saveClientInformation(information: OAuthClientInformationMixed): void {
    this.information = information;
  }

  tokens(): OAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    const response = await fetch(authorizationUrl, { redirect: 'manual' });
    const location = response.headers.get('location');
    if (!location) throw new Error(`the authorization endpoint answered ${response.status} without a redirect`);
    const code = new URL(location).searchParams.get('code');
    if (!code) throw new Error('the authorization redirect carried no code');
    this.code = code;
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error('no code verifier saved');
    return this.verifier;
  }

  /** Takes the pending code, once. */
  takeCode(): string | undefined {
    const code = this.code;
    this.code = undefined;
    return code;
  }
}

type Context = Record<string, string | undefined>;

function context(): Context {
  const raw = process.env['MCP_CONFORMANCE_CONTEXT'];
  return raw ? (JSON.parse(raw) as Context) : {};
}

function required(ctx: Context, name: string): string {
  const value = ctx[name];
  if (typeof value !== 'string') throw new Error(`MCP_CONFORMANCE_CONTEXT has no ${name}`);
  return value;
}

/** The OAuth provider a scenario calls for, if any. */
function providerFor(scenario: string, ctx: Context): OAuthClientProvider | undefined {
  if (scenario === 'auth/client-credentials-basic') {
    return new ClientCredentialsProvider({ clientId: required(ctx, 'client_id'), clientSecret: required(ctx, 'client_secret') });
  }
  if (scenario === 'auth/client-credentials-jwt') {
    return new PrivateKeyJwtProvider({ clientId: required(ctx, 'client_id'), privateKey: required(ctx, 'private_key_pem'), algorithm: ctx['signing_algorithm'] ?? 'ES256' });
  }
  if (scenario === 'auth/pre-registration') {
    return new BrowserlessProvider(undefined, { client_id: required(ctx, 'client_id'), client_secret: required(ctx, 'client_secret'), redirect_uris: [REDIRECT_URL] });
  }
  if (scenario === 'auth/cross-app-access-complete-flow') return undefined;
  if (scenario.startsWith('auth/')) return new BrowserlessProvider(CIMD_URL);
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

/** What a host's OAuth callback does: hand the user's code back, as many rounds as the user allows. */
async function authorizeIfAsked(host: Host, provider: OAuthClientProvider | undefined, view: ReadinessView, rounds: { left: number }): Promise<ReadinessView> {
  let current = view;
  while (current.servers[SERVER]?.status === 'auth_required' && provider instanceof BrowserlessProvider && rounds.left > 0) {
    const code = provider.takeCode();
    if (!code) break;
    rounds.left--;
    current = await host.finishAuth(undefined, SERVER, code);
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
      if (!isMcpSupervisorError(error) || error.code !== 'AUTH_REQUIRED' || !(provider instanceof BrowserlessProvider) || rounds.left <= 0) throw error;
      const code = provider.takeCode();
      if (!code) throw error;
      rounds.left--;
      await host.finishAuth(undefined, SERVER, code);
    }
  }
}

async function run(scenario: string, serverUrl: string): Promise<void> {
  const ctx = context();
  const provider = providerFor(scenario, ctx);
  const headers = scenario === 'auth/cross-app-access-complete-flow' ? { Authorization: `Bearer ${await crossAppAccessToken(serverUrl, ctx)}` } : {};
  const broken = process.env['CONFORMANCE_CLIENT_BREAK'] === 'no-elicitation';
  const options: HostOptions = {
    profiles: { default: { mcpServers: { [SERVER]: { type: 'http', url: serverUrl, headers } } } },
    discovery: { maxThreads: 1, connectTimeoutMs: 20_000 },
    client: {
      info: { name: 'mcp-supervisor-conformance', version: '1.0.0' },
      // Accept with nothing filled in: the library applies the schema's defaults, as the SDK does.
      ...(broken ? {} : { elicitation: () => ({ action: 'accept' as const, content: {} }) }),
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
