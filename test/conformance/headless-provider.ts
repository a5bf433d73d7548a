/**
 * The OAuth provider every conformance client program uses (ours through the public API, and the
 * bare v1 and v2 SDK baselines): an authorization-code provider for a headless client. "Redirecting
 * the user agent" is a fetch of the authorization URL that does not follow the redirect; the
 * callback query (`code`, and `iss` when the authorization server sends one, RFC 9207) is read off
 * its Location header and kept until {@link HeadlessOAuthProvider.takeCallback}, as a host's
 * callback route would receive it. Everything else is stored exactly as the SDK hands it over.
 * Written to the v1 SDK's provider interface, which the v2 SDK accepts unchanged.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/** The redirect URL every conformance scenario accepts. */
export const REDIRECT_URL = 'http://localhost:3000/callback';

/** How one program's provider presents itself. */
export interface HeadlessProviderOptions {
  /** `client_name` of the registration metadata. */
  clientName: string;
  /** The client id metadata document URL (CIMD scenarios). */
  clientMetadataUrl?: string;
  /** Client information registered out of band (pre-registration scenarios). */
  preRegistered?: OAuthClientInformationMixed;
  /** `token_endpoint_auth_method` of the registration metadata, when the program names one. */
  tokenEndpointAuthMethod?: string;
  /** Authorization requests after which the provider refuses (a client stuck in a loop stops). */
  maxAuthorizations?: number;
  /** Where a program's verbose log goes. */
  log?(...parts: unknown[]): void;
}

/** See the module comment. */
export class HeadlessOAuthProvider implements OAuthClientProvider {
  readonly clientMetadataUrl: string | undefined;
  private info: OAuthClientInformationMixed | undefined;
  private savedTokens: OAuthTokens | undefined;
  private verifier: string | undefined;
  private pendingCallback: URLSearchParams | undefined;
  private authorizations = 0;

  constructor(private readonly options: HeadlessProviderOptions) {
    this.clientMetadataUrl = options.clientMetadataUrl;
    this.info = options.preRegistered;
  }

  get redirectUrl(): string {
    return REDIRECT_URL;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.options.clientName,
      redirect_uris: [REDIRECT_URL],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      ...(this.options.tokenEndpointAuthMethod === undefined ? {} : { token_endpoint_auth_method: this.options.tokenEndpointAuthMethod }),
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.info;
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.info = info;
  }

  tokens(): OAuthTokens | undefined {
    return this.savedTokens;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.savedTokens = tokens;
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error('no PKCE code verifier saved');
    return this.verifier;
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    const limit = this.options.maxAuthorizations;
    if (limit !== undefined && ++this.authorizations > limit) throw new Error(`giving up after ${limit} authorization requests`);
    this.options.log?.('authorizing at', authorizationUrl.href);
    const response = await fetch(authorizationUrl, { redirect: 'manual' });
    await response.body?.cancel();
    const location = response.headers.get('location');
    if (!location) throw new Error(`the authorization endpoint answered ${response.status} without a redirect`);
    const callback = new URL(location, authorizationUrl).searchParams;
    if (!callback.get('code')) throw new Error(`the authorization redirect carried no code: ${location}`);
    this.pendingCallback = callback;
  }

  /** The callback query of the last authorization redirect, once. */
  takeCallback(): URLSearchParams | undefined {
    const callback = this.pendingCallback;
    this.pendingCallback = undefined;
    return callback;
  }
}
