/**
 * Starting the OAuth fixture (`test/fixtures/oauth-server.ts`: an authorization server and a
 * protected Streamable HTTP MCP server in one process) from tests, and a test-only SDK
 * `OAuthClientProvider` that completes the authorization without a browser.
 *
 * Typical flow with the SDK's own client:
 *
 *   const provider = new InMemoryOAuthClientProvider({ label: 'a' });
 *   const transport = new StreamableHTTPClientTransport(new URL(fixture.url), { authProvider: provider });
 *   await client.connect(transport);            // rejects with UnauthorizedError
 *   await transport.finishAuth(await provider.authorize());
 *   // a fresh Client + transport with the same provider now connects
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { startListeningFixture } from './fixtures.js';
import type { FixtureOptions, FixtureProcess } from './fixtures.js';

/** Absolute path of the built OAuth fixture (`dist/test/fixtures/oauth-server.js`). */
export const OAUTH_FIXTURE = fileURLToPath(new URL('../fixtures/oauth-server.js', import.meta.url));

/** Counters the OAuth fixture reports on `GET /control/stats`. */
export interface OAuthFixtureStats {
  /** MCP sessions created (`initialize` requests that got through auth). */
  initializes: number;
  /** `tools/call` requests received. */
  toolCalls: number;
  /** Live MCP sessions. */
  sessions: number;
  /** Access tokens issued, by code exchange and by refresh. */
  tokensIssued: number;
  /** Successful refresh-token grants. */
  refreshes: number;
  /** Refresh-token grants refused (unknown/revoked token, other client, wider scope). */
  refreshFailures: number;
  /** Requests that reached `/authorize`, valid or not. */
  authorizeRequests: number;
  /** Authorization codes handed out (auto-approved requests). */
  codesIssued: number;
  /** Dynamically registered clients. */
  registeredClients: number;
  /** Scope of the last authorization request (space-separated), null when it asked for none. */
  lastAuthorizeScope: string | null;
  /** Authenticated `/mcp` requests per client_id. */
  requestsByClient: Record<string, number>;
  /** `/mcp` requests answered 401. */
  rejected401: number;
  /** Those 401s by `error_description`: "Missing Authorization header", "Token has expired", "Unknown access token", … */
  rejectionReasons: Record<string, number>;
  /** Tokens revoked through `/revoke`. */
  revocations: number;
  /** Access tokens not expired yet. */
  activeAccessTokens: number;
  /** Refresh tokens still valid. */
  activeRefreshTokens: number;
}

/** One authenticated `/mcp` request, as `GET /control/requests` reports it (last 500 kept). */
export interface OAuthRequestRecord {
  seq: number;
  clientId: string;
  /** The access token the request carried. */
  token: string;
  httpMethod: string;
  /** JSON-RPC method of a POST (`'batch'` for an array); absent for GET and DELETE. */
  rpcMethod?: string;
  sessionId?: string;
}

/** A running OAuth fixture. */
export interface OAuthFixture extends FixtureProcess {
  /** `http://127.0.0.1:<port>/mcp`, the protected Streamable HTTP endpoint. */
  readonly url: string;
  /**
   * The authorization server's issuer as its metadata spells it: `http://127.0.0.1:<port>/`
   * (the SDK's router prints `URL.href`, hence the trailing slash).
   */
  readonly issuer: string;
  /** `http://127.0.0.1:<port>/.well-known/oauth-protected-resource/mcp` (RFC 9728). */
  readonly resourceMetadataUrl: string;
  readonly port: number;
  stats(): Promise<OAuthFixtureStats>;
  /** The authenticated `/mcp` requests, oldest first. */
  requests(): Promise<OAuthRequestRecord[]>;
  /** Every access token issued so far expires now (refresh tokens stay valid); resolves to how many were live. */
  expireTokens(): Promise<number>;
  /**
   * Every refresh token becomes invalid and every access token expires, so the next request
   * needs a full re-authorization. `keepAccessTokens: true` revokes the refresh tokens only.
   */
  revokeRefreshTokens(options?: { keepAccessTokens?: boolean }): Promise<{ revoked: number; expired: number }>;
  /** Closes and drops every MCP session; resolves to how many there were. */
  forgetSessions(): Promise<number>;
}

/**
 * Spawns the OAuth fixture (detached, own process group, stdin piped so it exits if this
 * process dies) and resolves once it printed its `{"port","pid"}` line.
 * Flags: see `test/fixtures/README.md` (`--token-ttl-ms N`, `--scope "a b"`, …).
 */
export async function startOAuthFixture(
  flags: readonly string[] = [],
  opts: FixtureOptions & { readyTimeoutMs?: number } = {},
): Promise<OAuthFixture> {
  const { proc, port, base, control } = await startListeningFixture(OAUTH_FIXTURE, flags, opts);
  const post = (body?: unknown): RequestInit => ({
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  return {
    ...proc,
    url: `${base}/mcp`,
    issuer: `${base}/`,
    resourceMetadataUrl: `${base}/.well-known/oauth-protected-resource/mcp`,
    port,
    stats: async () => (await control('stats')) as OAuthFixtureStats,
    requests: async () => (await control('requests')) as OAuthRequestRecord[],
    expireTokens: async () => ((await control('expire-tokens', post())) as { expired: number }).expired,
    revokeRefreshTokens: async (options = {}) =>
      (await control('revoke-refresh-tokens', post({ keepAccessTokens: options.keepAccessTokens === true }))) as { revoked: number; expired: number },
    forgetSessions: async () => ((await control('forget-sessions', post())) as { forgotten: number }).forgotten,
  };
}

/** Options of {@link InMemoryOAuthClientProvider}. */
export interface InMemoryOAuthClientProviderOptions {
  /** Tells providers apart in assertions and in the registered `client_name`. */
  label?: string;
  /** `scope` of the client metadata (used when the server advertises no scopes). */
  scope?: string;
  /** Default `'none'` (a public client, like most MCP hosts); `'client_secret_post'` gets a secret. */
  tokenEndpointAuthMethod?: 'none' | 'client_secret_post' | 'client_secret_basic';
}

/**
 * A test-only SDK `OAuthClientProvider`: everything in memory, redirect URL
 * `http://127.0.0.1/callback` (nothing listens there; {@link authorize} reads the redirect's
 * `Location` instead of following it). Counters let tests see what the SDK did with it.
 */
export class InMemoryOAuthClientProvider implements OAuthClientProvider {
  static readonly REDIRECT_URL = 'http://127.0.0.1/callback';

  readonly label: string;
  /** The last URL the SDK asked to send the user to. */
  lastAuthorizationUrl: URL | undefined;
  /** `redirectToAuthorization` calls (authorization flows the SDK started). */
  redirects = 0;
  /** `saveTokens` calls (code exchanges and refreshes). */
  tokensSaved = 0;
  /** `saveClientInformation` calls (registrations, and re-stamps by the SDK). */
  clientInformationSaved = 0;
  /** `saveCodeVerifier` calls. */
  codeVerifiersSaved = 0;
  /** Codes obtained by {@link authorize}. */
  codesReceived = 0;
  /** Scopes passed to `invalidateCredentials`, in order. */
  readonly invalidations: string[] = [];

  private readonly scope: string | undefined;
  private readonly authMethod: string;
  private savedClientInformation: OAuthClientInformationMixed | undefined;
  private savedTokens: OAuthTokens | undefined;
  private savedCodeVerifier: string | undefined;

  constructor(options: InMemoryOAuthClientProviderOptions = {}) {
    this.label = options.label ?? 'client';
    this.scope = options.scope;
    this.authMethod = options.tokenEndpointAuthMethod ?? 'none';
  }

  get redirectUrl(): string {
    return InMemoryOAuthClientProvider.REDIRECT_URL;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: `mcp-supervisor test client ${this.label}`,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: this.authMethod,
      ...(this.scope === undefined ? {} : { scope: this.scope }),
    };
  }

  state(): string {
    return randomBytes(12).toString('hex');
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.savedClientInformation;
  }

  saveClientInformation(clientInformation: OAuthClientInformationMixed): void {
    this.clientInformationSaved++;
    // Stored unchanged (the SDK stamps it with `issuer` and compares on read).
    this.savedClientInformation = clientInformation;
  }

  tokens(): OAuthTokens | undefined {
    return this.savedTokens;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.tokensSaved++;
    this.savedTokens = tokens;
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.redirects++;
    this.lastAuthorizationUrl = authorizationUrl;
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.codeVerifiersSaved++;
    this.savedCodeVerifier = codeVerifier;
  }

  codeVerifier(): string {
    if (this.savedCodeVerifier === undefined) throw new Error(`provider ${this.label}: no code verifier saved`);
    return this.savedCodeVerifier;
  }

  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    this.invalidations.push(scope);
    if (scope === 'all' || scope === 'client') this.savedClientInformation = undefined;
    if (scope === 'all' || scope === 'tokens') this.savedTokens = undefined;
    if (scope === 'all' || scope === 'verifier') this.savedCodeVerifier = undefined;
  }

  /** The registered client_id, once the SDK registered this client. */
  get clientId(): string | undefined {
    return this.savedClientInformation?.client_id;
  }

  /** The access token currently held, if any. */
  get accessToken(): string | undefined {
    return this.savedTokens?.access_token;
  }

  /**
   * Plays the user agent: GETs {@link lastAuthorizationUrl} without following the redirect,
   * checks it is a redirect to our `redirectUrl` carrying the request's `state`, and returns
   * the `code`. Throws on an error redirect (`error=…`) or anything else.
   */
  async authorize(): Promise<string> {
    const url = this.lastAuthorizationUrl;
    if (url === undefined) throw new Error(`provider ${this.label}: the SDK has not asked for an authorization yet`);
    const response = await fetch(url, { redirect: 'manual' });
    await response.body?.cancel();
    const location = response.headers.get('location');
    if (response.status < 300 || response.status >= 400 || location === null) {
      throw new Error(`provider ${this.label}: expected a redirect from ${url.origin}${url.pathname}, got HTTP ${response.status}`);
    }
    const target = new URL(location, url);
    if (`${target.origin}${target.pathname}` !== this.redirectUrl) {
      throw new Error(`provider ${this.label}: redirected to ${target.href}, not to ${this.redirectUrl}`);
    }
    const error = target.searchParams.get('error');
    if (error !== null) {
      throw new Error(`provider ${this.label}: authorization refused: ${error} ${target.searchParams.get('error_description') ?? ''}`.trim());
    }
    const expectedState = url.searchParams.get('state');
    if (target.searchParams.get('state') !== expectedState) {
      throw new Error(`provider ${this.label}: state ${target.searchParams.get('state')} does not match ${expectedState}`);
    }
    const code = target.searchParams.get('code');
    if (code === null || code === '') throw new Error(`provider ${this.label}: redirect without a code: ${target.href}`);
    this.codesReceived++;
    return code;
  }
}
