/**
 * Options of `redisCoordinator`, their defaults and their validation (at construction time, with
 * the library's "expected …, got …" messages).
 */
import { McpSupervisorError } from '../errors.js';
import type { Clock } from '../clock.js';
import { nonEmptyString, nonNegativeMs, positiveNumber } from '../gateway/validate.js';
import type { RedisTarget } from './connection.js';

/** Options of `redisCoordinator`. Exactly one of `url` and `client` is required. */
export interface RedisCoordinatorOptions {
  /** `redis[s]://[[username][:password]@]host[:port][/db]`. */
  url?: string;
  /**
   * A node-redis client whose options (address, TLS, credentials, database) the coordinator's own
   * connections reuse. The client itself is neither used nor closed.
   */
  client?: { readonly options?: object | undefined };
  /** Names the fleet: every replica of one gateway uses the same prefix (keys live under `{prefix}`). */
  prefix: string;
  /** This replica's id, unique in the fleet (shown in lease values, logs and the recovery log). */
  replicaId: string;
  /** How long `redisCoordinator` waits for the first connection before it rejects (default 5 000). */
  connectTimeoutMs?: number;
  /** Deadline of every Redis command other than a tool call's bind write (default 1 000). */
  commandTimeoutMs?: number;
  /**
   * How long a tool call may wait for its bind write before the write is buffered instead
   * (default 250). While Redis is known to be down, writes are buffered without waiting at all.
   */
  writeTimeoutMs?: number;
  /**
   * Bind writes kept while Redis is unreachable (default 10 000). Beyond it the oldest agent's
   * buffered writes are dropped and reported (`writes:dropped`, `stats().writes.dropped`).
   */
  maxBufferedWrites?: number;
  /** How often buffered writes are retried while Redis is unreachable (default 500). */
  flushIntervalMs?: number;
  /** How often the replica re-reads the fleet's epoch, besides pub/sub announcements (default 1 000). */
  epochRefreshMs?: number;
  /** Entries kept in the fleet's recovery log (default 100). */
  recoveryLogSize?: number;
  /**
   * Monotonic time and timers of the coordinator (lease timing, retries). Default:
   * `performance.now()` and unref'd Node timers. Tests inject a manual one.
   */
  clock?: Clock;
  /** Receives failures the coordinator deliberately swallows (a failed poll, a listener that threw). */
  onError?: (error: unknown, context: string) => void;
}

/** Validated options with defaults applied. */
export interface ResolvedOptions {
  readonly target: RedisTarget;
  readonly prefix: string;
  readonly replicaId: string;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  readonly writeTimeoutMs: number;
  readonly maxBufferedWrites: number;
  readonly flushIntervalMs: number;
  readonly epochRefreshMs: number;
  readonly recoveryLogSize: number;
  readonly clock: Clock;
  readonly onError: (error: unknown, context: string) => void;
}

/** The default clock: monotonic (a wall-clock step must never stretch or cut a lease) with unref'd timers. */
export const monotonicClock: Clock = Object.freeze({
  now: () => performance.now(),
  setTimeout(callback: () => void, ms: number) {
    const timer = setTimeout(callback, Math.max(0, ms));
    timer.unref();
    return timer;
  },
  clearTimeout(handle: unknown) {
    if (handle !== undefined) clearTimeout(handle as NodeJS.Timeout);
  },
});

const PREFIX_PATTERN = /^[\x21-\x7a\x7c\x7e]{1,100}$/; // visible ASCII without '{' and '}' (the hash tag)

function positiveInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be a positive integer, got \`${String(value)}\` (${typeof value})`);
  }
  return value;
}

/** Validates `options` and applies the defaults. */
export function resolveOptions(options: RedisCoordinatorOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected redisCoordinator options to be an object, got \`${String(options)}\` (${typeof options})`);
  }
  const hasUrl = options.url !== undefined;
  const hasClient = options.client !== undefined;
  if (hasUrl === hasClient) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected exactly one of \`url\` and \`client\`, got ${hasUrl ? 'both' : 'neither'}`);
  }
  let target: RedisTarget;
  if (hasUrl) {
    const url = nonEmptyString('url', options.url);
    if (!/^rediss?:\/\//i.test(url)) throw new McpSupervisorError('INVALID_CONFIG', 'Expected `url` to start with redis:// or rediss://');
    target = { url };
  } else {
    const clientOptions = options.client?.options;
    if (typeof clientOptions !== 'object' || clientOptions === null) {
      throw new McpSupervisorError('INVALID_CONFIG', 'Expected `client` to be a node-redis client (with `options`)');
    }
    target = { clientOptions };
  }
  const prefix = nonEmptyString('prefix', options.prefix);
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`prefix\` to be 1–100 visible ASCII characters without '{' or '}', got \`${prefix}\``);
  }
  const replicaId = nonEmptyString('replicaId', options.replicaId);
  if (replicaId.length > 200) throw new McpSupervisorError('INVALID_CONFIG', 'Expected `replicaId` to have at most 200 characters');
  const writeTimeoutMs = positiveNumber('writeTimeoutMs', options.writeTimeoutMs ?? 250);
  const commandTimeoutMs = positiveNumber('commandTimeoutMs', options.commandTimeoutMs ?? 1_000);
  return Object.freeze({
    target,
    prefix,
    replicaId,
    connectTimeoutMs: positiveNumber('connectTimeoutMs', options.connectTimeoutMs ?? 5_000),
    commandTimeoutMs,
    writeTimeoutMs,
    maxBufferedWrites: positiveInteger('maxBufferedWrites', options.maxBufferedWrites ?? 10_000),
    flushIntervalMs: nonNegativeMs('flushIntervalMs', options.flushIntervalMs ?? 500, 1),
    epochRefreshMs: nonNegativeMs('epochRefreshMs', options.epochRefreshMs ?? 1_000, 1),
    recoveryLogSize: positiveInteger('recoveryLogSize', options.recoveryLogSize ?? 100),
    clock: options.clock ?? monotonicClock,
    onError: options.onError ?? (() => {}),
  });
}
