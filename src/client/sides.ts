/**
 * The host's client side for every (profile, server): built from the host's `client` options and
 * its OAuth registry, identical for discovery and sessions. On the main thread a connection gets
 * a {@link ClientSide} that calls the host's handlers directly; a discovery worker gets a
 * {@link ClientSideDescriptor} (plain data) and sends every call back here through {@link serve}.
 *
 * Handlers receive `{ profile, server, signal }`: a handler never sees another profile's request,
 * even when two profiles list the same server.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { ClientCapabilities, CreateMessageResult, ElicitResult, Implementation, LoggingLevel, Root } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import {
  type ClientSide,
  type ClientSideDescriptor,
  type ElicitParams,
  type LogParams,
  OPTIONAL_PROVIDER_METHODS,
  type ProviderMethod,
  type SamplingParams,
  type SideCall,
} from '../connection/client-side.js';
import { McpSupervisorError } from '../errors.js';
import type { AuthRegistry } from './auth.js';
import type { LogGate } from './logs.js';

/** What every handler is told about the request it answers. */
export interface HandlerContext {
  /** Canonical profile key of the connection the request came from. */
  profile: string;
  /** Server name in that profile. */
  server: string;
  /** Aborted when the server cancels the request or the connection ends. */
  signal: AbortSignal;
}

/** Answers a server's `elicitation/create` (form mode). Omitted fields get the schema's defaults. */
export type ElicitationHandler = (params: ElicitParams, context: HandlerContext) => ElicitResult | Promise<ElicitResult>;

/** Answers a server's `sampling/createMessage` (the host runs its model). */
export type SamplingHandler = (params: SamplingParams, context: HandlerContext) => CreateMessageResult | Promise<CreateMessageResult>;

/** The roots a server may work in: a fixed list, or per (profile, server). */
export type RootsOption = readonly Root[] | ((context: HandlerContext) => readonly Root[] | Promise<readonly Root[]>);

/** The client the host presents to its servers. */
export interface ClientOptions {
  /** `clientInfo` sent in `initialize`. Default `{ name: 'mcp-supervisor', version }`. */
  info?: Implementation;
  /** Declares the elicitation capability (form mode) and answers `elicitation/create`. */
  elicitation?: ElicitationHandler;
  /** Declares the sampling capability and answers `sampling/createMessage`. */
  sampling?: SamplingHandler;
  /** Declares the roots capability (with `listChanged`) and answers `roots/list`. */
  roots?: RootsOption;
  /** Sent as `logging/setLevel` to servers that declare logging. */
  logLevel?: LoggingLevel;
}

/** {@link ClientOptions} validated. */
export interface ResolvedClientOptions {
  info: Implementation;
  elicitation?: ElicitationHandler;
  sampling?: SamplingHandler;
  roots?: RootsOption;
  logLevel?: LoggingLevel;
}

/** The capabilities a client with these handlers declares: exactly those. */
function capabilitiesOf(options: ResolvedClientOptions): ClientCapabilities {
  return Object.freeze({
    ...(options.elicitation ? { elicitation: { form: { applyDefaults: true } } } : {}),
    ...(options.sampling ? { sampling: {} } : {}),
    ...(options.roots ? { roots: { listChanged: true } } : {}),
  });
}

/** Builds the client side of each (profile, server) and answers what workers forward. */
export class ClientSides {
  private readonly capabilities: ClientCapabilities;
  /** Servers that asked for roots and were given none, by `profile\0server`. */
  private readonly rootless = new Set<string>();
  /** Servers that asked for roots at least once, by `profile\0server`. */
  private readonly askedRoots = new Set<string>();

  constructor(
    private readonly options: ResolvedClientOptions,
    private readonly auth: AuthRegistry,
    private readonly logs?: LogGate,
  ) {
    // Exactly what the host configured: servers hide features from clients that lack them.
    this.capabilities = capabilitiesOf(options);
  }

  /** True when sides differ per profile: handlers are told the profile, and OAuth is per profile. */
  get perProfile(): boolean {
    return this.options.elicitation !== undefined || this.options.sampling !== undefined || typeof this.options.roots === 'function' || this.auth.enabled;
  }

  /**
   * True when what `server` is told, or who answers it, depends on the profile: a handler told the
   * profile (elicitation, sampling, roots as a function) or OAuth (tokens are per profile; HTTP
   * only). Such a server's discovery is never shared between profiles.
   */
  differsByProfile(server: ServerConfig): boolean {
    const { elicitation, sampling, roots } = this.options;
    return elicitation !== undefined || sampling !== undefined || typeof roots === 'function' || (this.auth.enabled && server.transport !== 'stdio');
  }

  /** The authorization URL of a pending code flow of this server, if any. */
  pendingAuthorization(key: string, server: ServerConfig): string | undefined {
    return server.transport === 'stdio' ? undefined : this.auth.pendingAuthorization(key, server);
  }

  /** What the host should be told about a server beyond its status (it asked for roots and got none). */
  warnings(key: string, server: string): string[] {
    return this.rootless.has(`${key}\0${server}`)
      ? ['asked for roots (roots/list) and was given none: unless it has directories of its own, its tools may refuse every path until roots are configured (client.roots; doctor --root)']
      : [];
  }

  private provider(key: string, server: ServerConfig): { provider?: OAuthClientProvider; error?: string } {
    if (server.transport === 'stdio') return {};
    const provider = this.auth.providerFor(key, server);
    const error = this.auth.errorFor(key, server);
    return { ...(provider ? { provider } : {}), ...(error === undefined ? {} : { error }) };
  }

  private async roots(key: string, server: string, signal: AbortSignal): Promise<Root[]> {
    this.askedRoots.add(`${key}\0${server}`);
    const option = this.options.roots ?? [];
    const roots = [...(typeof option === 'function' ? await option({ profile: key, server, signal }) : option)];
    if (roots.length === 0) this.rootless.add(`${key}\0${server}`);
    else this.rootless.delete(`${key}\0${server}`);
    return roots;
  }

  /** The main-thread side of a connection to `server` for profile `key`. */
  sideFor(key: string, server: ServerConfig): ClientSide {
    const { provider, error } = this.provider(key, server);
    const { elicitation, sampling, roots, logLevel } = this.options;
    const context = (signal: AbortSignal): HandlerContext => ({ profile: key, server: server.name, signal });
    const logs = this.logs;
    return {
      info: this.options.info,
      capabilities: this.capabilities,
      ...(provider ? { authProvider: provider } : {}),
      ...(error === undefined ? {} : { authError: error }),
      ...(elicitation ? { elicit: async (params: ElicitParams, signal: AbortSignal) => elicitation(params, context(signal)) } : {}),
      ...(sampling ? { sample: async (params: SamplingParams, signal: AbortSignal) => sampling(params, context(signal)) } : {}),
      ...(roots ? { listRoots: (signal: AbortSignal) => this.roots(key, server.name, signal), rootsAskedBefore: () => this.askedRoots.has(`${key}\0${server.name}`) } : {}),
      ...(logLevel ? { logLevel } : {}),
      ...(logs ? { log: (params: LogParams) => logs.accept(key, server.name, params) } : {}),
      ...(server.transport === 'stdio' ? {} : { challenged: (challenge) => this.auth.challenged(key, server, challenge) }),
    };
  }

  /** The same side as plain data, for a discovery worker. */
  describe(key: string, server: ServerConfig): ClientSideDescriptor {
    const { provider, error } = this.provider(key, server);
    const descriptor: ClientSideDescriptor = {
      info: this.options.info,
      capabilities: this.capabilities,
      elicitation: this.options.elicitation !== undefined,
      sampling: this.options.sampling !== undefined,
      roots: this.options.roots !== undefined,
      ...(this.options.logLevel ? { logLevel: this.options.logLevel } : {}),
    };
    if (error !== undefined) descriptor.authError = error;
    if (provider) {
      const redirectUrl = provider.redirectUrl;
      descriptor.auth = {
        ...(redirectUrl === undefined ? {} : { redirectUrl: String(redirectUrl) }),
        clientMetadata: structuredClone(provider.clientMetadata),
        ...(provider.clientMetadataUrl === undefined ? {} : { clientMetadataUrl: provider.clientMetadataUrl }),
        methods: OPTIONAL_PROVIDER_METHODS.filter((method) => typeof provider[method] === 'function'),
      };
    }
    return descriptor;
  }

  /** Answers a call a worker forwarded for `server` of profile `key`. */
  async serve(key: string, server: ServerConfig, call: SideCall, signal: AbortSignal): Promise<unknown> {
    const side = this.sideFor(key, server);
    const missing = (what: string): McpSupervisorError => new McpSupervisorError('INVALID_CONFIG', `no ${what} is configured`);
    switch (call.op) {
      case 'elicit':
        if (!side.elicit) throw missing('elicitation handler');
        return side.elicit(call.params, signal);
      case 'sample':
        if (!side.sample) throw missing('sampling handler');
        return side.sample(call.params, signal);
      case 'roots':
        if (!side.listRoots) throw missing('roots list');
        return side.listRoots(signal);
      case 'log':
        side.log?.(call.params);
        return undefined;
      case 'challenge':
        side.challenged?.(call.challenge);
        return undefined;
      case 'provider':
        if (!side.authProvider) throw missing(`OAuth provider for "${server.name}"`);
        return callProvider(side.authProvider, call.method, call.args);
    }
  }
}

/**
 * Calls a provider method for a worker's proxy, converting what cannot cross a thread (URL,
 * Headers, URLSearchParams) to and from plain values.
 */
async function callProvider(provider: OAuthClientProvider, method: ProviderMethod, args: unknown[]): Promise<unknown> {
  const required = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error(`the OAuth provider has no ${method}()`);
    return value;
  };
  switch (method) {
    case 'redirectToAuthorization':
      return provider.redirectToAuthorization(new URL(String(args[0])));
    case 'validateResourceURL': {
      const url = await required(provider.validateResourceURL).call(provider, String(args[0]), args[1] as string | undefined);
      return url?.href;
    }
    case 'addClientAuthentication': {
      const headers = new Headers(args[0] as [string, string][]);
      const params = new URLSearchParams(String(args[1]));
      await required(provider.addClientAuthentication).call(provider, headers, params, String(args[2]), args[3] as never);
      return { headers: [...headers], params: params.toString() };
    }
    case 'prepareTokenRequest': {
      const params = await required(provider.prepareTokenRequest).call(provider, args[0] as string | undefined);
      return params?.toString();
    }
    default: {
      const fn = required((provider as unknown as Record<string, ((...values: unknown[]) => unknown) | undefined>)[method]);
      return fn.apply(provider, args);
    }
  }
}
