/**
 * The supervisor of one server's live session on the main thread (docs/ARCHITECTURE.md §7). It wires three
 * parts and owns what they share (the circuit breaker, the counters, the sessions being let go):
 *
 * - the connect loop ({@link ConnectLoop}): single-flight connects, backoff with jitter, a
 *   reconnect budget only a *proven* session refills, parking with a periodic probe; its state is
 *   one discriminated union. A dead session is not respawned at once: the next call does it;
 * - the call path ({@link CallPath}): the gate, the queue and the one retry loop of every tool
 *   call, resource read and prompt fetch, driven by the pure call policy (`decide`);
 * - the `list_changed` refresher ({@link ListRefresher}).
 *
 * What is left here is the session's life: opening one (resuming the HTTP session discovery
 * created, when offered), reporting it, letting a lost HTTP session drain before it is closed,
 * and `close()`.
 */
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { classifyFailure, describeExit } from '../connection/classify.js';
import type { ResumableSession, ServerFailure } from '../discovery/types.js';
import type { ToolRoute } from '../readiness/settlement.js';
import type { CallOptions, RequestOptions } from '../readiness/types.js';
import { CircuitBreaker } from './breaker.js';
import { CallPath } from './call-path.js';
import { type CloseReason, type ConnectReason, ConnectLoop, type ParkedState } from './connect-loop.js';
import { ListRefresher } from './list-refresh.js';
import { LiveSession, SessionOpenError } from './live-session.js';
import type { SupervisorContext, SupervisorCounters, SupervisorStateKind, SupervisorStats } from './types.js';

// Where the host, readiness and the tests have always imported them from.
export type { CatalogLists, SessionOptions, SupervisorContext, SupervisorEvents, SupervisorStateKind, SupervisorStats } from './types.js';

/** Supervises one server's session and every call to it. */
export class ServerSupervisor {
  private readonly breaker: CircuitBreaker;
  private readonly loop: ConnectLoop<LiveSession>;
  private readonly calls: CallPath;
  private readonly refresher: ListRefresher;
  private sessionSeq = 0;
  /** Lost HTTP sessions waiting for their in-flight requests before they are closed (killed by `close()`). */
  private readonly retiring = new Set<LiveSession>();
  /** DELETEs of unused discovery sessions still under way (awaited by `close()`). */
  private readonly discarding = new Set<Promise<void>>();
  /** An HTTP session discovery created, for the next connect to resume instead of initialising. */
  private resumable: ResumableSession | undefined;
  /** How the last session died, and its stderr, for SERVER_EXITED messages. */
  private lastExit: LiveSession['exit'];
  private lastStderr: string | undefined;
  /** The HTTP server lost the last session: the next one counts as a re-initialisation. */
  private httpSessionLost = false;
  private readonly counters: SupervisorCounters = { connects: 0, respawns: 0, respawnRequests: 0, calls: 0, replays: 0, reinitialisations: 0 };

  constructor(
    readonly server: ServerConfig,
    private readonly context: SupervisorContext,
  ) {
    const { clock, options } = context;
    this.breaker = new CircuitBreaker(options.breaker, clock, (to, state) => {
      const payload = { server: server.name, profiles: context.profiles() };
      if (to === 'open') context.emit('breaker:open', { ...payload, probeAt: state.kind === 'open' ? state.probeAt : clock.now() });
      else if (to === 'half-open') context.emit('breaker:half-open', payload);
      else context.emit('breaker:closed', payload);
    });
    this.loop = new ConnectLoop<LiveSession>({
      clock,
      random: context.random,
      options,
      breaker: this.breaker,
      hooks: {
        open: (signal) => this.openSession(signal),
        classify: (error) => this.classifyConnectError(error),
        budgetSpent: (attempts) => this.budgetSpent(attempts),
        established: (session, facts) => this.established(session, facts),
        parked: (state) => this.parkedNow(state),
      },
    });
    this.calls = new CallPath({
      server,
      context,
      breaker: this.breaker,
      loop: this.loop,
      counters: this.counters,
      lastDeath: () => ({ exit: this.lastExit, stderr: this.lastStderr }),
      dropSession: (session) => this.dropSession(session),
    });
    this.refresher = new ListRefresher({
      clock,
      options,
      client: () => this.loop.live()?.client,
      publish: (lists) => {
        if (this.loop.state.kind !== 'closed') context.listsChanged(lists);
      },
    });
  }

  /** True while parked: its tools leave new turns. */
  get parked(): boolean {
    return this.loop.state.kind === 'parked';
  }

  /** The current state kind. */
  get stateKind(): SupervisorStateKind {
    return this.loop.state.kind;
  }

  /** An HTTP session discovery created: used by the first connect instead of a new `initialize`. */
  offerResumable(session: ResumableSession): void {
    if (this.server.transport !== 'http') return;
    if (this.loop.established > 0 || this.loop.state.kind === 'closed') {
      // Already connected (a retry or reload re-discovered it): this session would never be used.
      this.discard(session);
      return;
    }
    const previous = this.resumable;
    this.resumable = session;
    if (previous && previous.sessionId !== session.sessionId) this.discard(previous);
  }

  /** Signals the loop to (re)connect now; revives a parked supervisor. Never starts a second attempt. */
  requestConnect(reason: ConnectReason): void {
    this.loop.request(reason);
  }

  /** Calls a tool through the supervisor. Throws McpSupervisorError (never a raw SDK error). */
  call(route: ToolRoute, args: Record<string, unknown>, options: CallOptions, profile?: string): Promise<CallToolResult> {
    return this.calls.run<CallToolResult>({ kind: 'tool', route, args, ...(profile === undefined ? {} : { profile }) }, options);
  }

  /** Reads a resource, supervised like a tool call (read-only: replayed once after a death). */
  readResource(uri: string, options: RequestOptions, profile?: string): Promise<ReadResourceResult> {
    return this.calls.run<ReadResourceResult>({ kind: 'resource', uri, ...(profile === undefined ? {} : { profile }) }, options);
  }

  /** Fetches a prompt, supervised like a tool call (read-only). */
  getPrompt(name: string, args: Record<string, string> | undefined, options: RequestOptions, profile?: string): Promise<GetPromptResult> {
    return this.calls.run<GetPromptResult>({ kind: 'prompt', name, ...(args === undefined ? {} : { args }), ...(profile === undefined ? {} : { profile }) }, options);
  }

  /**
   * Connects now unless a session is live (or being made, or parked); resolves once that attempt
   * settled, whatever its outcome (a warm-up never throws: a call will report what went wrong).
   */
  async warmUp(): Promise<void> {
    const kind = this.loop.state.kind;
    if (kind === 'closed' || kind === 'parked' || this.loop.live()) return;
    const settled = this.loop.nextAttempt(this.connectTimeoutMs() + 1000, undefined);
    this.loop.request('warm-up');
    await settled.catch(() => undefined);
  }

  /** Sends `notifications/roots/list_changed` on the live session, if any; true when sent. */
  async notifyRootsChanged(): Promise<boolean> {
    const session = this.loop.live();
    if (!session) return false;
    try {
      await session.client.sendRootsListChanged();
      return true;
    } catch {
      return false;
    }
  }

  /** Counters and state for `host.stats()`. */
  stats(): SupervisorStats {
    const state = this.loop.state;
    const session = this.loop.live();
    return {
      server: this.server.name,
      profiles: this.context.profiles(),
      state: state.kind,
      ...(state.kind === 'parked' ? { nextProbeAt: state.nextProbeAt, parkReason: state.reason } : {}),
      ...this.counters,
      breaker: this.breaker.state,
      breakerFailures: this.breaker.failures,
      attemptsSinceProven: this.loop.attemptsSinceProven,
      ...(session?.pid === undefined ? {} : { pid: session.pid }),
    };
  }

  /**
   * Ends the session (stdio kill ladder to the whole group) and the loop; an attempt in flight is
   * cut short instead of waited for. `reason` is `reload` when the profile is being reloaded:
   * calls still in flight are then not told the host closed. Queued calls are not dropped (their
   * promises would never settle): each one runs, sees the closed state and fails accordingly.
   */
  async close(reason: CloseReason = 'host'): Promise<void> {
    if (this.loop.state.kind === 'closed') return;
    const { session, attempt } = this.loop.close(reason);
    this.refresher.stop();
    await session?.close();
    await Promise.allSettled([...this.retiring].map((lost) => lost.kill()));
    await attempt;
    this.discard(this.resumable);
    this.resumable = undefined;
    await Promise.allSettled([...this.discarding]);
  }

  // ------------------------------------------------------------------ the session's life

  private connectTimeoutMs(): number {
    return this.server.connectTimeoutMs ?? this.context.options.connectTimeoutMs;
  }

  /** Opens a session for the connect loop, resuming discovery's HTTP session once if offered. */
  private openSession(signal: AbortSignal): Promise<LiveSession> {
    const { options, clock } = this.context;
    const resume = this.resumable;
    this.resumable = undefined;
    return LiveSession.open(this.server, this.context.side(), {
      id: ++this.sessionSeq,
      clock,
      ...(options.maxMessageBytes === undefined ? {} : { maxMessageBytes: options.maxMessageBytes }),
      // Half the re-list debounce: a dropped repeat always falls before the refresh that reads the list.
      coalesceListChangedMs: Math.min(50, Math.floor(options.listChangedDebounceMs / 2)),
      ...(options.markerEnv === undefined ? {} : { markerEnv: options.markerEnv }),
      connectTimeoutMs: this.connectTimeoutMs(),
      signal,
      ...(resume ? { resume } : {}),
      ...(this.context.eras ? { eras: this.context.eras } : {}),
      onDeath: (session, exit) => this.onSessionDeath(session, exit),
      onLost: (session) => this.dropSession(session),
      onListChanged: (_session, kind) => this.refresher.schedule(kind),
    });
  }

  private classifyConnectError(error: unknown): ServerFailure {
    const bounds = { timeoutMs: this.connectTimeoutMs(), phase: 'session start' } as const;
    if (!(error instanceof SessionOpenError)) return classifyFailure(error, bounds);
    return classifyFailure(error.cause, {
      ...(error.tooLarge === undefined ? {} : { tooLarge: error.tooLarge }),
      ...(error.exit ? { exit: error.exit } : {}),
      ...(error.stderrTail ? { stderrTail: error.stderrTail } : {}),
      ...bounds,
    });
  }

  /** Why the loop parks when sessions came up and ended before any call proved one. */
  private budgetSpent(attempts: number): ServerFailure {
    const exit = this.lastExit;
    if (this.server.transport !== 'stdio') return { kind: 'http', message: `${attempts} sessions in a row were lost before a call succeeded` };
    return {
      kind: 'exited',
      message: `${attempts} sessions in a row ended${exit ? ` (last: ${describeExit(exit)})` : ''} before a call succeeded`,
      ...(exit ? { exitCode: exit.code, signal: exit.signal } : {}),
    };
  }

  /** The loop is ready with `session`: count it and report it. */
  private established(session: LiveSession, facts: { first: boolean; revival: boolean }): void {
    const respawn = !facts.first && this.server.transport === 'stdio';
    this.counters.connects++;
    // A session discovery offered while this one was connecting will never be resumed now.
    this.discard(this.resumable);
    this.resumable = undefined;
    if (respawn) this.counters.respawns++;
    if (this.httpSessionLost) {
      this.httpSessionLost = false;
      this.counters.reinitialisations++;
    }
    const server = this.server.name;
    const profiles = this.context.profiles();
    const pid = session.pid === undefined ? {} : { pid: session.pid };
    this.context.emit('server:connected', { server, profiles, sessionId: session.id, resumed: session.resumed, ...pid });
    if (respawn) this.context.emit('server:respawned', { server, profiles, ...pid });
    if (facts.revival) {
      this.context.emit('server:revived', { server, profiles });
      this.context.exclusionChanged();
    }
  }

  private parkedNow(state: ParkedState): void {
    this.context.emit('server:parked', { server: this.server.name, profiles: this.context.profiles(), reason: state.reason, nextProbeAt: state.nextProbeAt });
    this.context.exclusionChanged();
  }

  private onSessionDeath(session: LiveSession, exit: LiveSession['exit']): void {
    this.lastExit = exit;
    this.lastStderr = session.stderrTail();
    // Only stdio sessions die by themselves; HTTP sessions are dropped by the call path.
    this.context.emit('server:exited', { server: this.server.name, profiles: this.context.profiles(), code: exit?.code ?? null, signal: exit?.signal ?? null });
    this.loop.sessionEnded(session);
  }

  /**
   * Stops using a session. Stdio: its pipe broke, so the process is dying or useless — killed, but
   * its exit is left to report itself (server:exited, the exit code for messages). HTTP: the server
   * no longer knows it — never used again, and closed once its requests in flight have answers.
   */
  private dropSession(session: LiveSession): void {
    if (this.loop.sessionEnded(session) && this.server.transport !== 'stdio') this.httpSessionLost = true;
    if (this.server.transport === 'stdio') {
      if (session.alive) void session.connection.kill();
      return;
    }
    const wasAlive = session.alive;
    session.abandon();
    if (wasAlive) this.context.emit('server:disconnected', { server: this.server.name, profiles: this.context.profiles() });
    if (this.retiring.has(session)) return;
    this.retiring.add(session);
    void session.retire(this.context.options.callTimeoutMs).finally(() => this.retiring.delete(session));
  }

  /** Ends a discovery-created HTTP session nobody will resume, so the server does not keep it. */
  private discard(session: ResumableSession | undefined): void {
    if (!session) return;
    const ending = LiveSession.discard(this.server, session, this.context.clock, this.context.side().authProvider).finally(() => this.discarding.delete(ending));
    this.discarding.add(ending);
  }
}
