/**
 * The one place that builds a connection to a server: the transport (a process-group stdio child,
 * Streamable HTTP with delivery facts, or legacy SSE), the SDK `Client` with the client side's
 * info, capabilities, handlers and auth, the bounded `initialize`, and the teardown of a half-open
 * attempt. Discovery bodies and live sessions both connect through {@link openConnection}, so they
 * see servers, and report failures, the same way.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema, isJSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import type { ResumableSession } from '../discovery/types.js';
import { type ExitInfo, ProcessGroupStdioTransport } from '../process/stdio-transport.js';
import { connectPhaseCode } from './classify.js';
import type { ClientSide } from './client-side.js';
import { currentDelivery } from './delivery.js';
import { TrackedHttpTransport } from './http-transport.js';

/** How long a failed stdio connect waits for the child's exit, so a death racing the error reads as an exit. */
const EXIT_SETTLE_MS = 150;

/** Hooks and bounds of one connection attempt. */
export interface ConnectOptions {
  /** Bounds `initialize` (ms). */
  connectTimeoutMs: number;
  /** Aborts the attempt (retirement, close). */
  signal?: AbortSignal;
  /** An HTTP session to resume instead of initialising a new one. */
  resume?: ResumableSession;
  /** Stdio: the leader's pid, synchronously after spawn. */
  onSpawn?(pid: number): void;
  /** Stdio: the moment the leader exits. */
  onLeaderExit?(pid: number, exit: ExitInfo): void;
  /** Stdio: the leader and its whole group are gone. */
  onExit?(pid: number, exit: ExitInfo): void;
  /** Registers notification handlers on the client before it connects. */
  configure?(client: Client): void;
  /** Streamable HTTP: the server answered a request with 404/400 for the session: it is gone. */
  onSessionLost?(): void;
  /** The largest message accepted from the server (bytes). Default 10 MB. */
  maxMessageBytes?: number;
  /** Stdio: window in which repeated `list_changed` notifications are dropped (see the transport). */
  coalesceListChangedMs?: number;
  /** Stdio: the host's lifeline marker, added to the server's environment (kept out of fingerprints). */
  markerEnv?: Readonly<Record<string, string>>;
}

/** A failed connect, with what a stdio process said on its way out (for honest classification). */
export class ConnectError extends Error {
  override readonly name = 'ConnectError';
  constructor(
    override readonly cause: unknown,
    readonly exit: ExitInfo | undefined,
    readonly stderrTail: string,
    /** The limit a stdio server's message exceeded (it was killed for it). */
    readonly tooLarge?: number,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/** Marks legacy-SSE requests of a tracked call: the POST either left (202) or could not connect. */
function trackSseSends(transport: SSEClientTransport): void {
  const send = transport.send.bind(transport);
  transport.send = async (message: JSONRPCMessage) => {
    const delivery = isJSONRPCRequest(message) ? currentDelivery() : undefined;
    if (delivery) delivery.state = 'sending';
    try {
      await send(message);
      if (delivery) delivery.state = 'accepted';
    } catch (error) {
      if (delivery) delivery.state = connectPhaseCode(error) === undefined ? 'unknown' : 'refused';
      throw error;
    }
  };
}

function createTransport(server: ServerConfig, side: ClientSide, options: ConnectOptions): Transport {
  if (server.transport === 'stdio') {
    return new ProcessGroupStdioTransport(
      {
        command: server.command,
        args: server.args,
        env: server.env,
        ...(server.cwd === undefined ? {} : { cwd: server.cwd }),
        ...(options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes }),
        ...(options.coalesceListChangedMs === undefined ? {} : { coalesceListChangedMs: options.coalesceListChangedMs }),
        ...(options.markerEnv === undefined ? {} : { markerEnv: options.markerEnv }),
      },
      {
        ...(options.onSpawn ? { onSpawn: options.onSpawn } : {}),
        ...(options.onLeaderExit ? { onLeaderExit: options.onLeaderExit } : {}),
        ...(options.onExit ? { onExit: options.onExit } : {}),
      },
    );
  }
  const url = new URL(server.url);
  if (server.transport === 'sse') {
    const transport = new SSEClientTransport(url, {
      requestInit: { headers: { ...server.headers } },
      ...(side.authProvider ? { authProvider: side.authProvider } : {}),
    });
    trackSseSends(transport);
    return transport;
  }
  return new TrackedHttpTransport({
    url,
    headers: server.headers,
    ...(side.authProvider ? { authProvider: side.authProvider } : {}),
    ...(options.resume ? { sessionId: options.resume.sessionId, protocolVersion: options.resume.protocolVersion } : {}),
    ...(side.challenged ? { onChallenge: (challenge) => side.challenged?.(challenge) } : {}),
    ...(options.onSessionLost ? { onSessionLost: options.onSessionLost } : {}),
    ...(options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes }),
  });
}

/** A connected SDK client and its transport. */
export class Connection {
  constructor(
    readonly server: ServerConfig,
    readonly client: Client,
    readonly transport: Transport,
    /** Resolves once the server's first `roots/list` has been answered (never, if it does not ask). */
    readonly rootsAnswered: Promise<void> = new Promise(() => undefined),
  ) {}

  /** The stdio leader's pid. */
  get pid(): number | undefined {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.pid : undefined;
  }

  /** How the stdio leader exited, once it has. */
  get exit(): ExitInfo | undefined {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.exit : undefined;
  }

  /** The limit a stdio server's message exceeded (it was killed for it), if one did. */
  get tooLarge(): number | undefined {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.tooLarge : undefined;
  }

  /** The stdio server's recent stderr, trimmed. */
  stderrTail(): string {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.stderrTail().trim() : '';
  }

  /** The Streamable HTTP session (undefined for stdio, SSE and stateless servers). */
  get sessionId(): string | undefined {
    return this.transport instanceof TrackedHttpTransport ? this.transport.sessionId : undefined;
  }

  /** The protocol version negotiated over Streamable HTTP. */
  get protocolVersion(): string | undefined {
    return this.transport instanceof TrackedHttpTransport ? this.transport.protocolVersion : undefined;
  }

  /** Resolves once a stdio leader's whole group is gone (at once for HTTP). */
  async exited(): Promise<void> {
    if (this.transport instanceof ProcessGroupStdioTransport && this.transport.pid !== undefined) await this.transport.exited();
  }

  /**
   * Lets go gracefully: the stdio close ladder (stdin → SIGTERM → SIGKILL to the group), or the
   * HTTP transport closed without ending the session (the main thread may resume it).
   */
  async release(ladder: { stdinGraceMs: number; termGraceMs: number }): Promise<void> {
    if (this.transport instanceof ProcessGroupStdioTransport) await this.transport.close(ladder);
    else await this.transport.close().catch(() => undefined);
  }

  /** Ends it now: SIGKILL to a stdio group, or the HTTP transport closed. */
  kill(): Promise<void> {
    return killTransport(this.transport);
  }
}

/**
 * Connects to `server` as `side` (spawning the process for stdio) and runs `initialize`, or
 * resumes `options.resume`. Rejects with a {@link ConnectError}; a half-opened transport is torn
 * down (its process group killed) before rejecting.
 */
export async function openConnection(server: ServerConfig, side: ClientSide, options: ConnectOptions): Promise<Connection> {
  const transport = createTransport(server, side, options);
  const client = new Client(side.info, { capabilities: side.capabilities });
  // Transport noise (EPIPE after a death, reconnects of the optional stream) arrives here;
  // outcomes are decided by request results, delivery records and exit status instead.
  client.onerror = () => undefined;
  if (side.elicit) {
    const elicit = side.elicit.bind(side);
    client.setRequestHandler(ElicitRequestSchema, (request, extra) => elicit(request.params, extra.signal));
  }
  if (side.sample) {
    const sample = side.sample.bind(side);
    client.setRequestHandler(CreateMessageRequestSchema, (request, extra) => sample(request.params, extra.signal));
  }
  let rootsServed!: () => void;
  const rootsAnswered = new Promise<void>((resolve) => (rootsServed = resolve));
  if (side.listRoots) {
    const listRoots = side.listRoots.bind(side);
    client.setRequestHandler(ListRootsRequestSchema, async (_request, extra) => {
      try {
        return { roots: await listRoots(extra.signal) };
      } finally {
        rootsServed();
      }
    });
  }
  if (side.log) {
    const log = side.log.bind(side);
    client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => log(notification.params));
  }
  options.configure?.(client);
  // An abort cuts every stage short, not only the `initialize` request: spawning, writing
  // `notifications/initialized`, opening an HTTP stream take no signal of their own.
  const onAbort = (): void => void killTransport(transport);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (options.signal?.aborted) throw options.signal.reason ?? new Error('aborted');
    await client.connect(transport, {
      timeout: options.connectTimeoutMs,
      maxTotalTimeout: options.connectTimeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (error) {
    if (transport instanceof ProcessGroupStdioTransport) {
      if (!options.signal?.aborted && !transport.exit && transport.pid !== undefined) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([transport.exited(), new Promise<void>((resolve) => (timer = setTimeout(resolve, EXIT_SETTLE_MS)))]);
        clearTimeout(timer);
      }
      const exit = transport.exit;
      await transport.kill();
      throw new ConnectError(error, exit, transport.stderrTail().trim(), transport.tooLarge);
    }
    await transport.close().catch(() => undefined);
    throw new ConnectError(error, undefined, '');
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  // A resumed HTTP session skipped `initialize`: the level set then still holds.
  if (side.logLevel && !options.resume && client.getServerCapabilities()?.logging) {
    await client.setLoggingLevel(side.logLevel, { timeout: options.connectTimeoutMs }).catch(() => undefined);
  }
  return new Connection(server, client, transport, rootsAnswered);
}

/** SIGKILL to a stdio group, or the HTTP transport closed; never throws. */
async function killTransport(transport: Transport): Promise<void> {
  if (transport instanceof ProcessGroupStdioTransport) await transport.kill();
  else await transport.close().catch(() => undefined);
}
