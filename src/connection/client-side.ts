/**
 * The client side of one connection: what the library declares to a server and how it answers the
 * requests a server sends back. Discovery (in a worker) and sessions (on the main thread) build
 * their connections from the same {@link ClientSide}, so a server sees one client whoever connects:
 * the same `clientInfo`, the same capabilities, the same auth and the same handlers.
 *
 * On the main thread the side calls the host's handlers directly; in a discovery worker it is a
 * proxy that forwards each call to the main thread (see `src/client/remote.ts`), because the
 * handlers and the OAuth provider are the host's objects and live there.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import type {
  ClientCapabilities,
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
  Implementation,
  LoggingLevel,
  LoggingMessageNotification,
  Root,
} from '@modelcontextprotocol/sdk/types.js';
import type { AuthChallenge } from './http-transport.js';

/** Parameters of an `elicitation/create` request. */
export type ElicitParams = ElicitRequest['params'];

/** Parameters of a `sampling/createMessage` request. */
export type SamplingParams = CreateMessageRequest['params'];

/** Parameters of a `notifications/message` (a server's log line). */
export type LogParams = LoggingMessageNotification['params'];

/** What a server asked for during discovery that the host could not give (for honest warnings). */
export interface Asked {
  /** The server asked `roots/list` and got this many roots. */
  roots?: number;
}

/** Everything the client side of one (profile, server) connection declares and answers. */
export interface ClientSide {
  /** `clientInfo` sent in `initialize`. */
  readonly info: Implementation;
  /** Exactly the capabilities the host configured handlers for. */
  readonly capabilities: ClientCapabilities;
  /** OAuth for HTTP servers, when the host has a provider for this server. */
  readonly authProvider?: OAuthClientProvider;
  /** Why no provider could be had (the host's factory threw): the server fails as `auth`. */
  readonly authError?: string;
  /** Answers `elicitation/create`; present exactly when the capability is declared. */
  elicit?(params: ElicitParams, signal: AbortSignal): Promise<ElicitResult>;
  /** Answers `sampling/createMessage`; present exactly when the capability is declared. */
  sample?(params: SamplingParams, signal: AbortSignal): Promise<CreateMessageResult>;
  /** Answers `roots/list`; present exactly when the capability is declared. */
  listRoots?(signal: AbortSignal): Promise<Root[]>;
  /**
   * True when this server has asked for roots before (in discovery, or an earlier session): a new
   * session then waits, briefly, until it has asked and been answered before it takes calls.
   */
  rootsAskedBefore?(): boolean;
  /** `logging/setLevel` sent to servers that declare logging. */
  readonly logLevel?: LoggingLevel;
  /** A server's `notifications/message`. */
  log?(params: LogParams): void;
  /** A 401/403 answer named what it wants (scope, resource metadata). */
  challenged?(challenge: AuthChallenge): void;
}

/** Optional `OAuthClientProvider` members: a proxy defines one exactly when the real provider has it. */
export const OPTIONAL_PROVIDER_METHODS = [
  'state',
  'saveClientInformation',
  'addClientAuthentication',
  'validateResourceURL',
  'invalidateCredentials',
  'prepareTokenRequest',
  'saveDiscoveryState',
  'discoveryState',
] as const;

/** One of {@link OPTIONAL_PROVIDER_METHODS}. */
export type OptionalProviderMethod = (typeof OPTIONAL_PROVIDER_METHODS)[number];

/** Every provider method a proxy may forward. */
export type ProviderMethod = OptionalProviderMethod | 'clientInformation' | 'tokens' | 'saveTokens' | 'redirectToAuthorization' | 'saveCodeVerifier' | 'codeVerifier';

/** What a worker needs to impersonate a provider: its synchronous members and which methods exist. */
export interface ProviderSnapshot {
  redirectUrl?: string;
  clientMetadata: OAuthClientMetadata;
  clientMetadataUrl?: string;
  methods: OptionalProviderMethod[];
}

/** A {@link ClientSide} as plain data, for a discovery worker to rebuild as a proxy. */
export interface ClientSideDescriptor {
  info: Implementation;
  capabilities: ClientCapabilities;
  elicitation: boolean;
  sampling: boolean;
  roots: boolean;
  logLevel?: LoggingLevel;
  auth?: ProviderSnapshot;
  authError?: string;
}

/** A call a worker-side proxy forwards to the main thread. */
export type SideCall =
  | { op: 'elicit'; params: ElicitParams }
  | { op: 'sample'; params: SamplingParams }
  | { op: 'roots' }
  | { op: 'log'; params: LogParams }
  | { op: 'challenge'; challenge: AuthChallenge }
  | { op: 'provider'; method: ProviderMethod; args: unknown[] };

/** What a worker uses when no host side was described (a coordinator built without a host). */
export function bareDescriptor(info: Implementation): ClientSideDescriptor {
  return { info, capabilities: {}, elicitation: false, sampling: false, roots: false };
}
