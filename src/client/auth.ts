/**
 * OAuth per (profile, server): one provider each, made by the host's `auth.provider(ctx)` on
 * first use and kept, so tenants never share tokens and a token refreshed by a session is the
 * one discovery uses next. The registry owns what the code flow needs between its two halves:
 * the last challenge a server sent (resource metadata, scope) and the authorization URL the
 * provider was sent to. `finish()` completes the flow with the SDK's own `auth()`.
 *
 * The provider handed to transports is the host's object behind a thin proxy that reports a
 * redirect (`server:auth-required`, with the URL) and forgets the pending authorization once
 * tokens are saved; every other member is the host's own, so the SDK sees exactly the optional
 * methods the host implemented.
 */
import { auth } from '@modelcontextprotocol/client';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { HttpServerConfig } from '../config/types.js';
import { McpSupervisorError, describeError } from '../errors.js';
import type { AuthChallenge } from '../connection/http-transport.js';

/** What the host's provider factory is told. */
export interface AuthContext {
  /** Canonical profile key. */
  profile: string;
  /** Server name in that profile. */
  server: string;
  /** The server's URL. */
  url: string;
  /** Aborted when the host closes. */
  signal: AbortSignal;
}

/** Makes the OAuth provider of one (profile, server), or returns undefined for "no OAuth here". */
export type AuthProviderFactory = (context: AuthContext) => OAuthClientProvider | undefined;

/** Payload of `server:auth-required`. */
export interface AuthRequiredEvent {
  profile: string;
  server: string;
  /** Where the user must go to authorise; absent when the flow failed before a redirect. */
  authorizationUrl?: string;
}

interface AuthRecord {
  provider: OAuthClientProvider | undefined;
  /** The factory threw: the server fails as `auth` with this reason. */
  error?: string;
  challenge?: AuthChallenge;
  /** Set by a redirect, cleared once tokens are saved. */
  authorizationUrl?: string;
}

/** The OAuth state of every (profile, server) of a host. */
export class AuthRegistry {
  private readonly records = new Map<string, AuthRecord>();
  private readonly closing = new AbortController();

  constructor(
    private readonly factory: AuthProviderFactory | undefined,
    private readonly emit: (payload: AuthRequiredEvent) => void,
  ) {}

  /** True when the host configured OAuth at all. */
  get enabled(): boolean {
    return this.factory !== undefined;
  }

  private id(key: string, server: HttpServerConfig): string {
    return `${key}\0${server.name}\0${server.url}`;
  }

  private record(key: string, server: HttpServerConfig): AuthRecord {
    const id = this.id(key, server);
    let record = this.records.get(id);
    if (record) return record;
    record = { provider: undefined };
    if (this.factory) {
      try {
        const made = this.factory({ profile: key, server: server.name, url: server.url, signal: this.closing.signal });
        if (made) record.provider = this.track(made, key, server.name, record);
      } catch (error) {
        record.error = `auth.provider threw for this server: ${describeError(error)}`;
      }
    }
    this.records.set(id, record);
    return record;
  }

  /** The tracked provider of a server, or undefined. */
  providerFor(key: string, server: HttpServerConfig): OAuthClientProvider | undefined {
    return this.record(key, server).provider;
  }

  /** Why the factory could not make a provider for this server, if it threw. */
  errorFor(key: string, server: HttpServerConfig): string | undefined {
    return this.record(key, server).error;
  }

  /** A 401/403 answer of this server named what it wants. */
  challenged(key: string, server: HttpServerConfig, challenge: AuthChallenge): void {
    this.record(key, server).challenge = challenge;
  }

  /** The authorization URL the provider was last sent to, while that authorization is pending. */
  pendingAuthorization(key: string, server: HttpServerConfig): string | undefined {
    return this.records.get(this.id(key, server))?.authorizationUrl;
  }

  /**
   * Completes the code flow of a server: exchanges `code` for tokens through the SDK's `auth()`,
   * with the resource metadata and scope of the server's last challenge; `iss` (RFC 9207), when
   * the redirect carried one, is checked against the authorization server's metadata.
   * @throws McpSupervisorError `AUTH_REQUIRED` when the exchange fails or more authorization is needed
   */
  async finish(key: string, server: HttpServerConfig, code: string, iss?: string): Promise<void> {
    const record = this.record(key, server);
    const provider = record.provider;
    if (!provider) {
      throw new McpSupervisorError('INVALID_CONFIG', `No OAuth provider is configured for MCP server "${server.name}" of profile "${key}" (set \`auth.provider\`).`, {
        profile: key,
        server: server.name,
        retryable: false,
      });
    }
    const challenge = record.challenge;
    let result: Awaited<ReturnType<typeof auth>>;
    try {
      result = await auth(provider, {
        serverUrl: server.url,
        authorizationCode: code,
        ...(iss === undefined ? {} : { iss }),
        ...(challenge?.resourceMetadataUrl ? { resourceMetadataUrl: new URL(challenge.resourceMetadataUrl) } : {}),
        ...(challenge?.scope ? { scope: challenge.scope } : {}),
      });
    } catch (error) {
      throw new McpSupervisorError('AUTH_REQUIRED', `Completing the authorization of MCP server "${server.name}" failed: ${describeError(error)}`, {
        profile: key,
        server: server.name,
        retryable: false,
      });
    }
    if (result !== 'AUTHORIZED') {
      throw new McpSupervisorError('AUTH_REQUIRED', `MCP server "${server.name}" still requires authorization after the code exchange.`, {
        profile: key,
        server: server.name,
        retryable: false,
      });
    }
    record.authorizationUrl = undefined;
  }

  /** Drops the records of a profile (its config was reloaded); providers are made anew on next use. */
  forget(key: string): void {
    for (const id of [...this.records.keys()]) if (id.startsWith(`${key}\0`)) this.records.delete(id);
  }

  /** Tells providers' factories the host is closing. */
  close(): void {
    this.closing.abort(new Error('the host is closing'));
  }

  private track(provider: OAuthClientProvider, profile: string, server: string, record: AuthRecord): OAuthClientProvider {
    const emit = this.emit;
    return new Proxy(provider, {
      get(target, property) {
        if (property === 'redirectToAuthorization') {
          return async (authorizationUrl: URL): Promise<void> => {
            record.authorizationUrl = authorizationUrl.href;
            await target.redirectToAuthorization(authorizationUrl);
            emit({ profile, server, authorizationUrl: authorizationUrl.href });
          };
        }
        if (property === 'saveTokens') {
          return async (...args: Parameters<OAuthClientProvider['saveTokens']>): Promise<void> => {
            await target.saveTokens(...args);
            record.authorizationUrl = undefined;
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}
