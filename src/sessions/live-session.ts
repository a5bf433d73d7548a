/**
 * One live MCP session on the main thread: a {@link Connection} (process-group stdio, Streamable
 * HTTP — possibly resuming the session discovery created — or legacy SSE) and its liveness.
 *
 * Death is observed, never polled: a stdio session dies when its leader's `exit` fires. An HTTP
 * session is declared lost by the supervisor, from the facts a request's delivery record holds
 * (the server answered 404/400 for its session id); a broken answer stream fails only the request
 * it carried, never the session.
 *
 * Every wait of a session (the resumed stream, roots settling, a DELETE, a drain) is bounded on the
 * supervisor's injected {@link Clock} through {@link withDeadline}, so tests drive them by hand.
 */
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { ServerConfig } from '../config/types.js';
import type { ResumableSession } from '../discovery/types.js';
import type { ClientSide } from '../connection/client-side.js';
import type { EraCache } from '../connection/era-cache.js';
import { httpStatusOf } from '../connection/classify.js';
import { ConnectError, type Connection, openConnection } from '../connection/connect.js';
import { TrackedHttpTransport } from '../connection/http-transport.js';
import type { ExitInfo } from '../process/stdio-transport.js';
import { type Clock, sleepOn } from '../clock.js';
import { withDeadline } from '../deadline.js';

/** Bound of every DELETE that ends an HTTP session (close, or an unused discovery session). */
export const DELETE_TIMEOUT_MS = 2000;

/** How long a new session waits for a server known to ask for roots to ask and be answered (ms). */
const ROOTS_SETTLE_MS = 1000;

/** Attempts to open the standalone stream of a resumed session before giving up. */
const STANDALONE_STREAM_ATTEMPTS = 6;

/** A failed open, as the supervisor classifies it. */
export { ConnectError as SessionOpenError };

/** How to open a session. */
export interface OpenOptions {
  /** Monotonic id the supervisor assigns. */
  id: number;
  /** The clock of every bounded wait of the session (stream, roots, DELETE, drain). */
  clock: Clock;
  /** Bounds `initialize` (ms). */
  connectTimeoutMs: number;
  signal?: AbortSignal;
  /** The largest message accepted from the server (bytes). */
  maxMessageBytes?: number;
  /** Window in which repeated `list_changed` notifications are coalesced. */
  coalesceListChangedMs?: number;
  /** The host's lifeline marker for the server's environment. */
  markerEnv?: Readonly<Record<string, string>>;
  /** An HTTP session created by discovery, to resume instead of initialising again. */
  resume?: ResumableSession;
  /** The host's era verdicts (adopted instead of probing; a session's own verdict is recorded). */
  eras?: EraCache;
  /** The leader's pid, synchronously after spawn. */
  onSpawn?(pid: number): void;
  /** The stdio leader exited. Not called for a deliberate close. */
  onDeath(session: LiveSession, exit: ExitInfo | undefined): void;
  /** The HTTP server answered a request with 404/400 for this session: it no longer knows it. */
  onLost?(session: LiveSession): void;
  /** The server sent `notifications/{tools,prompts,resources}/list_changed`. */
  onListChanged(session: LiveSession, kind: 'tools' | 'prompts' | 'resources'): void;
}

/** Where a session is in its life. */
type SessionState = { kind: 'alive' } | { kind: 'dead'; exit: ExitInfo | undefined } | { kind: 'closed' };

/** The list kinds a `subscriptions/listen` filter can name, with the filter's key for each. */
const LISTEN_KINDS = [
  ['tools', 'toolsListChanged'],
  ['prompts', 'promptsListChanged'],
  ['resources', 'resourcesListChanged'],
] as const;

/** How long after the server ended a `subscriptions/listen` stream a new one is opened. */
const RELISTEN_DELAY_MS = 1000;

/**
 * Waits for `work` at most `ms` on `clock`; never throws (the work itself is left to finish or
 * fail alone: every wait it bounds is best effort).
 */
async function bounded(clock: Clock, work: Promise<unknown>, ms: number): Promise<void> {
  await withDeadline(work.catch(() => undefined), { ms, clock });
}

/**
 * Opens the standalone GET SSE stream of a resumed Streamable HTTP session, where the server sends
 * notifications that belong to no request (`tools/list_changed`). The SDK opens it only after its
 * own `initialize`, which a resumed session skips. The discovery worker's stream for the same
 * session may not be gone from the server yet (it allows one per session: 409), so a conflict is
 * retried a few times with a short doubling delay. Best effort: without the stream, calls still
 * work, only notifications are missed. A server without the stream (404/405) is fine.
 */
export async function openStandaloneStream(transport: TrackedHttpTransport, clock: Clock, alive: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < STANDALONE_STREAM_ATTEMPTS && alive(); attempt++) {
    try {
      // An empty resumption token sends no Last-Event-ID: a fresh stream, as after `initialize`.
      await transport.resumeStream('');
      return;
    } catch (error) {
      if (httpStatusOf(error) !== 409) return;
      await sleepOn(clock, 25 * 2 ** attempt);
    }
  }
}

/** A connected session. */
export class LiveSession {
  private state: SessionState = { kind: 'alive' };

  private constructor(
    readonly id: number,
    readonly connection: Connection,
    /** True when this session resumed discovery's HTTP session (no `initialize` was sent). */
    readonly resumed: boolean,
    private readonly clock: Clock,
  ) {}

  /** False once the session died or was closed. */
  get alive(): boolean {
    return this.state.kind === 'alive';
  }

  /** How the stdio leader exited, once it has. */
  get exit(): ExitInfo | undefined {
    return this.state.kind === 'dead' ? this.state.exit : undefined;
  }

  /** The SDK client. */
  get client(): Connection['client'] {
    return this.connection.client;
  }

  /** The stdio leader's pid. */
  get pid(): number | undefined {
    return this.connection.pid;
  }

  /** The stdio server's recent stderr. */
  stderrTail(): string {
    return this.connection.stderrTail();
  }

  /**
   * Connects as `side` (spawning the process for stdio). Rejects with a {@link SessionOpenError};
   * a half-opened transport is torn down before rejecting.
   */
  static async open(server: ServerConfig, side: ClientSide, options: OpenOptions): Promise<LiveSession> {
    let session: LiveSession | undefined;
    const era = options.eras?.get(server);
    const connection = await openConnection(server, side, {
      connectTimeoutMs: options.connectTimeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.resume ? { resume: options.resume } : {}),
      ...(options.onSpawn ? { onSpawn: options.onSpawn } : {}),
      ...(options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes }),
      ...(options.coalesceListChangedMs === undefined ? {} : { coalesceListChangedMs: options.coalesceListChangedMs }),
      ...(options.markerEnv === undefined ? {} : { markerEnv: options.markerEnv }),
      ...(era === undefined ? {} : { era }),
      onStaleEra: () => options.eras?.forget(server),
      // A session's connect must prove the server is there (the connect loop relies on it).
      verifyAdoptedEra: true,
      onLeaderExit: (_pid, exit) => session?.died(exit, options),
      onSessionLost: () => {
        if (session?.alive) options.onLost?.(session);
      },
      configure: (client) => {
        const changed = (kind: 'tools' | 'prompts' | 'resources') => (): void => {
          if (session?.alive) options.onListChanged(session, kind);
        };
        client.setNotificationHandler('notifications/tools/list_changed', changed('tools'));
        client.setNotificationHandler('notifications/prompts/list_changed', changed('prompts'));
        client.setNotificationHandler('notifications/resources/list_changed', changed('resources'));
      },
    });
    options.eras?.learn(server, connection.verdict);
    session = new LiveSession(options.id, connection, options.resume !== undefined, options.clock);
    if (connection.exit) session.died(connection.exit, options);
    // The 2026-07-28 era sends `list_changed` only on a subscription the client opens.
    if (connection.era === 'modern') await bounded(options.clock, session.listenForChanges(options, false), options.connectTimeoutMs);
    const transport = connection.transport;
    if (options.resume && transport instanceof TrackedHttpTransport) {
      // Awaited (bounded), so a notification caused by the first call cannot beat the stream to
      // the server: it registers the stream before it answers the GET.
      const opened = session;
      await bounded(
        options.clock,
        openStandaloneStream(transport, options.clock, () => opened.alive),
        options.connectTimeoutMs,
      );
    }
    // A resumed session was initialised by discovery, whose worker may have let go of the stream
    // before the server's start-up `roots/list` came (the server stores it for a replay we cannot
    // ask for: no event id was seen). Told the roots changed, a server that wants them asks again.
    if (options.resume && side.listRoots) await bounded(options.clock, connection.client.sendRootsListChanged(), Math.min(ROOTS_SETTLE_MS, options.connectTimeoutMs));
    if (side.rootsAskedBefore?.()) await LiveSession.settleRoots(connection, options);
    return session;
  }

  /**
   * A server that asks for roots does so right after `initialized`, and some (server-filesystem)
   * refuse every path until the answer is applied: a call sent right behind `initialized` would be
   * refused. So a session of a server known to ask waits until it asked and was answered, plus one
   * ping (the server has processed the answer when the ping returns), bounded by
   * {@link ROOTS_SETTLE_MS}. (A server that applies the answer asynchronously, as server-filesystem
   * does, may still refuse a call that arrives within the next milliseconds; the bare SDK too.)
   */
  private static async settleRoots(connection: Connection, options: OpenOptions): Promise<void> {
    const ms = Math.min(ROOTS_SETTLE_MS, options.connectTimeoutMs);
    await bounded(
      options.clock,
      connection.rootsAnswered.then(() => connection.checkAlive(ms)),
      ms,
    );
  }

  /**
   * Opens a `subscriptions/listen` stream for the list kinds the server says change. The SDK
   * never reopens one the server ended: while the session lives, this does (a second later, so a
   * server that ends every subscription costs one request a second), and has every kind re-listed,
   * since changes made meanwhile were announced to nobody.
   */
  private async listenForChanges(options: OpenOptions, reopened: boolean): Promise<void> {
    const capabilities = this.connection.client.getServerCapabilities();
    const kinds = LISTEN_KINDS.filter(([kind]) => capabilities?.[kind]?.listChanged === true);
    if (kinds.length === 0) return;
    const filter = Object.fromEntries(kinds.map(([, key]) => [key, true]));
    const subscription = await this.connection.client.listen(filter, { timeout: options.connectTimeoutMs });
    if (reopened) for (const [kind] of kinds) options.onListChanged(this, kind);
    void subscription.closed.then(async (how) => {
      if (how !== 'remote' || !this.alive) return;
      await sleepOn(this.clock, RELISTEN_DELAY_MS);
      if (this.alive) await this.listenForChanges(options, true).catch(() => undefined);
    });
  }

  private died(exit: ExitInfo | undefined, options: OpenOptions): void {
    if (this.state.kind !== 'alive') return;
    this.state = { kind: 'dead', exit };
    options.onDeath(this, exit);
  }

  /**
   * Terminates (HTTP DELETE) a Streamable HTTP session that will never be resumed, bounded by
   * {@link DELETE_TIMEOUT_MS} on `clock`. Never throws: a server that is gone or refuses is fine.
   */
  static async discard(server: ServerConfig, resume: ResumableSession, clock: Clock, authProvider?: OAuthClientProvider): Promise<void> {
    if (server.transport !== 'http') return;
    const transport = new TrackedHttpTransport({
      url: new URL(server.url),
      headers: server.headers,
      sessionId: resume.sessionId,
      protocolVersion: resume.protocolVersion,
      ...(authProvider ? { authProvider } : {}),
    });
    try {
      // start() only creates the abort controller the DELETE listens to, so close() can cut it short.
      await transport.start();
      await bounded(clock, transport.terminateSession(), DELETE_TIMEOUT_MS);
    } finally {
      await transport.close().catch(() => undefined);
    }
  }

  /** Marks an HTTP session lost (the server no longer knows it, or is gone). */
  abandon(): void {
    if (this.state.kind === 'alive') this.state = { kind: 'dead', exit: undefined };
  }

  /**
   * Ends a lost HTTP session once the requests still travelling on it have their answers (or at
   * `maxWaitMs`): closing at once would abort them, and a request aborted by us is one whose fate
   * we made unknowable. Stdio sessions are killed at once (their process is gone anyway).
   */
  async retire(maxWaitMs: number): Promise<void> {
    this.abandon();
    const transport = this.connection.transport;
    if (transport instanceof TrackedHttpTransport && transport.inFlight > 0) await bounded(this.clock, transport.whenIdle(), maxWaitMs);
    await this.kill();
  }

  /**
   * Closes the session: the stdio kill ladder (stdin → SIGTERM → SIGKILL to the group), or the
   * HTTP session ended with a DELETE bounded by {@link DELETE_TIMEOUT_MS}, then the transport.
   */
  async close(): Promise<void> {
    this.state = { kind: 'closed' };
    const transport = this.connection.transport;
    if (transport instanceof TrackedHttpTransport && transport.sessionId) {
      // Tell the server it can drop the session; a server that is gone or silent is fine too.
      await bounded(this.clock, transport.terminateSession(), DELETE_TIMEOUT_MS);
    }
    if (transport instanceof TrackedHttpTransport || this.connection.pid === undefined) {
      await this.connection.client.close().catch(() => undefined);
      return;
    }
    await this.connection.release({ stdinGraceMs: 1000, termGraceMs: 1000 });
  }

  /** Ends the session at once (stdio: SIGKILL to the group). */
  async kill(): Promise<void> {
    this.state = { kind: 'closed' };
    await this.connection.kill();
  }
}
