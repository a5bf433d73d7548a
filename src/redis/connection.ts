/**
 * The coordinator's connections to Redis: one for commands and scripts, one subscribed to the
 * epoch channel.
 *
 * They are always the coordinator's own (built from `url`, or from the options of a client the
 * host passed, which is left untouched), because the coordinator needs settings a shared client
 * may not have: its scripts registered, an offline queue that is *off* (a command issued while
 * disconnected fails at once instead of waiting for a reconnect — that is what lets a tool call
 * never wait on a dead Redis), endless reconnection with capped backoff, and every command under
 * a deadline. node-redis emits `error` on every failed reconnect; it is always handled here, so a
 * Redis outage can never crash the host through an unhandled `error` event.
 */
import {
  ClientOfflineError,
  ConnectionTimeoutError,
  createClient,
  DisconnectsClientError,
  ErrorReply,
  ReconnectStrategyError,
  SocketClosedUnexpectedlyError,
  SocketTimeoutError,
  TimeoutError,
  type RedisClientOptions,
} from 'redis';
import { McpSupervisorError } from '../errors.js';
import { FLEET_SCRIPTS } from './scripts.js';

/** A node-redis client with the fleet's scripts. */
export type FleetClient = ReturnType<typeof createFleetClient>;

/** Where to connect: a URL, or the options of an existing node-redis client. */
export type RedisTarget = { url: string } | { clientOptions: object };

function createFleetClient(target: RedisTarget, connectTimeoutMs: number, name: string) {
  const base = ('url' in target ? { url: target.url } : { ...target.clientOptions }) as RedisClientOptions;
  const options: RedisClientOptions<{}, {}, typeof FLEET_SCRIPTS> = {
    ...(base as RedisClientOptions<{}, {}, typeof FLEET_SCRIPTS>),
    name,
    scripts: FLEET_SCRIPTS,
    disableOfflineQueue: true,
    // node-redis v6 bounds every command by 5 s with an AbortSignal.timeout (a timer and a
    // DOMException each, a third of a bind write's CPU). `RedisLink.run` bounds every command
    // of the coordinator, over its whole life, so that one is switched off.
    commandOptions: { ...(base.commandOptions ?? {}), timeout: 0 },
    socket: {
      ...(base.socket ?? {}),
      connectTimeout: connectTimeoutMs,
      // Capped exponential backoff with jitter, forever: an outage ends by itself and the
      // replicas must not reconnect in lockstep.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000) + Math.floor(Math.random() * 50),
    },
  };
  return createClient(options);
}

const CONNECTIVITY_ERRORS = [
  ClientOfflineError,
  SocketClosedUnexpectedlyError,
  ConnectionTimeoutError,
  SocketTimeoutError,
  TimeoutError,
  DisconnectsClientError,
  ReconnectStrategyError,
];
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/**
 * Whether `error` means "Redis could not be reached or did not answer in time" (the write may be
 * held and retried) rather than a refusal that retrying cannot fix (a bug, a wrong type, a closed
 * coordinator). Server replies that say "not now" (loading its data, busy with a script, a
 * read-only replica, a failover) count as unreachable.
 */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof ErrorReply) return /^(LOADING|BUSY|READONLY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|NOREPLICAS)\b/.test(error.message);
  if (CONNECTIVITY_ERRORS.some((type) => error instanceof type)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}

/** A short, secret-free description of where the coordinator connects (never the URL's userinfo). */
export function describeTarget(target: RedisTarget): string {
  if ('url' in target) {
    try {
      const url = new URL(target.url);
      return `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    } catch {
      return 'redis (unparsable URL)';
    }
  }
  const socket = (target.clientOptions as { socket?: { host?: unknown; port?: unknown; path?: unknown } }).socket;
  if (typeof socket?.path === 'string') return `redis+unix://${socket.path}`;
  return `redis://${String(socket?.host ?? 'localhost')}:${String(socket?.port ?? 6379)}`;
}

/** Both connections, their state, and command deadlines. */
export class RedisLink {
  /** The command connection. */
  readonly client: FleetClient;
  /** The pub/sub connection. */
  readonly subscriber: FleetClient;
  /** Where it connects (secret-free). */
  readonly where: string;
  readonly #commandTimeoutMs: number;
  readonly #onChange: (up: boolean, error: unknown) => void;
  #up = false;
  #closed = false;

  private constructor(target: RedisTarget, replicaId: string, connectTimeoutMs: number, commandTimeoutMs: number, onChange: (up: boolean, error: unknown) => void) {
    this.where = describeTarget(target);
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#onChange = onChange;
    // CLIENT SETNAME refuses spaces; the name only helps an operator's CLIENT LIST.
    const name = `mcp-supervisor-${replicaId}`.replace(/[^\x21-\x7e]/g, '_').slice(0, 100);
    this.client = createFleetClient(target, connectTimeoutMs, name);
    this.subscriber = createFleetClient(target, connectTimeoutMs, `${name}-sub`);
    this.client.on('ready', () => this.#set(true, undefined));
    this.client.on('end', () => this.#set(false, new Error('connection closed')));
    this.client.on('error', (error: unknown) => this.#set(false, error));
    // The subscriber reconnects and resubscribes by itself; its errors only need handling.
    this.subscriber.on('error', () => {});
  }

  /**
   * Connects both connections, or rejects after `connectTimeoutMs` (everything opened is closed
   * again: a failed start leaves no socket and no reconnect timer behind).
   */
  static async open(
    target: RedisTarget,
    options: { replicaId: string; connectTimeoutMs: number; commandTimeoutMs: number; onChange: (up: boolean, error: unknown) => void },
  ): Promise<RedisLink> {
    const link = new RedisLink(target, options.replicaId, options.connectTimeoutMs, options.commandTimeoutMs, options.onChange);
    let timer: NodeJS.Timeout | undefined;
    let lastError: unknown;
    link.client.on('error', (error: unknown) => {
      lastError = error;
    });
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), options.connectTimeoutMs);
    });
    const connecting = Promise.all([link.client.connect(), link.subscriber.connect()]);
    // After a timeout the pending connects reject when destroyed: that is expected, not unhandled.
    connecting.catch(() => {});
    try {
      await Promise.race([connecting, deadline]);
      return link;
    } catch (error) {
      link.destroy();
      const why = lastError instanceof Error ? lastError.message : error instanceof Error ? error.message : String(error);
      throw new McpSupervisorError('SERVER_UNREACHABLE', `Could not connect to Redis at ${link.where} within ${options.connectTimeoutMs} ms (${why})`, {
        data: { component: 'redis' },
        cause: lastError ?? error,
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the command connection is ready (commands are sent, not refused at once). */
  get up(): boolean {
    return !this.#closed && this.client.isReady;
  }

  /** Whether {@link close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Runs `command` on the command connection under a deadline of `ms` (default: the command
   * timeout), rejecting with node-redis's `TimeoutError` when it passes. node-redis's own
   * per-command `timeout` only covers the time until a command is *written*: a stalled server
   * (paused, overloaded, a half-open connection) would leave the reply pending forever. The
   * command itself is not cancelled; its late outcome is ignored.
   */
  run<T>(command: (client: FleetClient) => Promise<T>, ms: number = this.#commandTimeoutMs): Promise<T> {
    let pending: Promise<T>;
    try {
      pending = command(this.client);
    } catch (error) {
      return Promise.reject(error);
    }
    return withDeadline(pending, ms);
  }

  /** The configured command timeout. */
  get commandTimeoutMs(): number {
    return this.#commandTimeoutMs;
  }

  #set(up: boolean, error: unknown): void {
    if (this.#closed || up === this.#up) return;
    this.#up = up;
    this.#onChange(up, error);
  }

  /** Closes both connections gracefully within `timeoutMs`, then forcibly. Never rejects. */
  async close(timeoutMs: number): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const graceful = Promise.allSettled([closeOne(this.client), closeOne(this.subscriber)]);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), timeoutMs);
    });
    const outcome = await Promise.race([graceful.then(() => 'closed' as const), expired]);
    clearTimeout(timer);
    if (outcome === 'expired') this.destroy();
  }

  /** Drops both connections at once (pending commands reject). */
  destroy(): void {
    this.#closed = true;
    for (const client of [this.client, this.subscriber]) {
      try {
        client.destroy();
      } catch {
        // already closed
      }
    }
  }
}

/** `pending`, or node-redis's `TimeoutError` once `ms` passed (the late outcome is ignored). */
export function withDeadline<T>(pending: Promise<T>, ms: number): Promise<T> {
  const budget = Math.max(1, Math.ceil(ms));
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`Redis did not answer within ${budget} ms`)), budget);
    timer.unref();
    pending.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

async function closeOne(client: FleetClient): Promise<void> {
  // `close()` waits for replies in flight; on a connection that is down it has nothing to wait for.
  if (client.isOpen) await client.close();
}
