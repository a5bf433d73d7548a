/**
 * The one place that builds a connection to a server: the transport (a process-group stdio child,
 * Streamable HTTP with delivery facts, or legacy SSE), the SDK `Client` with the client side's
 * info, capabilities, handlers and auth, the bounded `initialize`, and the teardown of a half-open
 * attempt. Discovery bodies and live sessions both connect through {@link openConnection}, so they
 * see servers, and report failures, the same way.
 */
import { Client, LOG_LEVEL_META_KEY, SSEClientTransport, SdkError, SdkErrorCode, isJSONRPCRequest } from '@modelcontextprotocol/client';
import type { ClientCapabilities, CreateMessageResult, ElicitResult, JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { type ServerConfig, protocolSettingOf } from '../config/types.js';
import type { ResumableSession } from '../discovery/types.js';
import { type ExitInfo, ProcessGroupStdioTransport } from '../process/stdio-transport.js';
import { connectPhaseCode, networkErrorCode } from './classify.js';
import type { ClientSide, ElicitParams, SamplingParams } from './client-side.js';
import { currentDelivery } from './delivery.js';
import { type EraVerdict, type ProtocolEra, isEraMismatch, isMethodNotFound, negotiationFor, priorFor, verdictOf } from './era.js';
import { TrackedHttpTransport } from './http-transport.js';
import { MAX_LIST_PAGES } from './limits.js';

/** How long a failed stdio request waits for the child's exit, so a death racing the error reads as an exit. */
const EXIT_SETTLE_MS = 150;

/**
 * The same wait when the error says the server's end of the pipe closed: the process is on its
 * way out, and on a loaded machine its exit can be seen well after the broken pipe. Waiting for it
 * reports an exit with its code, never a connection that "could not be reached".
 */
const PIPE_CLOSED_SETTLE_MS = 2000;

/** True when a stdio request failed because the server closed its end (a write broke, the stream ended). */
export function pipeClosed(error: unknown): boolean {
  const network = networkErrorCode(error);
  if (network === 'EPIPE' || network === 'ECONNRESET') return true;
  return error instanceof SdkError && (error.code === SdkErrorCode.ConnectionClosed || error.code === SdkErrorCode.SendFailed);
}

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
  /** The server's era as last negotiated (adopted without probing when the setting allows). */
  era?: EraVerdict;
  /** A cached era turned out stale (the server refused it): the attempt probes again. */
  onStaleEra?(): void;
  /**
   * When a cached 2026-07-28 verdict is adopted (a connect that sends nothing), ask the server
   * `server/discover` before the connection counts as open: a session must prove the server is
   * there and still speaks the era. Discovery does not need it (its listing is the proof).
   */
  verifyAdoptedEra?: boolean;
}

/** The SDK client every connection uses (the v2 client, which speaks both protocol eras). */
export type McpClient = Client;

/** Rounds of `input_required` answered for one request before it fails (the SDK's own default). */
const MAX_INPUT_ROUNDS = 10;

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
    readonly client: McpClient,
    readonly transport: Transport,
    /** Resolves once the server's first `roots/list` has been answered (never, if it does not ask). */
    readonly rootsAnswered: Promise<void> = new Promise(() => undefined),
    /**
     * What every request of a caller carries in `params._meta` besides the SDK's own envelope: in
     * the 2026-07-28 era the host's log level (`io.modelcontextprotocol/logLevel`), which that era
     * sends per request instead of `logging/setLevel`.
     */
    readonly requestMeta?: Readonly<Record<string, unknown>>,
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

  /** The protocol version the HTTP transport carries (what a resumed session must be told). */
  get protocolVersion(): string | undefined {
    return this.transport instanceof TrackedHttpTransport ? this.transport.protocolVersion : undefined;
  }

  /** The protocol version the connection speaks: the one negotiated, else the HTTP transport's. */
  get negotiatedVersion(): string | undefined {
    return this.client.getNegotiatedProtocolVersion() ?? this.protocolVersion;
  }

  /** The era this connection speaks. */
  get era(): ProtocolEra {
    return this.client.getProtocolEra() ?? 'legacy';
  }

  /** What to cache so the next connection to this server needs no probe. */
  get verdict(): EraVerdict | undefined {
    return verdictOf(this.client.getProtocolEra(), this.client.getDiscoverResult());
  }

  /**
   * Asks the server whether it is there: `ping` in the 2025-11-25 era, `server/discover` in the
   * 2026-07-28 one (which has no `ping`). Rejects like any request.
   */
  async checkAlive(timeoutMs: number): Promise<void> {
    if (this.era === 'modern') await this.client.discover({ timeout: timeoutMs });
    else await this.client.ping({ timeout: timeoutMs });
  }

  /** After `error` failed a request: waits briefly for a stdio leader's exit (see {@link settleExit}). */
  settleExit(error: unknown): Promise<void> {
    return this.transport instanceof ProcessGroupStdioTransport ? settleExit(this.transport, error) : Promise.resolve();
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
 * Connects to `server` as `side` (spawning the process for stdio) in the server's protocol era:
 * `initialize` (2025-11-25), `server/discover` (2026-07-28), a probe of both (`auto`), or a cached
 * verdict adopted without a round trip; or resumes `options.resume`. Rejects with a
 * {@link ConnectError}; a half-opened transport is torn down (its process group killed) before
 * rejecting.
 */
export async function openConnection(server: ServerConfig, side: ClientSide, options: ConnectOptions): Promise<Connection> {
  const setting = protocolSettingOf(server);
  const prior = options.resume ? undefined : priorFor(setting, options.era);
  try {
    return await connectOnce(server, side, options, prior);
  } catch (error) {
    if (options.signal?.aborted || !(error instanceof ConnectError)) throw error;
    // A cached era the server no longer speaks: forget it and negotiate afresh, once.
    if (prior !== undefined && (isEraMismatch(error.cause) || (prior.kind === 'modern' && isMethodNotFound(error.cause)))) {
      options.onStaleEra?.();
      return connectOnce(server, side, options, undefined);
    }
    // An old stdio server that ended the pipe on the `server/discover` probe (it may exit on any
    // request before `initialize`): the probe on the same pipe cannot fall back, a new process can.
    if (setting === 'auto' && prior === undefined && server.transport === 'stdio' && isEraMismatch(error.cause)) {
      return connectOnce(server, side, options, { kind: 'legacy' });
    }
    throw error;
  }
}

/** One connection attempt: a transport, a client, the era's handshake (or an adopted verdict). */
async function connectOnce(server: ServerConfig, side: ClientSide, options: ConnectOptions, prior: ReturnType<typeof priorFor>): Promise<Connection> {
  const transport = createTransport(server, side, options);
  const client = new Client(side.info, {
    // The host's types are the v1 SDK's (its public contract); on the wire they are the same JSON.
    capabilities: side.capabilities as ClientCapabilities,
    versionNegotiation: negotiationFor(protocolSettingOf(server), options.connectTimeoutMs),
    inputRequired: { autoFulfill: true, maxRounds: MAX_INPUT_ROUNDS },
    // Tool lists are read through the SDK (`lists.ts`): bounded like every other list.
    listMaxPages: MAX_LIST_PAGES,
  });
  // Transport noise (EPIPE after a death, reconnects of the optional stream) arrives here;
  // outcomes are decided by request results, delivery records and exit status instead.
  client.onerror = () => undefined;
  // In the 2026-07-28 era the same handlers answer a result's `input_required` requests, which
  // the SDK client fulfils and retries on a new request id (bounded by MAX_INPUT_ROUNDS).
  if (side.elicit) {
    const elicit = side.elicit.bind(side);
    client.setRequestHandler('elicitation/create', (request, ctx) => elicit(request.params as ElicitParams, ctx.mcpReq.signal) as Promise<ElicitResult>);
  }
  if (side.sample) {
    const sample = side.sample.bind(side);
    client.setRequestHandler('sampling/createMessage', (request, ctx) => sample(request.params as SamplingParams, ctx.mcpReq.signal) as Promise<CreateMessageResult>);
  }
  let rootsServed!: () => void;
  const rootsAnswered = new Promise<void>((resolve) => (rootsServed = resolve));
  if (side.listRoots) {
    const listRoots = side.listRoots.bind(side);
    client.setRequestHandler('roots/list', async (_request, ctx) => {
      try {
        return { roots: await listRoots(ctx.mcpReq.signal) };
      } finally {
        rootsServed();
      }
    });
  }
  if (side.log) {
    const log = side.log.bind(side);
    client.setNotificationHandler('notifications/message', (notification) => log(notification.params));
  }
  options.configure?.(client);
  // An abort cuts every stage short, not only the handshake: spawning, writing
  // `notifications/initialized`, opening an HTTP stream take no signal of their own.
  const onAbort = (): void => void killTransport(transport);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (options.signal?.aborted) throw options.signal.reason ?? new Error('aborted');
    await client.connect(transport, {
      timeout: options.connectTimeoutMs,
      maxTotalTimeout: options.connectTimeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(prior ? { prior } : {}),
    });
    if (prior?.kind === 'modern' && options.verifyAdoptedEra) await client.discover({ timeout: options.connectTimeoutMs, ...(options.signal ? { signal: options.signal } : {}) });
  } catch (error) {
    if (transport instanceof ProcessGroupStdioTransport) {
      if (!options.signal?.aborted) await settleExit(transport, error);
      const exit = transport.exit;
      await transport.kill();
      throw new ConnectError(error, exit, transport.stderrTail().trim(), transport.tooLarge);
    }
    await transport.close().catch(() => undefined);
    throw new ConnectError(error, undefined, '');
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
  }
  // A resumed HTTP session skipped `initialize`: the level set then still holds. The new era has
  // no `logging/setLevel` (a level travels in each request's envelope).
  if (side.logLevel && !options.resume && client.getProtocolEra() !== 'modern' && client.getServerCapabilities()?.logging) {
    await client.setLoggingLevel(side.logLevel, { timeout: options.connectTimeoutMs }).catch(() => undefined);
  }
  const requestMeta = side.logLevel && client.getProtocolEra() === 'modern' ? { [LOG_LEVEL_META_KEY]: side.logLevel } : undefined;
  return new Connection(server, client, transport, rootsAnswered, requestMeta);
}

/**
 * Waits for a stdio leader's exit after `error` failed one of its requests, so a death racing the
 * error reads as an exit (with its code) rather than a protocol error or an unreachable server:
 * briefly, and longer when the error says the pipe broke (the process is on its way out).
 */
async function settleExit(transport: ProcessGroupStdioTransport, error: unknown): Promise<void> {
  if (transport.exit || transport.pid === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  const settleMs = pipeClosed(error) ? PIPE_CLOSED_SETTLE_MS : EXIT_SETTLE_MS;
  await Promise.race([transport.exited(), new Promise<void>((resolve) => (timer = setTimeout(resolve, settleMs)))]);
  clearTimeout(timer);
}

/** SIGKILL to a stdio group, or the HTTP transport closed; never throws. */
async function killTransport(transport: Transport): Promise<void> {
  if (transport instanceof ProcessGroupStdioTransport) await transport.kill();
  else await transport.close().catch(() => undefined);
}
