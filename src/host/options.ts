/**
 * Option resolution of `createHost`: every option is validated (through the one vocabulary of
 * `src/validate.ts`) and given its default here, before anything is created — a bad option throws
 * `INVALID_CONFIG` naming it and leaves nothing behind.
 *
 * The order options are checked in is observable (the first wrong one is the one reported) and is
 * kept as it has always been: readiness timings, `shareForMs`, `limits`, `profileRoots`,
 * `client`, `auth`, the rest of `discovery`, `sessions`, `breaker`.
 */
import { realpathSync } from 'node:fs';
import path from 'node:path';
import type { AuthProviderFactory } from '../client/auth.js';
import { DEFAULT_CLIENT_INFO } from '../client/info.js';
import type { ClientOptions, ResolvedClientOptions } from '../client/sides.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SCHEMA_DEPTH } from '../connection/limits.js';
import { type ResolvedDiscoveryOptions, resolveDiscoveryOptions } from '../discovery/options.js';
import type { ReadinessOptions } from '../readiness/registry.js';
import type { SessionOptions } from '../sessions/supervisor.js';
import { McpSupervisorError } from '../errors.js';
import { atMost, integerOption, oneOf, shapeError } from '../validate.js';
import type { HostLimits, HostOptions } from './types.js';

/** The session options that come from the host's own options (limits and the marker are added when wiring). */
export type HostSessionSettings = Omit<SessionOptions, 'maxMessageBytes' | 'maxCatalogItems' | 'maxSchemaDepth' | 'markerEnv'>;

/** Every option of a host, validated, with its default filled in. */
export interface ResolvedHostOptions {
  readiness: Required<ReadinessOptions>;
  /** How long a ready discovery result is offered to other profiles (ms; 0: flights in progress only). */
  shareForMs: number;
  limits: Required<HostLimits>;
  /** Real paths of the directories unlisted path-like profiles may be read from. */
  profileRoots: string[];
  client: ResolvedClientOptions;
  authFactory: AuthProviderFactory | undefined;
  discovery: ResolvedDiscoveryOptions;
  sessions: HostSessionSettings;
  /** Absolute path of the era cache file, if any. */
  protocolCache: string | undefined;
}

/**
 * Validates every option of `createHost` and fills in the defaults. Listed profiles are not
 * options: they are parsed (and reported) before this runs.
 * @throws McpSupervisorError `INVALID_CONFIG` naming the first option that is wrong
 */
export function resolveHostOptions(options: HostOptions): ResolvedHostOptions {
  const discovery = options.discovery ?? {};
  const readinessCapMs = integerOption('discovery.readinessCapMs', discovery.readinessCapMs, 120_000);
  const retryCooldownMs = integerOption('discovery.retryCooldownMs', discovery.retryCooldownMs, 30_000);
  const maxRetryCooldownMs = integerOption('discovery.maxRetryCooldownMs', discovery.maxRetryCooldownMs, 600_000);
  const shareForMs = integerOption('discovery.shareForMs', discovery.shareForMs, 60_000, { min: 0 });
  const limits = resolveLimits(options.limits);
  const profileRoots = resolveProfileRoots(options.profileRoots, options.cwd ?? process.cwd());
  const client = resolveClientOptions(options.client);
  const authFactory = resolveAuthFactory(options.auth);
  // The coordinator's own options (it ignores the host-only ones above). Its connect bound also
  // bounds a session's `initialize`, with or without a real coordinator.
  const resolvedDiscovery = resolveDiscoveryOptions(discovery);
  return {
    readiness: { readinessCapMs, retryCooldownMs, maxRetryCooldownMs, maxUnknownProfiles: limits.maxUnknownProfiles },
    shareForMs,
    limits,
    profileRoots,
    client,
    authFactory,
    discovery: resolvedDiscovery,
    sessions: resolveSessionOptions(options, resolvedDiscovery.connectTimeoutMs),
    protocolCache: resolveProtocolCache(options.protocolCache, options.cwd ?? process.cwd()),
  };
}

function resolveProtocolCache(file: unknown, cwd: string): string | undefined {
  if (file === undefined) return undefined;
  if (typeof file !== 'string' || file === '') throw new McpSupervisorError('INVALID_CONFIG', `Expected \`protocolCache\` to be a file path, got ${typeof file === 'string' ? 'an empty string' : typeof file}`, { retryable: false });
  return path.resolve(cwd, file);
}

const REPLAY_MODES: readonly SessionOptions['replay'][] = ['idempotent', 'always', 'never'];

function resolveSessionOptions(options: HostOptions, connectTimeoutMs: number): HostSessionSettings {
  const sessions = options.sessions ?? {};
  const replay = oneOf('sessions.replay', sessions.replay ?? 'idempotent', REPLAY_MODES);
  return {
    respawnWaitMs: integerOption('sessions.respawnWaitMs', sessions.respawnWaitMs, 15_000),
    reconnectBudget: integerOption('sessions.reconnectBudget', sessions.reconnectBudget, 5),
    backoffBaseMs: integerOption('sessions.backoffBaseMs', sessions.backoffBaseMs, 250),
    backoffMaxMs: integerOption('sessions.backoffMaxMs', sessions.backoffMaxMs, 30_000),
    parkProbeIntervalMs: integerOption('sessions.parkProbeIntervalMs', sessions.parkProbeIntervalMs, 60_000),
    replay,
    maxConcurrentCalls: integerOption('sessions.maxConcurrentCalls', sessions.maxConcurrentCalls, 8),
    callTimeoutMs: integerOption('sessions.callTimeoutMs', sessions.callTimeoutMs, 60_000),
    connectTimeoutMs,
    eager: sessions.eager ?? true,
    warmConcurrency: integerOption('sessions.warmConcurrency', sessions.warmConcurrency, 4),
    countToolErrors: sessions.countToolErrors ?? false,
    listChangedDebounceMs: integerOption('sessions.listChangedDebounceMs', sessions.listChangedDebounceMs, 200, { min: 0 }),
    breaker: {
      failureThreshold: integerOption('breaker.failureThreshold', options.breaker?.failureThreshold, 5),
      cooldownMs: integerOption('breaker.cooldownMs', options.breaker?.cooldownMs, 30_000),
    },
  };
}

/**
 * The deepest schema the host can carry at all: every thread walks catalogues (cloning, freezing,
 * serialising) and a thread's stack ends around a few thousand nested objects.
 */
const MAX_SCHEMA_DEPTH = 512;

function resolveLimits(limits: HostLimits | undefined): Required<HostLimits> {
  if (limits !== undefined && (typeof limits !== 'object' || limits === null)) throw shapeError('limits', 'an object', limits);
  return {
    maxMessageBytes: integerOption('limits.maxMessageBytes', limits?.maxMessageBytes, DEFAULT_MAX_MESSAGE_BYTES),
    maxUnknownProfiles: integerOption('limits.maxUnknownProfiles', limits?.maxUnknownProfiles, 1000),
    maxCatalogItems: integerOption('limits.maxCatalogItems', limits?.maxCatalogItems, DEFAULT_MAX_CATALOG_ITEMS),
    maxSchemaDepth: atMost('limits.maxSchemaDepth', integerOption('limits.maxSchemaDepth', limits?.maxSchemaDepth, DEFAULT_MAX_SCHEMA_DEPTH), MAX_SCHEMA_DEPTH),
  };
}

/** Absolute-or-relative directories, realpath'd (a symlinked root is its target). */
function resolveProfileRoots(roots: unknown, cwd: string): string[] {
  if (roots === undefined) return [];
  if (!Array.isArray(roots) || roots.some((root) => typeof root !== 'string' || root === '')) throw shapeError('profileRoots', 'an array of directory paths', roots);
  return roots.map((root: string) => {
    const absolute = path.resolve(cwd, root);
    try {
      return realpathSync(absolute);
    } catch {
      // Not there (yet): profiles under it cannot be read either, but the root is kept as given.
      return absolute;
    }
  });
}

function resolveAuthFactory(auth: HostOptions['auth']): AuthProviderFactory | undefined {
  if (auth === undefined) return undefined;
  if (typeof auth !== 'object' || auth === null || typeof auth.provider !== 'function') throw shapeError('auth.provider', 'a function', auth?.provider);
  return auth.provider;
}

const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const;

/** Handlers must be functions, `info` a name and a version, roots file: URIs. */
function resolveClientOptions(client: ClientOptions | undefined): ResolvedClientOptions {
  if (client === undefined) return { info: DEFAULT_CLIENT_INFO };
  if (typeof client !== 'object' || client === null) throw shapeError('client', 'an object', client);
  const info = client.info ?? DEFAULT_CLIENT_INFO;
  if (typeof info !== 'object' || info === null || typeof info.name !== 'string' || info.name === '' || typeof info.version !== 'string') {
    throw shapeError('client.info', 'an object with a non-empty `name` and a `version` string', info);
  }
  for (const name of ['elicitation', 'sampling'] as const) {
    if (client[name] !== undefined && typeof client[name] !== 'function') throw shapeError(`client.${name}`, 'a function', client[name]);
  }
  const roots = client.roots;
  if (roots !== undefined && typeof roots !== 'function') {
    if (!Array.isArray(roots)) throw shapeError('client.roots', 'an array of roots or a function returning them', roots);
    roots.forEach((root: unknown, index) => {
      const uri = (root as { uri?: unknown } | null)?.uri;
      if (typeof uri !== 'string' || !uri.startsWith('file://')) throw shapeError(`client.roots[${index}].uri`, 'a file:// URI', uri);
    });
  }
  const logLevel = oneOf('client.logLevel', client.logLevel, LOG_LEVELS);
  return {
    info: Object.freeze({ ...info }),
    ...(client.elicitation ? { elicitation: client.elicitation } : {}),
    ...(client.sampling ? { sampling: client.sampling } : {}),
    ...(roots === undefined ? {} : { roots: typeof roots === 'function' ? roots : Object.freeze(roots.map((root) => Object.freeze({ ...root }))) }),
    ...(logLevel ? { logLevel } : {}),
  };
}
