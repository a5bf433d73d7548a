/**
 * `createHost`: the public entry point. Validates every option and listed profile up front (a bad
 * config throws INVALID_CONFIG and nothing is created), then wires the parts: the canonical
 * profile key on every path, the readiness registry, discovery bodies in the piscina pool, and the
 * session layer for tool calls.
 */
import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { type Clock, systemClock } from './clock.js';
import { type AuthProviderFactory, AuthRegistry, type AuthRequiredEvent } from './client/auth.js';
import { DEFAULT_CLIENT_INFO } from './client/info.js';
import { type ClientOptions, ClientSides, type ResolvedClientOptions } from './client/sides.js';
import { LogGate, type ServerLogEvent } from './client/logs.js';
import { outputValidationStats } from './sessions/output-validation.js';
import { type Environment } from './config/expand.js';
import { scrubDeep } from './config/redact.js';
import { Lifeline } from './process/lifeline.js';
import { loadProfileFile } from './config/load.js';
import { parseProfileConfig } from './config/parse.js';
import { canonicalProfileKey, isPathLikeRef, type ProfileKeyOptions } from './config/profile-key.js';
import type { ProfileConfig, ServerConfig } from './config/types.js';
import { DiscoveryCoordinator, type DiscoveryOptions, type DiscoveryStats, resolveDiscoveryOptions } from './discovery/coordinator.js';
import { SharedDiscovery, discoveryShareKey } from './discovery/shared.js';
import { McpSupervisorError } from './errors.js';
import { TypedEmitter } from './events.js';
import type { DiscoveryDriver } from './readiness/driver.js';
import { type ReadinessEvents, ReadinessRegistry, type ReloadResult } from './readiness/registry.js';
import { serverToolKey } from './readiness/settlement.js';
import { checkPrompt, checkUri, createTurn, readFrom, withErrorsAsResults } from './readiness/turn.js';
import { toolAllowed } from './config/tool-filter.js';
import { checkArguments } from './readiness/arguments.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SCHEMA_DEPTH } from './connection/limits.js';
import type { CallOptions, ReadinessView, RequestOptions, Turn, WaitOptions } from './readiness/types.js';
import { SessionManager } from './sessions/manager.js';
import type { SessionOptions, SupervisorEvents, SupervisorStats } from './sessions/supervisor.js';
import type { BreakerOptions } from './sessions/breaker.js';

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
  discovery?: HostDiscoveryOptions;
  sessions?: Partial<Omit<SessionOptions, 'breaker' | 'connectTimeoutMs' | 'maxMessageBytes' | 'maxCatalogItems' | 'maxSchemaDepth' | 'markerEnv'>>;
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
   * Completes the OAuth code flow of an HTTP server with the authorization code the user's browser
   * brought back, then re-discovers that server; resolves with the profile's view once it settled.
   * @throws McpSupervisorError `AUTH_REQUIRED` when the code exchange fails, `UNKNOWN_SERVER`,
   *   `INVALID_ARGUMENTS` (not an HTTP server, or no code), `INVALID_CONFIG` (no `auth.provider`)
   */
  finishAuth(ref: string | undefined, server: string, authorizationCode: string, options?: WaitOptions): Promise<ReadinessView>;
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

function positive(name: string, value: number | undefined, fallback: number, allowZero = false): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0) || !Number.isInteger(value)) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be a ${allowZero ? 'non-negative' : 'positive'} integer, got \`${String(value)}\` (${typeof value})`);
  }
  return value;
}

function resolveSessionOptions(options: HostOptions, connectTimeoutMs: number): SessionOptions {
  const sessions = options.sessions ?? {};
  const replay = sessions.replay ?? 'idempotent';
  if (!['idempotent', 'always', 'never'].includes(replay)) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`sessions.replay\` to be one of "idempotent", "always", "never", got \`${String(replay)}\``);
  }
  return {
    respawnWaitMs: positive('sessions.respawnWaitMs', sessions.respawnWaitMs, 15_000),
    reconnectBudget: positive('sessions.reconnectBudget', sessions.reconnectBudget, 5),
    backoffBaseMs: positive('sessions.backoffBaseMs', sessions.backoffBaseMs, 250),
    backoffMaxMs: positive('sessions.backoffMaxMs', sessions.backoffMaxMs, 30_000),
    parkProbeIntervalMs: positive('sessions.parkProbeIntervalMs', sessions.parkProbeIntervalMs, 60_000),
    replay,
    maxConcurrentCalls: positive('sessions.maxConcurrentCalls', sessions.maxConcurrentCalls, 8),
    callTimeoutMs: positive('sessions.callTimeoutMs', sessions.callTimeoutMs, 60_000),
    connectTimeoutMs,
    eager: sessions.eager ?? true,
    warmConcurrency: positive('sessions.warmConcurrency', sessions.warmConcurrency, 4),
    countToolErrors: sessions.countToolErrors ?? false,
    listChangedDebounceMs: positive('sessions.listChangedDebounceMs', sessions.listChangedDebounceMs, 200, true),
    breaker: {
      failureThreshold: positive('breaker.failureThreshold', options.breaker?.failureThreshold, 5),
      cooldownMs: positive('breaker.cooldownMs', options.breaker?.cooldownMs, 30_000),
    },
  };
}

function invalidOption(name: string, expected: string, value: unknown): McpSupervisorError {
  const type = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  return new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be ${expected}, got ${type}`);
}

const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;

/** Validates `client` (handlers must be functions, `info` a name and a version, roots file: URIs). */
function resolveClientOptions(client: ClientOptions | undefined): ResolvedClientOptions {
  if (client === undefined) return { info: DEFAULT_CLIENT_INFO };
  if (typeof client !== 'object' || client === null) throw invalidOption('client', 'an object', client);
  const info = client.info ?? DEFAULT_CLIENT_INFO;
  if (typeof info !== 'object' || info === null || typeof info.name !== 'string' || info.name === '' || typeof info.version !== 'string') {
    throw invalidOption('client.info', 'an object with a non-empty `name` and a `version` string', info);
  }
  for (const name of ['elicitation', 'sampling'] as const) {
    if (client[name] !== undefined && typeof client[name] !== 'function') throw invalidOption(`client.${name}`, 'a function', client[name]);
  }
  const roots = client.roots;
  if (roots !== undefined && typeof roots !== 'function') {
    if (!Array.isArray(roots)) throw invalidOption('client.roots', 'an array of roots or a function returning them', roots);
    roots.forEach((root: unknown, index) => {
      const uri = (root as { uri?: unknown } | null)?.uri;
      if (typeof uri !== 'string' || !uri.startsWith('file://')) throw invalidOption(`client.roots[${index}].uri`, 'a file:// URI', uri);
    });
  }
  if (client.logLevel !== undefined && !(LOG_LEVELS as readonly unknown[]).includes(client.logLevel)) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`client.logLevel\` to be one of ${LOG_LEVELS.map((level) => `"${level}"`).join(', ')}, got \`${String(client.logLevel)}\``);
  }
  return {
    info: Object.freeze({ ...info }),
    ...(client.elicitation ? { elicitation: client.elicitation } : {}),
    ...(client.sampling ? { sampling: client.sampling } : {}),
    ...(roots === undefined ? {} : { roots: typeof roots === 'function' ? roots : Object.freeze(roots.map((root) => Object.freeze({ ...root }))) }),
    ...(client.logLevel ? { logLevel: client.logLevel } : {}),
  };
}

/**
 * The deepest schema the host can carry at all: every thread walks catalogues (cloning, freezing,
 * serialising) and a thread's stack ends around a few thousand nested objects.
 */
const MAX_SCHEMA_DEPTH = 512;

function atMost(name: string, value: number, max: number): number {
  if (value > max) throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be at most ${max}, got \`${value}\` (number)`);
  return value;
}

/** Validates `limits` and fills in the defaults. */
function resolveLimits(limits: HostLimits | undefined): Required<HostLimits> {
  if (limits !== undefined && (typeof limits !== 'object' || limits === null)) throw invalidOption('limits', 'an object', limits);
  return {
    maxMessageBytes: positive('limits.maxMessageBytes', limits?.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES),
    maxUnknownProfiles: positive('limits.maxUnknownProfiles', limits?.maxUnknownProfiles, 1000),
    maxCatalogItems: positive('limits.maxCatalogItems', limits?.maxCatalogItems, DEFAULT_MAX_CATALOG_ITEMS),
    maxSchemaDepth: atMost('limits.maxSchemaDepth', positive('limits.maxSchemaDepth', limits?.maxSchemaDepth, DEFAULT_MAX_SCHEMA_DEPTH), MAX_SCHEMA_DEPTH),
  };
}

/** Validates `profileRoots`: absolute-or-relative directories, realpath'd (a symlinked root is its target). */
function resolveProfileRoots(roots: unknown, cwd: string): string[] {
  if (roots === undefined) return [];
  if (!Array.isArray(roots) || roots.some((root) => typeof root !== 'string' || root === '')) throw invalidOption('profileRoots', 'an array of directory paths', roots);
  return roots.map((root: string) => {
    const absolute = path.resolve(cwd, root);
    try {
      return realpathSync(absolute);
    } catch {
      return absolute;
    }
  });
}

/** True when `key` (a canonical path) is one of `roots` or inside one. */
function insideRoots(key: string, roots: readonly string[]): boolean {
  return roots.some((root) => key === root || key.startsWith(root.endsWith(path.sep) ? root : root + path.sep));
}

/** Validates `auth`. */
function resolveAuthFactory(auth: HostOptions['auth']): AuthProviderFactory | undefined {
  if (auth === undefined) return undefined;
  if (typeof auth !== 'object' || auth === null || typeof auth.provider !== 'function') throw invalidOption('auth.provider', 'a function', auth?.provider);
  return auth.provider;
}

/** A server of a config by its own name (never an inherited property such as `constructor`). */
/**
 * A profile that failed to load (unknown, unreadable, invalid) answers every request with its own
 * error, not with "no such server": the host learns what is actually wrong.
 */
function assertProfileUsable(view: ReadinessView): void {
  if (view.error) throw McpSupervisorError.fromJSON(view.error);
}

function serverNamed(config: ProfileConfig | undefined, name: string): ServerConfig | undefined {
  return config && Object.hasOwn(config.servers, name) ? config.servers[name] : undefined;
}

/** Parses every listed profile (all or nothing), keyed by canonical key. */
function parseListedProfiles(profiles: Record<string, unknown>, keyOptions: ProfileKeyOptions, env: Environment): Map<string, ProfileConfig> {
  const parsed = new Map<string, ProfileConfig>();
  for (const [ref, document] of Object.entries(profiles)) {
    const key = canonicalProfileKey(ref, keyOptions);
    if (parsed.has(key)) {
      throw new McpSupervisorError('INVALID_CONFIG', `Invalid config: profile "${ref}" is listed twice (both spellings mean "${key}")`, { profile: key });
    }
    parsed.set(key, parseProfileConfig(document, { profile: ref, env }));
  }
  return parsed;
}

/** Where a path-like profile key's config lives: the file, or a directory's `.mcp.json`. */
function configFileFor(key: string): string {
  try {
    if (statSync(key).isDirectory()) return path.join(key, '.mcp.json');
  } catch {
    // Not there (yet): reading it reports the error with the file name.
  }
  return key;
}

/**
 * Creates a host. Validates options and listed profiles synchronously.
 * @throws McpSupervisorError `INVALID_CONFIG` naming the option, or the profile, server and field
 */
export function createHost(options: HostOptions = {}): Host {
  const env = options.env ?? process.env;
  const clock = options.clock ?? systemClock;
  const keyOptions: ProfileKeyOptions = {
    ...(options.defaultProfile === undefined ? {} : { defaultProfile: options.defaultProfile }),
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
  };
  let listed = parseListedProfiles(options.profiles ?? {}, keyOptions, env);
  const discoveryOptions = options.discovery ?? {};
  const readinessCapMs = positive('discovery.readinessCapMs', discoveryOptions.readinessCapMs, 120_000);
  const retryCooldownMs = positive('discovery.retryCooldownMs', discoveryOptions.retryCooldownMs, 30_000);
  const maxRetryCooldownMs = positive('discovery.maxRetryCooldownMs', discoveryOptions.maxRetryCooldownMs, 600_000);
  const { readinessCapMs: _cap, retryCooldownMs: _cooldown, maxRetryCooldownMs: _maxCooldown, shareForMs: _share, ...coordinatorOptions } = discoveryOptions;
  const shareForMs = positive('discovery.shareForMs', discoveryOptions.shareForMs, 60_000, true);
  const limits = resolveLimits(options.limits);
  const profileRoots = resolveProfileRoots(options.profileRoots, options.cwd ?? process.cwd());
  const clientOptions = resolveClientOptions(options.client);
  const authFactory = resolveAuthFactory(options.auth);
  const events = new TypedEmitter<HostEvents>();
  const auth = new AuthRegistry(authFactory, (payload) => events.emit('server:auth-required', payload));
  const logs = new LogGate((event) => events.emit('server:log', event));
  const sides = new ClientSides(clientOptions, auth, logs);
  // Every option is validated before anything is started (a bad option must leave nothing behind).
  const resolvedDiscovery = resolveDiscoveryOptions(coordinatorOptions);
  const connectTimeoutMs = options.discoveryDriver ? positive('discovery.connectTimeoutMs', discoveryOptions.connectTimeoutMs, 15_000) : resolvedDiscovery.connectTimeoutMs;
  const resolvedSessions = resolveSessionOptions(options, connectTimeoutMs);
  // Started before anything is spawned: every server carries its marker from its first instant.
  const lifeline = Lifeline.start();
  const driver =
    options.discoveryDriver ??
    new SharedDiscovery(
      new DiscoveryCoordinator(
        resolvedDiscovery,
        sides,
        { maxMessageBytes: limits.maxMessageBytes, maxCatalogItems: limits.maxCatalogItems, maxSchemaDepth: limits.maxSchemaDepth },
        lifeline.env,
      ),
      { shareKey: (_key, server) => discoveryShareKey(server, sides), reuseForMs: shareForMs, clock },
    );
  const sessionOptions: SessionOptions = {
    ...resolvedSessions,
    maxMessageBytes: limits.maxMessageBytes,
    maxCatalogItems: limits.maxCatalogItems,
    maxSchemaDepth: limits.maxSchemaDepth,
    markerEnv: lifeline.env,
  };

  const loadConfig = async (key: string, signal: AbortSignal): Promise<ProfileConfig | undefined> => {
    const known = listed.get(key);
    if (known) return known;
    if (options.loadProfile) {
      const document = await options.loadProfile(key, signal);
      return document === undefined ? undefined : parseProfileConfig(document, { profile: key, env });
    }
    // Only inside the configured roots: a stray or hostile reference reads (and runs) nothing.
    if (isPathLikeRef(key) && insideRoots(key, profileRoots)) return loadProfileFile(configFileFor(key), { profile: key, env });
    return undefined;
  };

  // The registry needs the session layer and the session layer reports tool-list changes to the
  // registry: the late-bound reference below breaks that cycle.
  let registry: ReadinessRegistry | undefined;
  const sessions = new SessionManager(
    sessionOptions,
    clock,
    events,
    (key, server, lists) => registry?.replaceServerLists(key, server, lists),
    sides,
    options.random,
  );
  registry = new ReadinessRegistry(driver, sessions, loadConfig, clock, { readinessCapMs, retryCooldownMs, maxRetryCooldownMs, maxUnknownProfiles: limits.maxUnknownProfiles }, events, {
    authorizationUrl: (key, name) => {
      const server = serverNamed(registry?.configOf(key), name);
      return server ? sides.pendingAuthorization(key, server) : undefined;
    },
    warnings: (key, name) => sides.warnings(key, name),
  });
  const readiness = registry;
  let closing: Promise<void> | undefined;

  const keyOf = (ref?: string): string => canonicalProfileKey(ref, keyOptions);

  const host: Host = {
    start(): void {
      for (const key of listed.keys()) readiness.kick(key);
    },
    status(ref?: string): ReadinessView {
      return readiness.status(keyOf(ref));
    },
    async ready(ref?: string, waitOptions: WaitOptions = {}): Promise<ReadinessView> {
      return (await readiness.wait(keyOf(ref), waitOptions)).view;
    },
    async beginTurn(ref?: string, waitOptions: WaitOptions = {}): Promise<Turn> {
      const key = keyOf(ref);
      const { view, catalog } = await readiness.wait(key, waitOptions);
      return createTurn(view, catalog, () => readiness.configOf(key), sessions);
    },
    callTool(ref, serverName, tool, args = {}, callOptions = {}): Promise<CallToolResult> {
      return withErrorsAsResults(callOptions, async () => {
        const key = keyOf(ref);
        const checked = checkArguments(args, { profile: key, server: String(serverName), tool: String(tool) });
        const { view, catalog } = await readiness.wait(key, callOptions.signal ? { signal: callOptions.signal } : {});
        assertProfileUsable(view);
        const server = serverNamed(readiness.configOf(key), serverName);
        if (!server || server.disabled) {
          throw new McpSupervisorError('UNKNOWN_SERVER', `The MCP server "${serverName}" is not configured in profile "${key}".`, { profile: key, server: serverName, retryable: false });
        }
        // The server's tool filter is a security control: a hidden tool is refused whatever state
        // the server is in, before anything is sent.
        if (!toolAllowed(server.toolFilter, String(tool))) {
          throw new McpSupervisorError('UNKNOWN_TOOL', `The MCP server "${serverName}" has no tool "${tool}".`, { profile: key, server: serverName, retryable: false });
        }
        const route = catalog.byServerTool.get(serverToolKey(serverName, tool));
        // A parked server's tools leave the catalog, but the server is still there: its supervisor
        // says it is parked and when it is probed next (never "no such tool").
        const parked = sessions.isExcluded(key, serverName);
        if (!route && !parked && Object.hasOwn(view.servers, serverName) && view.servers[serverName]?.status === 'ready') {
          throw new McpSupervisorError('UNKNOWN_TOOL', `The MCP server "${serverName}" has no tool "${tool}".`, { profile: key, server: serverName, retryable: false });
        }
        return sessions.callTool({ key, server, route: route ?? { server: serverName, tool }, args: checked, options: callOptions });
      });
    },
    async readResource(ref, serverName, uri, requestOptions = {}): Promise<ReadResourceResult> {
      const key = keyOf(ref);
      const checked = checkUri(uri, key, String(serverName));
      assertProfileUsable((await readiness.wait(key, requestOptions.signal ? { signal: requestOptions.signal } : {})).view);
      return (await readFrom(key, readiness.configOf(key), sessions, serverName, { kind: 'resource', uri: checked, options: requestOptions })) as ReadResourceResult;
    },
    async getPrompt(ref, serverName, name, args, requestOptions = {}): Promise<GetPromptResult> {
      const key = keyOf(ref);
      const checked = checkPrompt(name, args, key, String(serverName));
      assertProfileUsable((await readiness.wait(key, requestOptions.signal ? { signal: requestOptions.signal } : {})).view);
      return (await readFrom(key, readiness.configOf(key), sessions, serverName, { kind: 'prompt', ...checked, options: requestOptions })) as GetPromptResult;
    },
    rootsChanged(ref?: string): Promise<number> {
      return sessions.rootsChanged(keyOf(ref));
    },
    retry(ref?: string, waitOptions: WaitOptions = {}): Promise<ReadinessView> {
      return readiness.retry(keyOf(ref), waitOptions);
    },
    async finishAuth(ref, serverName, authorizationCode, waitOptions = {}): Promise<ReadinessView> {
      const key = keyOf(ref);
      if (typeof authorizationCode !== 'string' || authorizationCode === '') {
        throw new McpSupervisorError('INVALID_ARGUMENTS', 'Expected `authorizationCode` to be a non-empty string', { profile: key, server: String(serverName), retryable: false });
      }
      assertProfileUsable((await readiness.wait(key, waitOptions.signal ? { signal: waitOptions.signal } : {})).view);
      const server = serverNamed(readiness.configOf(key), serverName);
      if (!server) {
        throw new McpSupervisorError('UNKNOWN_SERVER', `The MCP server "${serverName}" is not configured in profile "${key}".`, { profile: key, server: serverName, retryable: false });
      }
      if (server.transport === 'stdio') {
        throw new McpSupervisorError('INVALID_ARGUMENTS', `The MCP server "${serverName}" is a stdio server; OAuth applies to HTTP servers only.`, { profile: key, server: serverName, retryable: false });
      }
      await auth.finish(key, server, authorizationCode);
      sessions.revive(key);
      return readiness.rediscover(key, [serverName], 'authorization finished', waitOptions);
    },
    async reload(ref?: string, reloadOptions: { profiles?: Record<string, unknown> } = {}): Promise<ReloadResult> {
      let replaced: Map<string, ProfileConfig> | undefined;
      if (reloadOptions.profiles) replaced = parseListedProfiles(reloadOptions.profiles, keyOptions, env);
      const keys = ref === undefined ? [...new Set([...readiness.keys(), ...listed.keys(), ...(replaced?.keys() ?? [])])] : [keyOf(ref)];
      const previous = listed;
      if (replaced) listed = replaced;
      try {
        return await readiness.reload(keys);
      } catch (error) {
        // A failed reload leaves the listed profiles as they were: nothing half-applied.
        listed = previous;
        throw error;
      }
    },
    stats(): HostStats {
      return scrubDeep({
        profiles: readiness.keys().length,
        discovery: driver.stats(),
        sessions: sessions.stats(),
        outputSchemas: outputValidationStats(),
        logsDropped: logs.dropped,
      });
    },
    on(event, listener) {
      return events.on(event, listener);
    },
    profileKey(ref?: string): string {
      return keyOf(ref);
    },
    close(): Promise<void> {
      // One promise for every caller: a second close() resolves when the first one is done, not
      // before. A ref'd timer keeps the event loop alive meanwhile (every wait inside is unref'd
      // so nothing else would), so `await host.close(); console.log(…)` always prints.
      closing ??= (async () => {
        const keepAlive = setInterval(() => undefined, 1 << 30);
        try {
          auth.close();
          await readiness.close();
          // Last: anything still carrying the marker now is a leftover the reaper takes down.
          await lifeline.close();
        } finally {
          clearInterval(keepAlive);
        }
      })();
      return closing;
    },
  };
  return host;
}
