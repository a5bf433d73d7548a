/**
 * The public types of a host: its options, its events, its statistics and the {@link Host}
 * interface itself. `src/host.ts` re-exports them next to `createHost`.
 */
import type { EraCacheStats } from '../connection/era-cache.js';
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../clock.js';
import type { AuthProviderFactory, AuthRequiredEvent } from '../client/auth.js';
import type { ServerLogEvent } from '../client/logs.js';
import type { ClientOptions } from '../client/sides.js';
import type { Environment } from '../config/expand.js';
import type { DiscoveryOptions, DiscoveryStats } from '../discovery/coordinator.js';
import type { DiscoveryDriver } from '../readiness/driver.js';
import type { ReadinessEvents, ReloadResult } from '../readiness/registry.js';
import type { CallOptions, ReadinessView, RequestOptions, Turn, WaitOptions } from '../readiness/types.js';
import type { BreakerOptions } from '../sessions/breaker.js';
import type { SessionOptions, SupervisorEvents, SupervisorStats } from '../sessions/supervisor.js';

/** Discovery and readiness tuning. */
export interface HostDiscoveryOptions extends DiscoveryOptions {
  /** A generation that has not settled after this long is retired and settled (ms). Default 120 000. */
  readinessCapMs?: number;
  /** First cooldown before a failed server is re-discovered (ms), doubling per failure. Default 30 000. */
  retryCooldownMs?: number;
  /** Cap of that cooldown (ms). Default 600 000. */
  maxRetryCooldownMs?: number;
  /**
   * How long a server's ready discovery result is offered to profiles that have not seen it yet
   * (ms). Default 60 000; 0 shares only discoveries still in progress. See `shareDiscovery`.
   */
  shareForMs?: number;
}

/**
 * Session tuning a host may set. The rest of the session layer's options come from elsewhere:
 * `breaker`, `limits`, `discovery.connectTimeoutMs`, and the host's own lifeline.
 */
export type HostSessionOptions = Partial<Omit<SessionOptions, 'breaker' | 'connectTimeoutMs' | 'maxMessageBytes' | 'maxCatalogItems' | 'maxSchemaDepth' | 'markerEnv'>>;

/** Options of {@link createHost}. */
export interface HostOptions {
  /** Profiles by name or path, each a config document in any supported format. */
  profiles?: Record<string, unknown>;
  /** What `''`/`undefined` mean. Default `'default'`. */
  defaultProfile?: string;
  /**
   * Loads a profile that is not listed (called with its canonical key). Return a config document
   * (any supported format) or `undefined` for "no such profile". Without it, path-like refs inside
   * `profileRoots` are read from disk (a directory means its `.mcp.json`).
   */
  loadProfile?: (key: string, signal: AbortSignal) => Promise<unknown>;
  /**
   * Directories from which unlisted path-like profile references may be read (without
   * `loadProfile`). Default none: an unlisted path is `UNKNOWN_PROFILE` and nothing is read —
   * a reference that comes from a user must never make the host read, and run, a planted file.
   */
  profileRoots?: string[];
  /** Bounds on what servers and callers can make the host hold. */
  limits?: HostLimits;
  /** Discovery and readiness tuning. */
  discovery?: HostDiscoveryOptions;
  /** Tuning of supervised sessions and tool calls. */
  sessions?: HostSessionOptions;
  /** The per-server circuit breaker. */
  breaker?: Partial<BreakerOptions>;
  /**
   * The client the host presents to its servers: `clientInfo` and the handlers of requests servers
   * send back. A capability is declared exactly when its handler is given.
   */
  client?: ClientOptions;
  /**
   * OAuth for HTTP servers: `provider(ctx)` returns the SDK `OAuthClientProvider` of one
   * (profile, server) — one per pair, so tenants never share tokens — or undefined for none.
   * Discovery and sessions both use it; `finishAuth` completes a code flow.
   */
  auth?: { provider: AuthProviderFactory };
  /**
   * A file where the host keeps the protocol era each server was found to speak (a small JSON
   * file, keyed by server fingerprint), so a restarted host adopts it instead of probing again.
   * Relative to `cwd`. Default: kept in memory for the host's lifetime.
   */
  protocolCache?: string;
  /** Variables for `${VAR}` expansion. Default `process.env`. */
  env?: Environment;
  /** Directory relative profile paths resolve against. Default `process.cwd()`. */
  cwd?: string;
  /** Time seam (tests). */
  clock?: Clock;
  /** Randomness for backoff jitter (tests). */
  random?: () => number;
  /** Replaces discovery (tests of pure coordination logic only). */
  discoveryDriver?: DiscoveryDriver;
}

/** Events of the client side. */
export interface ClientEvents {
  /** A server needs the user to authorise: the OAuth provider was sent to `authorizationUrl`. */
  'server:auth-required': AuthRequiredEvent;
  /** A server's log line (`notifications/message`), scrubbed, at most 50 per second per server. */
  'server:log': ServerLogEvent;
}

/** Bounds on what servers and callers can make the host hold (each reported by name when hit). */
export interface HostLimits {
  /** Largest message a server may send: a stdio line, an HTTP JSON body, one SSE event (bytes). Default 10 MB. */
  maxMessageBytes?: number;
  /** Unknown or failed profile references remembered at once (oldest forgotten first). Default 1000. */
  maxUnknownProfiles?: number;
  /** Most tools (and, separately, prompts and resources) one server may list. Default 5000. */
  maxCatalogItems?: number;
  /** Deepest nesting of a tool's input or output schema. Default 64. */
  maxSchemaDepth?: number;
}

/** Every event a host emits, with its payload. */
export type HostEvents = ReadinessEvents & SupervisorEvents & ClientEvents;

/** The host's statistics. */
export interface HostStats {
  profiles: number;
  discovery: DiscoveryStats;
  sessions: SupervisorStats[];
  /** Output schemas compiled for result validation (lazily, on a tool's first call), process-wide. */
  outputSchemas: { compiled: number; uncompilable: number };
  /** Server log lines dropped by the per-server rate bound. */
  logsDropped: number;
  /** The protocol-era cache: verdicts held, verdicts dropped as stale, and why its file failed, if it did. */
  protocolEras: EraCacheStats;
}

/** A running host. */
export interface Host {
  /** Kicks off background discovery of every listed profile. */
  start(): void;
  /** A profile's readiness now. Never blocks. */
  status(ref?: string): ReadinessView;
  /** Waits (bounded) for a profile to settle. */
  ready(ref?: string, options?: WaitOptions): Promise<ReadinessView>;
  /** Waits (bounded) for a profile and returns a frozen snapshot of its tools. */
  beginTurn(ref?: string, options?: WaitOptions): Promise<Turn>;
  /** Calls a tool without a turn (a tool the server's filter hides is UNKNOWN_TOOL, and nothing is sent). */
  callTool(ref: string | undefined, server: string, tool: string, args?: Record<string, unknown>, options?: CallOptions): Promise<CallToolResult>;
  /** Reads a resource of a server without a turn (supervised like a call). */
  readResource(ref: string | undefined, server: string, uri: string, options?: RequestOptions): Promise<ReadResourceResult>;
  /** Fetches a prompt of a server without a turn (supervised like a call). */
  getPrompt(ref: string | undefined, server: string, name: string, args?: Record<string, string>, options?: RequestOptions): Promise<GetPromptResult>;
  /**
   * The roots of a profile changed: its live sessions are sent `notifications/roots/list_changed`
   * (servers then ask `roots/list` again). Resolves to how many servers were told.
   */
  rootsChanged(ref?: string): Promise<number>;
  /** Re-discovers a profile now (after quiescing the running discovery). */
  retry(ref?: string, options?: WaitOptions): Promise<ReadinessView>;
  /**
   * Completes the OAuth code flow of an HTTP server with what the user's browser brought back,
   * then re-discovers that server; resolves with the profile's view once it settled. Pass the
   * redirect's query parameters (`URLSearchParams` with `code` and, per RFC 9207, `iss`) so the
   * authorization server's identity is checked; a bare code string skips that check.
   * @throws McpSupervisorError `AUTH_REQUIRED` when the code exchange fails (an `iss` that is not
   *   the expected issuer included), `UNKNOWN_SERVER`, `INVALID_ARGUMENTS` (not an HTTP server, or
   *   no code), `INVALID_CONFIG` (no `auth.provider`)
   */
  finishAuth(ref: string | undefined, server: string, authorization: string | URLSearchParams, options?: WaitOptions): Promise<ReadinessView>;
  /** Re-reads configs and restarts discovery of one or every profile; `profiles` replaces listed ones. */
  reload(ref?: string, options?: { profiles?: Record<string, unknown> }): Promise<ReloadResult>;
  stats(): HostStats;
  /** Subscribes to an event; returns the unsubscribe function. */
  on<Name extends keyof HostEvents>(event: Name, listener: (payload: HostEvents[Name]) => void): () => void;
  /** The canonical key of a profile reference. */
  profileKey(ref?: string): string;
  /** Ends every worker, process and session. Idempotent. */
  close(): Promise<void>;
}
