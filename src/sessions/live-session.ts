/**
 * One live MCP session on the main thread: an SDK `Client` over a process-group stdio transport,
 * Streamable HTTP (optionally resuming the session discovery created) or legacy SSE.
 *
 * Death is observed, never polled: a stdio session dies when its leader's `exit` fires; an HTTP
 * session is declared dead by the supervisor when the server forgets it (404) or stops answering.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { HttpServerConfig, ServerConfig } from '../config/types.js';
import type { ResumableSession } from '../discovery/types.js';
import { CLIENT_INFO } from '../discovery/server-discovery.js';
import { type ExitInfo, ProcessGroupStdioTransport } from '../process/stdio-transport.js';

/**
 * Whether a call's request reached an HTTP server. A Streamable HTTP request is *delivered* once
 * its POST was accepted (the server answered with a stream or a body): if the session is lost
 * after that, the tool may have run; if the POST itself failed (404 for a forgotten session, or
 * aborted because the session was already known lost), it did not.
 */
export interface Delivery {
  delivered: boolean;
}

const deliveryContext = new AsyncLocalStorage<Delivery>();

/** Runs `call` with a fresh {@link Delivery} record that the transport fills in. */
export function trackDelivery<T>(call: () => Promise<T>): { promise: Promise<T>; delivery: Delivery } {
  const delivery: Delivery = { delivered: false };
  return { promise: deliveryContext.run(delivery, call), delivery };
}

/** Marks requests sent through `transport` as delivered once their POST was accepted. */
function recordDeliveries(transport: StreamableHTTPClientTransport): void {
  const send = transport.send.bind(transport);
  transport.send = async (message, options) => {
    // Read the store before the first await: the SDK calls send() synchronously from request().
    const delivery = deliveryContext.getStore();
    await send(message, options);
    if (delivery && 'method' in message && 'id' in message) delivery.delivered = true;
  };
}

/** SDK errors that mean the server no longer has this Streamable HTTP session, or is gone. */
function meansSessionLost(error: Error): boolean {
  return (error instanceof StreamableHTTPError && error.code === 404) || /Maximum reconnection attempts/i.test(error.message);
}

/** A failed open, with what the stdio process said on its way out (for honest classification). */
export class SessionOpenError extends Error {
  override readonly name = 'SessionOpenError';
  constructor(
    override readonly cause: unknown,
    readonly exit: ExitInfo | undefined,
    readonly stderrTail: string,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

/** How to open a session. */
export interface OpenOptions {
  /** Monotonic id the supervisor assigns. */
  id: number;
  /** Bounds `initialize` (ms). */
  connectTimeoutMs: number;
  signal?: AbortSignal;
  /** An HTTP session created by discovery, to resume instead of initialising again. */
  resume?: ResumableSession;
  /** OAuth for HTTP servers. */
  authProvider?: OAuthClientProvider;
  /** The leader's pid, synchronously after spawn. */
  onSpawn?(pid: number): void;
  /** The session died (stdio leader exited, or the HTTP server lost it). Not called for a deliberate close. */
  onDeath(session: LiveSession, exit: ExitInfo | undefined): void;
  /** The server sent `notifications/tools/list_changed`. */
  onToolsChanged(session: LiveSession): void;
}

function httpTransport(server: HttpServerConfig, options: OpenOptions): Transport {
  const requestInit: RequestInit = { headers: { ...server.headers } };
  const url = new URL(server.url);
  const auth = options.authProvider ? { authProvider: options.authProvider } : {};
  if (server.transport === 'sse') return new SSEClientTransport(url, { requestInit, ...auth });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit,
    ...auth,
    ...(options.resume ? { sessionId: options.resume.sessionId } : {}),
  });
  if (options.resume) transport.setProtocolVersion(options.resume.protocolVersion);
  return transport;
}

/** Bound of the DELETE that ends an unused discovery session. */
const DISCARD_TIMEOUT_MS = 2000;

/** Attempts to open the standalone stream of a resumed session before giving up. */
const STANDALONE_STREAM_ATTEMPTS = 6;

/**
 * Opens the standalone GET SSE stream of a resumed Streamable HTTP session, where the server sends
 * notifications that belong to no request (`tools/list_changed`). The SDK opens it only after its
 * own `initialize`, which a resumed session skips. The discovery worker's stream for the same
 * session may not be gone from the server yet (it allows one per session: 409), so a conflict is
 * retried a few times with a short doubling delay. Best effort: without the stream, calls still
 * work, only notifications are missed.
 */
async function openStandaloneStream(transport: StreamableHTTPClientTransport, alive: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < STANDALONE_STREAM_ATTEMPTS && alive(); attempt++) {
    try {
      // An empty resumption token sends no Last-Event-ID: a fresh stream, as after `initialize`.
      await transport.resumeStream('');
      return;
    } catch (error) {
      if (!(error instanceof StreamableHTTPError) || error.code !== 409) return;
      await new Promise((resolve) => setTimeout(resolve, 25 * 2 ** attempt).unref());
    }
  }
}

/** A connected session. */
export class LiveSession {
  /** False once the session died or was closed. */
  alive = true;
  /** How the stdio leader exited, once it has. */
  exit: ExitInfo | undefined;
  private deliberatelyClosed = false;

  private constructor(
    readonly id: number,
    readonly server: ServerConfig,
    readonly client: Client,
    readonly transport: Transport,
    /** True when this session resumed discovery's HTTP session (no `initialize` was sent). */
    readonly resumed: boolean,
  ) {}

  /** The stdio leader's pid. */
  get pid(): number | undefined {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.pid : undefined;
  }

  /** The stdio server's recent stderr. */
  stderrTail(): string {
    return this.transport instanceof ProcessGroupStdioTransport ? this.transport.stderrTail().trim() : '';
  }

  /**
   * Connects (spawning the process for stdio). Rejects with a {@link SessionOpenError} wrapping
   * the transport's error. A half-opened transport is torn down before rejecting.
   */
  static async open(server: ServerConfig, options: OpenOptions): Promise<LiveSession> {
    let session: LiveSession | undefined;
    const transport: Transport =
      server.transport === 'stdio'
        ? new ProcessGroupStdioTransport(
            { command: server.command, args: server.args, env: server.env, ...(server.cwd === undefined ? {} : { cwd: server.cwd }) },
            {
              ...(options.onSpawn ? { onSpawn: options.onSpawn } : {}),
              onLeaderExit: (_pid, exit) => {
                if (session) session.markDead(exit, options);
              },
            },
          )
        : httpTransport(server, options);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    // Transport noise (EPIPE after a death, SSE stream reconnects) is reported here; outcomes are
    // decided by request results and exit status. One exception: an HTTP stream that cannot be
    // re-opened because the server forgot the session (404) or is gone. The SDK leaves requests
    // waiting on such a stream until their timeout; the session is declared lost instead, so they
    // fail at once, and the supervisor tells delivered requests from undelivered ones.
    client.onerror = (error) => {
      if (session && transport instanceof StreamableHTTPClientTransport && meansSessionLost(error)) session.lose(options);
    };
    if (transport instanceof StreamableHTTPClientTransport) recordDeliveries(transport);
    session = new LiveSession(options.id, server, client, transport, options.resume !== undefined);
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      if (session?.alive) options.onToolsChanged(session);
    });
    try {
      await client.connect(transport, {
        timeout: options.connectTimeoutMs,
        maxTotalTimeout: options.connectTimeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
      });
    } catch (error) {
      session.alive = false;
      session.deliberatelyClosed = true;
      if (transport instanceof ProcessGroupStdioTransport) {
        // A death racing the error must read as an exit: give the exit event a moment to land.
        if (!transport.exit && transport.pid !== undefined) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([transport.exited(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 150)))]);
          clearTimeout(timer);
        }
        const exit = transport.exit;
        await transport.kill();
        throw new SessionOpenError(error, exit, transport.stderrTail().trim());
      }
      await transport.close().catch(() => undefined);
      throw new SessionOpenError(error, undefined, '');
    }
    if (transport instanceof ProcessGroupStdioTransport && transport.exit) session.markDead(transport.exit, options);
    if (options.resume && transport instanceof StreamableHTTPClientTransport) {
      // Awaited (bounded), so a notification caused by the first call cannot beat the stream to
      // the server: it registers the stream before it answers the GET.
      const opened = session;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        openStandaloneStream(transport, () => opened.alive),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, options.connectTimeoutMs).unref())),
      ]);
      clearTimeout(timer);
      // The server had already forgotten discovery's session (404 on the stream): initialise anew.
      if (!opened.alive) return LiveSession.open(server, { ...options, resume: undefined });
    }
    return session;
  }

  private markDead(exit: ExitInfo | undefined, options: OpenOptions): void {
    if (!this.alive && this.exit) return;
    this.exit = exit;
    const wasAlive = this.alive;
    this.alive = false;
    if (wasAlive && !this.deliberatelyClosed) options.onDeath(this, exit);
  }

  /**
   * Terminates (HTTP DELETE) a Streamable HTTP session that will never be resumed, bounded by
   * {@link DISCARD_TIMEOUT_MS}. Never throws: a server that is gone or refuses is fine.
   */
  static async discard(server: ServerConfig, resume: ResumableSession, authProvider?: OAuthClientProvider): Promise<void> {
    if (server.transport !== 'http') return;
    const transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: { ...server.headers } },
      sessionId: resume.sessionId,
      ...(authProvider ? { authProvider } : {}),
    });
    transport.setProtocolVersion(resume.protocolVersion);
    let timer: NodeJS.Timeout | undefined;
    try {
      // start() only creates the abort controller the DELETE listens to, so close() can cut it short.
      await transport.start();
      await Promise.race([
        transport.terminateSession().catch(() => undefined),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, DISCARD_TIMEOUT_MS).unref())),
      ]);
    } finally {
      clearTimeout(timer);
      await transport.close().catch(() => undefined);
    }
  }

  /** Marks an HTTP session dead (the server forgot it or is gone). */
  abandon(): void {
    this.alive = false;
  }

  /** The HTTP server lost this session: report the death once and fail what still waits on it. */
  private lose(options: OpenOptions): void {
    if (!this.alive || this.deliberatelyClosed) return;
    this.alive = false;
    options.onDeath(this, undefined);
    void this.transport.close().catch(() => undefined);
  }

  /** Closes the session: the stdio kill ladder (stdin → SIGTERM → SIGKILL to the group), or the HTTP transport. */
  async close(): Promise<void> {
    this.deliberatelyClosed = true;
    this.alive = false;
    if (this.transport instanceof ProcessGroupStdioTransport) {
      await this.transport.close({ stdinGraceMs: 1000, termGraceMs: 1000 });
      return;
    }
    if (this.transport instanceof StreamableHTTPClientTransport && this.transport.sessionId) {
      // Tell the server it can drop the session; a server that is gone is fine too.
      await this.transport.terminateSession().catch(() => undefined);
    }
    await this.client.close().catch(() => undefined);
  }

  /** Ends the session at once (stdio: SIGKILL to the group). */
  async kill(): Promise<void> {
    this.deliberatelyClosed = true;
    this.alive = false;
    if (this.transport instanceof ProcessGroupStdioTransport) await this.transport.kill();
    else await this.transport.close().catch(() => undefined);
  }
}
