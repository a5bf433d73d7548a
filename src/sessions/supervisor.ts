/**
 * The supervisor of one server's live session on the main thread (DESIGN §5).
 *
 * It owns the session, its circuit breaker and its connect loop, and it is the only place that
 * decides whether a tool call is sent, retried, replayed or refused:
 *
 * - connect loop: single-flight, exponential backoff with jitter, a reconnect budget that only a
 *   *proven* session (a successful call) refills — sessions that come up and die before
 *   proving themselves spend it too; when the budget is spent it parks, keeps probing on a timer
 *   and revives at once on a signal. While the breaker is open its cooldown replaces the backoff:
 *   the half-open probe signals the next attempt, whose outcome is the probe's verdict. The
 *   supervisor stays able to connect until `close()`, which also cuts an in-flight connect short;
 * - pre-call gate: no live session → one respawn request, wait up to `respawnWaitMs` for a *fresh*
 *   session, then call once; a respawn that dies at once → SERVER_EXITED_AGAIN;
 * - mid-call death: respawn; replay once only for read-only/idempotent tools (or `replay: always`),
 *   otherwise OUTCOME_UNCERTAIN;
 * - Streamable HTTP 404 (the server forgot the session): the request was not processed, so a new
 *   session is initialised and the call retried once; 401 → AUTH_REQUIRED;
 * - an exited or unreachable server is never reported as a timeout.
 */
import type { CallToolResult, GetPromptResult, ReadResourceResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  CallToolResultSchema,
  ErrorCode,
  ListPromptsResultSchema,
  ListResourceTemplatesResultSchema,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  McpError,
  type Prompt,
  type Resource,
  type ResourceTemplate,
} from '@modelcontextprotocol/sdk/types.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_SCHEMA_DEPTH, nestsDeeperThan } from '../connection/limits.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import PQueue from 'p-queue';
import type { ServerConfig } from '../config/types.js';
import { type Clock, type TimerHandle, sleepOn } from '../clock.js';
import { McpSupervisorError, isMcpSupervisorError } from '../errors.js';
import { classifyFailure, describeExit, httpStatusOf } from '../connection/classify.js';
import type { ClientSide } from '../connection/client-side.js';
import { type Delivery, mayHaveRun, trackDelivery } from '../connection/delivery.js';
import { NotMcpAnswerError, RESPONSE_LOST_CODE } from '../connection/http-transport.js';
import { listAllPages } from '../discovery/server-discovery.js';
import type { ResumableSession, ServerFailure } from '../discovery/types.js';
import type { ToolRoute } from '../readiness/settlement.js';
import type { CallOptions, RequestOptions } from '../readiness/types.js';
import { checkStructuredResult } from './output-validation.js';
import { backoffDelay } from './backoff.js';
import { type BreakerOptions, CircuitBreaker } from './breaker.js';
import { type ErrorClass, type FailReason, decide } from './call-policy.js';
import { LiveSession, SessionOpenError } from './live-session.js';
import * as messages from './messages.js';

/** Tuning of supervised sessions. */
export interface SessionOptions {
  /** How long a call waits for a fresh session after a respawn request (ms). Default 15 000. */
  respawnWaitMs: number;
  /** Connect attempts without a proven session before the supervisor parks. Default 5. */
  reconnectBudget: number;
  /** Backoff before the second connect attempt (ms), doubling after. Default 250. */
  backoffBaseMs: number;
  /** Backoff cap (ms). Default 30 000. */
  backoffMaxMs: number;
  /** Probe period of a parked server (ms). Default 60 000. */
  parkProbeIntervalMs: number;
  /** Which calls are replayed after a mid-call death. Default `idempotent`. */
  replay: 'idempotent' | 'always' | 'never';
  /** Calls in flight per server. Default 8. */
  maxConcurrentCalls: number;
  /** Default call timeout when neither the call nor the server sets one (ms). Default 60 000. */
  callTimeoutMs: number;
  /** Bounds `initialize` of a session (ms). Default: `discovery.connectTimeoutMs`. */
  connectTimeoutMs: number;
  /**
   * Warm sessions: connect right after discovery finds a server ready instead of on the first
   * call, so a first call costs what a call costs. A session that dies later is respawned by the
   * next call, not at once. Default true.
   */
  eager: boolean;
  /** Sessions warmed up at once after discovery, across the host. Default 4. */
  warmConcurrency?: number;
  /** Count tool results with `isError: true` as breaker failures. Default false. */
  countToolErrors: boolean;
  /** Debounce of `tools/list_changed` refreshes (ms). Default 200. */
  listChangedDebounceMs: number;
  /** The largest message accepted from a server (bytes). Default 10 MB. */
  maxMessageBytes?: number;
  /** Most items of one list a refresh may bring (over it, the old list stays). */
  maxCatalogItems?: number;
  /** Deepest schema a refreshed tool may have (over it, the old list stays). */
  maxSchemaDepth?: number;
  /** The host's lifeline marker, added to every spawned server's environment. */
  markerEnv?: Readonly<Record<string, string>>;
  breaker: BreakerOptions;
}

/** The supervisor's state (cockatiel style: each state carries its own data). */
export type SupervisorState =
  | { kind: 'idle' }
  | { kind: 'connecting'; attempt: number }
  | { kind: 'ready'; session: LiveSession }
  | { kind: 'backoff'; attempt: number; retryAt: number }
  | { kind: 'parked'; reason: string; nextProbeAt: number; since: number }
  | { kind: 'closed' };

/** Events a supervisor reports. */
export interface SupervisorEvents {
  'server:connected': { server: string; profiles: string[]; sessionId: number; pid?: number; resumed: boolean };
  'server:exited': { server: string; profiles: string[]; code: number | null; signal: string | null };
  'server:disconnected': { server: string; profiles: string[] };
  'server:respawned': { server: string; profiles: string[]; pid?: number };
  'server:parked': { server: string; profiles: string[]; reason: string; nextProbeAt: number };
  'server:revived': { server: string; profiles: string[] };
  'breaker:open': { server: string; profiles: string[]; probeAt: number };
  'breaker:half-open': { server: string; profiles: string[] };
  'breaker:closed': { server: string; profiles: string[] };
}

/** What a supervisor needs from its manager. */
export interface SupervisorContext {
  clock: Clock;
  options: SessionOptions;
  random: () => number;
  /** Profiles currently using this supervisor (for events and error messages). */
  profiles(): string[];
  emit<Name extends keyof SupervisorEvents>(event: Name, payload: SupervisorEvents[Name]): void;
  /** Parked/revived: turns must be rebuilt. */
  exclusionChanged(): void;
  /** The server re-listed a kind after its `list_changed` (for the next turn). */
  listsChanged(lists: CatalogLists): void;
  /** The client side this server's sessions connect as (capabilities, handlers, OAuth). */
  side(): ClientSide;
  /** The authorization URL of a pending OAuth code flow of this server, if any. */
  pendingAuthorization?(): string | undefined;
}

/** The kinds of list a server announces changes of. */
export type ListKind = 'tools' | 'prompts' | 'resources';

/** A re-listed part of a server's catalogue. */
export interface CatalogLists {
  tools?: Tool[];
  prompts?: Prompt[];
  resources?: Resource[];
  resourceTemplates?: ResourceTemplate[];
}

function withinLimits(lists: CatalogLists, maxItems: number, maxDepth: number): boolean {
  for (const items of [lists.tools, lists.prompts, lists.resources, lists.resourceTemplates]) if (items && items.length > maxItems) return false;
  return !(lists.tools ?? []).some((tool) => nestsDeeperThan(tool.inputSchema, maxDepth) || nestsDeeperThan(tool.outputSchema, maxDepth));
}

/** What a supervised request does. */
export type Operation =
  | { kind: 'tool'; route: ToolRoute; args: Record<string, unknown> }
  | { kind: 'resource'; uri: string }
  | { kind: 'prompt'; name: string; args?: Record<string, string> };

/** How errors name a request: the tool, or what was read or fetched. */
function labelOf(op: Operation): string {
  if (op.kind === 'tool') return op.route.tool;
  return op.kind === 'resource' ? `resources/read ${op.uri}` : `prompts/get ${op.name}`;
}

/** What an attempt's error tells by itself; delivery and liveness tell the rest. */
function classifyError(error: unknown, signal: AbortSignal | undefined): ErrorClass {
  if (signal?.aborted) return 'cancelled';
  if (error instanceof UnauthorizedError) return 'auth';
  const status = httpStatusOf(error);
  if (status === 401 || status === 403) return 'auth';
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return 'timeout';
    if (error.code === ErrorCode.ConnectionClosed || error.code === RESPONSE_LOST_CODE) return 'transport';
    return 'rpc';
  }
  return 'transport';
}

/** Result of waiting for a connect attempt. */
type AttemptResult = { kind: 'session'; session: LiveSession } | { kind: 'failure'; failure: ServerFailure; exitedAfterSession: boolean } | { kind: 'parked' } | { kind: 'closed' };

/** Counters of one supervisor. */
export interface SupervisorStats {
  server: string;
  profiles: string[];
  state: SupervisorState['kind'];
  nextProbeAt?: number;
  parkReason?: string;
  connects: number;
  respawns: number;
  respawnRequests: number;
  calls: number;
  replays: number;
  reinitialisations: number;
  breaker: CircuitBreaker['state'];
  breakerFailures: number;
  attemptsSinceProven: number;
  pid?: number;
}

/** Supervises one server's session and every call to it. */
export class ServerSupervisor {
  private state: SupervisorState = { kind: 'idle' };
  private readonly breaker: CircuitBreaker;
  private readonly queue: PQueue;
  private sessionSeq = 0;
  private everConnected = false;
  private attemptsSinceProven = 0;
  private loop: Promise<void> | undefined;
  private wake = new AbortController();
  /** Aborted by `close()`: cuts an in-flight connect short instead of waiting for its timeout. */
  private readonly closing = new AbortController();
  private readonly attemptWaiters = new Set<(result: AttemptResult) => void>();
  /** Lost HTTP sessions waiting for their in-flight requests before they are closed (killed by `close()`). */
  private readonly retiring = new Set<LiveSession>();
  /** DELETEs of unused discovery sessions still under way (awaited by `close()`). */
  private readonly discarding = new Set<Promise<void>>();
  private probeTimer: TimerHandle | undefined;
  private readonly refreshes: Record<ListKind, { timer: TimerHandle | undefined; running: Promise<void> | undefined; again: boolean }> = {
    tools: { timer: undefined, running: undefined, again: false },
    prompts: { timer: undefined, running: undefined, again: false },
    resources: { timer: undefined, running: undefined, again: false },
  };
  private resumable: ResumableSession | undefined;
  /** Set when parked, so the next session counts as a revival. */
  private parkedBefore = false;
  /** How the last session died, and its stderr, for SERVER_EXITED messages. */
  private lastExit: LiveSession['exit'];
  private lastStderr: string | undefined;
  private readonly counters = { connects: 0, respawns: 0, respawnRequests: 0, calls: 0, replays: 0, reinitialisations: 0 };

  constructor(
    readonly server: ServerConfig,
    private readonly context: SupervisorContext,
  ) {
    this.queue = new PQueue({ concurrency: context.options.maxConcurrentCalls });
    this.breaker = new CircuitBreaker(context.options.breaker, context.clock, (to, state) => {
      const payload = { server: server.name, profiles: context.profiles() };
      if (to === 'open') context.emit('breaker:open', { ...payload, probeAt: state.kind === 'open' ? state.probeAt : context.clock.now() });
      else if (to === 'half-open') context.emit('breaker:half-open', payload);
      else context.emit('breaker:closed', payload);
    });
  }

  /** True while parked: its tools leave new turns. */
  get parked(): boolean {
    return this.state.kind === 'parked';
  }

  /** Re-read after an await: `close()` may have run meanwhile. */
  private isClosed(): boolean {
    return this.state.kind === 'closed';
  }

  /** The current state kind. */
  get stateKind(): SupervisorState['kind'] {
    return this.state.kind;
  }

  private subject(tool?: string): messages.CallSubject {
    return { server: this.server.name, profile: this.context.profiles().join(', '), ...(tool === undefined ? {} : { tool }) };
  }

  private liveSession(): LiveSession | undefined {
    return this.state.kind === 'ready' && this.state.session.alive ? this.state.session : undefined;
  }

  /** An HTTP session discovery created: used by the first connect instead of a new `initialize`. */
  offerResumable(session: ResumableSession): void {
    if (this.server.transport !== 'http') return;
    if (this.everConnected || this.isClosed()) {
      // Already connected (a retry or reload re-discovered it): this session would never be used.
      this.discard(session);
      return;
    }
    const previous = this.resumable;
    this.resumable = session;
    if (previous && previous.sessionId !== session.sessionId) this.discard(previous);
  }

  /** Ends a discovery-created HTTP session nobody will resume, so the server does not keep it. */
  private discard(session: ResumableSession | undefined): void {
    if (!session) return;
    const ending = LiveSession.discard(this.server, session, this.context.side().authProvider).finally(() => this.discarding.delete(ending));
    this.discarding.add(ending);
  }

  // ------------------------------------------------------------------ connect loop

  /** Signals the loop to (re)connect now; revives a parked supervisor. Never starts a second loop. */
  requestConnect(reason: 'call' | 'probe' | 'signal' | 'warm-up'): void {
    if (this.state.kind === 'closed' || this.liveSession()) return;
    if (this.state.kind === 'parked') {
      this.context.clock.clearTimeout(this.probeTimer);
      this.probeTimer = undefined;
      // One attempt; the budget allows it again only if it succeeds and is proven.
      this.attemptsSinceProven = Math.max(0, this.context.options.reconnectBudget - 1);
    }
    if (this.loop) {
      // Cut a backoff wait short: a caller is waiting now.
      if (reason !== 'warm-up') this.wake.abort();
      return;
    }
    this.loop = this.runLoop().finally(() => {
      this.loop = undefined;
    });
  }

  private async runLoop(): Promise<void> {
    for (;;) {
      if (this.state.kind === 'closed') return;
      if (this.attemptsSinceProven >= this.context.options.reconnectBudget) {
        // Sessions came up but died before any call succeeded: connecting alone never
        // refills the budget, so a server that dies on every call parks instead of churning.
        const exit = this.lastExit;
        this.park(
          this.server.transport === 'stdio'
            ? {
                kind: 'exited',
                message: `${this.attemptsSinceProven} sessions in a row ended${exit ? ` (last: ${describeExit(exit)})` : ''} before a call succeeded`,
                ...(exit ? { exitCode: exit.code, signal: exit.signal } : {}),
              }
            : { kind: 'http', message: `${this.attemptsSinceProven} sessions in a row were lost before a call succeeded` },
        );
        return;
      }
      const attempt = ++this.attemptsSinceProven;
      this.state = { kind: 'connecting', attempt };
      try {
        const session = await this.openSession();
        if (this.isClosed()) {
          await session.kill();
          this.settleWaiters({ kind: 'closed' });
          return;
        }
        this.adoptSession(session);
        return;
      } catch (error) {
        if (this.isClosed()) {
          this.settleWaiters({ kind: 'closed' });
          return;
        }
        const failure = this.classifyConnectError(error);
        // The reconnect a half-open probe signalled has failed: that is the probe's verdict.
        this.breaker.connectFailed();
        this.settleWaiters({ kind: 'failure', failure, exitedAfterSession: this.everConnected && failure.kind === 'exited' });
        if (this.attemptsSinceProven >= this.context.options.reconnectBudget) {
          this.park(failure);
          return;
        }
        if (this.waitForProbe()) return;
        const delay = backoffDelay(attempt + 1, { baseMs: this.context.options.backoffBaseMs, maxMs: this.context.options.backoffMaxMs }, this.context.random);
        this.state = { kind: 'backoff', attempt, retryAt: this.context.clock.now() + delay };
        this.wake = new AbortController();
        await sleepOn(this.context.clock, delay, this.wake.signal).catch(() => undefined);
        if (this.waitForProbe()) return;
      }
    }
  }

  /**
   * While the breaker is open its cooldown replaces the backoff: the loop stops retrying by itself
   * and the half-open probe signals the next attempt, so a cooldown ends in exactly one probe.
   */
  private waitForProbe(): boolean {
    if (this.state.kind === 'closed' || this.breaker.state.kind !== 'open') return false;
    this.state = { kind: 'idle' };
    return true;
  }

  private async openSession(): Promise<LiveSession> {
    const id = ++this.sessionSeq;
    const resume = this.resumable;
    this.resumable = undefined;
    // One signal per attempt, linked to `closing`: the SDK never removes the abort listener it adds
    // to a request's signal, so handing it the long-lived one would leak a listener per attempt.
    const attempt = new AbortController();
    const onClose = (): void => attempt.abort(this.closing.signal.reason);
    this.closing.signal.addEventListener('abort', onClose, { once: true });
    try {
      return await LiveSession.open(this.server, this.context.side(), {
        id,
        ...(this.context.options.maxMessageBytes === undefined ? {} : { maxMessageBytes: this.context.options.maxMessageBytes }),
        // Half the re-list debounce: a dropped repeat always falls before the refresh that reads the list.
        coalesceListChangedMs: Math.min(50, Math.floor(this.context.options.listChangedDebounceMs / 2)),
        ...(this.context.options.markerEnv === undefined ? {} : { markerEnv: this.context.options.markerEnv }),
        connectTimeoutMs: this.connectTimeoutMs(),
        signal: attempt.signal,
        ...(resume ? { resume } : {}),
        onDeath: (session, exit) => this.onSessionDeath(session, exit),
        onLost: (session) => this.dropSession(session),
        onListChanged: (_session, kind) => this.scheduleRefresh(kind),
      });
    } finally {
      this.closing.signal.removeEventListener('abort', onClose);
    }
  }

  private connectTimeoutMs(): number {
    return this.server.connectTimeoutMs ?? this.context.options.connectTimeoutMs;
  }

  private classifyConnectError(error: unknown): ServerFailure {
    if (error instanceof SessionOpenError) {
      return classifyFailure(error.cause, {
        ...(error.tooLarge === undefined ? {} : { tooLarge: error.tooLarge }),
        ...(error.exit ? { exit: error.exit } : {}),
        ...(error.stderrTail ? { stderrTail: error.stderrTail } : {}),
        timeoutMs: this.connectTimeoutMs(),
        phase: 'session start',
      });
    }
    return classifyFailure(error, { timeoutMs: this.connectTimeoutMs(), phase: 'session start' });
  }

  private adoptSession(session: LiveSession): void {
    const respawn = this.everConnected;
    this.everConnected = true;
    this.state = { kind: 'ready', session };
    this.counters.connects++;
    // A session discovery offered while this one was connecting will never be resumed now.
    this.discard(this.resumable);
    this.resumable = undefined;
    if (respawn && this.server.transport === 'stdio') this.counters.respawns++;
    if (this.httpSessionLost) {
      this.httpSessionLost = false;
      this.counters.reinitialisations++;
    }
    // A successful initialisation, on any transport, closes the breaker.
    this.breaker.sessionEstablished();
    const profiles = this.context.profiles();
    const pid = session.pid;
    this.context.emit('server:connected', { server: this.server.name, profiles, sessionId: session.id, resumed: session.resumed, ...(pid === undefined ? {} : { pid }) });
    if (respawn && this.server.transport === 'stdio') this.context.emit('server:respawned', { server: this.server.name, profiles, ...(pid === undefined ? {} : { pid }) });
    if (this.parkedBefore) {
      this.parkedBefore = false;
      this.context.emit('server:revived', { server: this.server.name, profiles });
      this.context.exclusionChanged();
    }
    this.settleWaiters({ kind: 'session', session });
  }


  private park(failure: ServerFailure): void {
    const now = this.context.clock.now();
    const nextProbeAt = now + this.context.options.parkProbeIntervalMs;
    const reason = `${failure.kind}: ${failure.message}`;
    this.state = { kind: 'parked', reason, nextProbeAt, since: now };
    this.parkedBefore = true;
    this.context.emit('server:parked', { server: this.server.name, profiles: this.context.profiles(), reason, nextProbeAt });
    this.context.exclusionChanged();
    this.settleWaiters({ kind: 'parked' });
    this.probeTimer = this.context.clock.setTimeout(() => {
      this.probeTimer = undefined;
      if (this.state.kind === 'parked') this.requestConnect('probe');
    }, this.context.options.parkProbeIntervalMs);
  }

  private onSessionDeath(session: LiveSession, exit: LiveSession['exit']): void {
    this.lastExit = exit;
    this.lastStderr = session.stderrTail();
    // Only stdio sessions die by themselves; HTTP sessions are dropped by the call path.
    this.context.emit('server:exited', { server: this.server.name, profiles: this.context.profiles(), code: exit?.code ?? null, signal: exit?.signal ?? null });
    // Back to idle, not respawned at once: a server that exits when idle (some do, on purpose) must
    // not be kept alive by us, and a crashing one is respawned by the next call, under its backoff.
    if (this.state.kind === 'ready' && this.state.session === session) this.state = { kind: 'idle' };
  }

  private settleWaiters(result: AttemptResult): void {
    for (const waiter of [...this.attemptWaiters]) waiter(result);
  }

  /** Waits for the outcome of the next connect attempt, bounded by `ms`. */
  private nextAttempt(ms: number, signal: AbortSignal | undefined): Promise<AttemptResult | 'timeout'> {
    return new Promise((resolve, reject) => {
      let timer: TimerHandle | undefined;
      const finish = (result: AttemptResult | 'timeout'): void => {
        this.attemptWaiters.delete(waiter);
        this.context.clock.clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      };
      const waiter = (result: AttemptResult): void => finish(result);
      const onAbort = (): void => {
        this.attemptWaiters.delete(waiter);
        this.context.clock.clearTimeout(timer);
        reject(signal?.reason);
      };
      this.attemptWaiters.add(waiter);
      timer = this.context.clock.setTimeout(() => finish('timeout'), ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Marks the last session proven (a call succeeded): the reconnect budget is refilled. */
  private proven(): void {
    this.attemptsSinceProven = 0;
  }

  // ------------------------------------------------------------------ calls

  /** Calls a tool through the supervisor. Throws McpSupervisorError (never a raw SDK error). */
  call(route: ToolRoute, args: Record<string, unknown>, options: CallOptions): Promise<CallToolResult> {
    return this.request<CallToolResult>({ kind: 'tool', route, args }, options);
  }

  /** Reads a resource, supervised like a tool call (read-only: replayed once after a death). */
  readResource(uri: string, options: RequestOptions): Promise<ReadResourceResult> {
    return this.request<ReadResourceResult>({ kind: 'resource', uri }, options);
  }

  /** Fetches a prompt, supervised like a tool call (read-only). */
  getPrompt(name: string, args: Record<string, string> | undefined, options: RequestOptions): Promise<GetPromptResult> {
    return this.request<GetPromptResult>({ kind: 'prompt', name, ...(args === undefined ? {} : { args }) }, options);
  }

  /** The gate every supervised request passes: closed, cancelled, breaker, parked; then the queue. */
  private async request<T>(op: Operation, options: CallOptions): Promise<T> {
    const subject = this.subject(labelOf(op));
    if (this.state.kind === 'closed') throw this.closedError(subject, op, false);
    if (options.signal?.aborted) throw messages.callCancelled(subject);
    const admission = this.breaker.admit();
    if (!admission.allowed) throw messages.breakerOpen(subject, this.context.options.breaker.failureThreshold, admission.probeAt, this.context.clock.now());
    if (this.state.kind === 'parked') {
      if (admission.probe) {
        // Half-open probe on a parked server: revive now, but never write into a dead pipe. The
        // probe stays in flight until that reconnect's outcome settles the breaker.
        this.requestConnect('signal');
        throw messages.reconnecting(subject);
      }
      throw messages.serverParked(subject, this.state.reason, this.state.nextProbeAt);
    }
    this.counters.calls++;
    try {
      return (await this.queue.add(() => this.admitted(op, options, admission.probe))) as T;
    } catch (error) {
      if (isMcpSupervisorError(error)) throw error;
      throw messages.protocolError(subject, error instanceof Error ? error.message : String(error));
    }
  }

  private async admitted(op: Operation, options: CallOptions, probe: boolean): Promise<unknown> {
    const subject = this.subject(labelOf(op));
    let verdictPending = probe;
    try {
      // Queued behind other calls while the host closed: never start anything now.
      if (this.isClosed()) throw this.closedError(subject, op, false);
      if (options.signal?.aborted) throw messages.callCancelled(subject);
      let session = this.liveSession();
      if (!session) {
        if (probe) {
          // Half-open with no live session: signal one reconnect, do not write into a dead pipe.
          // The probe stays in flight: the reconnect's outcome is its verdict.
          verdictPending = false;
          this.requestConnect('signal');
          throw messages.reconnecting(subject);
        }
        session = await this.freshSession(subject, options.signal);
      }
      return await this.attempt(session, op, options);
    } finally {
      // A probe that ended without a verdict (cancelled, rejected by the server, host closed)
      // frees the half-open slot; otherwise the breaker would wait for a verdict forever.
      if (verdictPending) this.breaker.releaseProbe();
    }
  }

  /**
   * Sends the call, and on failure does what {@link decide} says with the facts the transport
   * recorded: resend what provably never ran, replay once what may have run and is safe to
   * repeat, and otherwise fail with an error that says which of the two it was.
   */
  private async attempt(first: LiveSession, op: Operation, options: CallOptions): Promise<unknown> {
    const subject = this.subject(labelOf(op));
    let session = first;
    let resent = false;
    let replayed = false;
    for (;;) {
      const { promise, delivery } = trackDelivery(() => this.invoke(session, op, options));
      try {
        return await promise;
      } catch (error) {
        if (isMcpSupervisorError(error)) throw error;
        if (this.isClosed()) throw this.closedError(subject, op, mayHaveRun(delivery));
        const tooLarge = delivery.tooLarge ?? session.connection.tooLarge;
        if (tooLarge !== undefined) {
          this.breaker.recordFailure();
          throw messages.messageTooLarge(subject, tooLarge, mayHaveRun(delivery));
        }
        const exited = this.server.transport === 'stdio' && (session.exit !== undefined || !session.alive);
        const facts = {
          transport: this.server.transport,
          error: classifyError(error, options.signal),
          delivery,
          exited,
          resent,
          replayed,
          replayable: this.isReplayable(op),
        } as const;
        const verdict = decide(facts);
        if (verdict.action === 'fail') throw this.failure(verdict.reason, session, error, delivery, subject, options);
        if (verdict.action === 'uncertain') {
          this.breaker.recordFailure();
          // Reconnect in the background for the next call; this one may have run.
          if (exited) this.requestConnect('signal');
          throw messages.outcomeUncertain(subject, verdict.cause === 'exited' ? { exit: session.exit } : { what: this.lostWhat(delivery) });
        }
        if (verdict.action === 'replay') {
          this.counters.replays++;
          replayed = true;
        } else resent = true;
        // A session the server lost meanwhile (dropped by another request's 404) is not reused
        // either; a stdio session whose pipe broke is dead even if its exit is not observed yet.
        if (verdict.freshSession || !session.alive) {
          this.dropSession(session);
          session = await this.freshSession(subject, options.signal, session);
        }
      }
    }
  }

  /** How an HTTP request was lost, for the model's text. */
  private lostWhat(delivery: Delivery): string {
    if (delivery.state === 'unknown' && delivery.httpStatus !== undefined) return `answered HTTP ${delivery.httpStatus}`;
    return delivery.sessionGone ? 'lost its session' : 'lost the connection';
  }

  /** An HTTP session the server no longer knows: never used again; the next one counts as a re-initialisation. */
  private dropSession(session: LiveSession): void {
    if (this.state.kind === 'ready' && this.state.session === session) {
      this.state = { kind: 'idle' };
      if (this.server.transport !== 'stdio') this.httpSessionLost = true;
    }
    if (this.server.transport === 'stdio') {
      // Its pipe broke: the process is dying or useless. Killed, but its exit is left to report
      // itself (server:exited, the exit code for messages), as any other death.
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

  /** One respawn request, then a bounded wait for a fresh session. */
  private async freshSession(subject: messages.CallSubject, signal: AbortSignal | undefined, dead?: LiveSession): Promise<LiveSession> {
    if (this.isClosed()) throw this.closedError(subject, undefined, false);
    // A concurrent call may already have brought a fresh session back.
    const current = this.liveSession();
    if (current && current !== dead) return current;
    const lastExit = this.lastExit;
    if (this.everConnected) this.counters.respawnRequests++;
    const waiting = this.nextAttempt(this.context.options.respawnWaitMs, signal);
    this.requestConnect('call');
    let result: AttemptResult | 'timeout';
    try {
      result = await waiting;
    } catch {
      throw messages.callCancelled(subject);
    }
    if (result !== 'timeout' && result.kind === 'session') return result.session;
    if (result !== 'timeout' && result.kind === 'closed') throw this.closedError(subject, undefined, false);
    this.breaker.recordFailure();
    if (result === 'timeout') {
      if (this.server.transport === 'stdio') throw messages.serverExited(subject, this.context.options.respawnWaitMs, lastExit, this.lastStderr);
      throw messages.serverUnavailable(subject, { kind: 'refused', message: 'no session could be established yet (it is being reconnected)' });
    }
    if (result.kind === 'parked') {
      const state = this.state;
      throw messages.serverParked(subject, state.kind === 'parked' ? state.reason : 'reconnect budget spent', state.kind === 'parked' ? state.nextProbeAt : this.context.clock.now());
    }
    if (result.failure.kind === 'auth') throw this.authError(subject, result.failure.httpStatus);
    if (result.exitedAfterSession) {
      throw messages.serverExitedAgain(subject, { code: result.failure.exitCode ?? null, signal: result.failure.signal ?? null }, result.failure.stderrTail);
    }
    throw messages.serverUnavailable(subject, result.failure);
  }

  private async invoke(session: LiveSession, op: Operation, options: CallOptions): Promise<unknown> {
    const timeoutMs = options.timeoutMs ?? this.server.callTimeoutMs ?? this.context.options.callTimeoutMs;
    const requestOptions = {
      timeout: timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onProgress ? { onprogress: options.onProgress, resetTimeoutOnProgress: false } : {}),
    };
    const client = session.client;
    if (op.kind === 'resource') return this.succeeded(await client.readResource({ uri: op.uri }, requestOptions));
    if (op.kind === 'prompt') return this.succeeded(await client.getPrompt({ name: op.name, ...(op.args === undefined ? {} : { arguments: op.args }) }, requestOptions));
    // The SDK's callTool would validate output only for tools it listed itself (it never does here):
    // the check is ours, with the schema from discovery, compiled once per tool on first use.
    const result = (await client.request({ method: 'tools/call', params: { name: op.route.tool, arguments: op.args } }, CallToolResultSchema, requestOptions)) as CallToolResult;
    if (result.isError && this.context.options.countToolErrors) this.breaker.recordFailure();
    else this.succeeded(result);
    checkStructuredResult(op.route, result, this.subject(op.route.tool));
    return result;
  }

  /** A request answered: the session is proven and the breaker hears of a success. */
  private succeeded<T>(result: T): T {
    this.breaker.recordSuccess();
    this.proven();
    return result;
  }

  private isReplayable(op: Operation): boolean {
    const replay = this.context.options.replay;
    if (replay === 'always') return true;
    if (replay === 'never') return false;
    // Reading a resource or fetching a prompt changes nothing: both are read-only by nature.
    if (op.kind !== 'tool') return true;
    return op.route.annotations?.readOnlyHint === true || op.route.annotations?.idempotentHint === true;
  }

  /** AUTH_REQUIRED, with the authorization URL when a code flow is waiting for the user. */
  private authError(subject: messages.CallSubject, status: number | undefined): McpSupervisorError {
    return messages.authRequired(subject, status, this.context.pendingAuthorization?.());
  }

  /** The error of a final failure, counting infrastructure failures on the breaker. */
  private failure(reason: FailReason, session: LiveSession, error: unknown, delivery: Delivery, subject: messages.CallSubject, options: CallOptions): McpSupervisorError {
    switch (reason) {
      case 'cancelled':
        return messages.callCancelled(subject);
      case 'timeout': {
        this.breaker.recordFailure();
        const timeoutMs = options.timeoutMs ?? this.server.callTimeoutMs ?? this.context.options.callTimeoutMs;
        return messages.callTimeout(subject, timeoutMs, mayHaveRun(delivery));
      }
      case 'auth':
        return this.authError(subject, delivery.httpStatus ?? httpStatusOf(error));
      case 'rpc':
        return error instanceof McpError ? messages.protocolError(subject, error.message, error.code) : messages.protocolError(subject, String(error));
      case 'rejected':
        return error instanceof NotMcpAnswerError ? messages.notMcpAnswer(subject, error.message) : messages.requestRejected(subject, delivery.httpStatus ?? 400);
      case 'unreachable':
      case 'unreachable-after-replay':
        this.breaker.recordFailure();
        this.dropSession(session);
        return messages.serverUnavailable(subject, { kind: 'refused', message: 'the server could not be reached' }, reason === 'unreachable-after-replay');
      case 'exited-again-not-run':
        this.breaker.recordFailure();
        return messages.serverExitedAgain(subject, session.exit, session.stderrTail());
      case 'exited-again-during-replay':
        this.breaker.recordFailure();
        return messages.serverExitedAgain(subject, session.exit, session.stderrTail(), true);
      case 'lost-again-not-run':
        this.breaker.recordFailure();
        if (delivery.sessionLost) this.dropSession(session);
        return messages.sessionLostAgain(subject, false);
      case 'lost-again-maybe-run':
        this.breaker.recordFailure();
        return messages.sessionLostAgain(subject, true);
    }
  }

  /**
   * Connects now unless a session is live (or being made, or parked); resolves once that attempt
   * settled, whatever its outcome (a warm-up never throws: a call will report what went wrong).
   */
  async warmUp(): Promise<void> {
    if (this.isClosed() || this.liveSession() || this.state.kind === 'parked') return;
    const settled = this.nextAttempt(this.connectTimeoutMs() + 1000, undefined);
    this.requestConnect('warm-up');
    await settled.catch(() => undefined);
  }

  /** Sends `notifications/roots/list_changed` on the live session, if any; true when sent. */
  async notifyRootsChanged(): Promise<boolean> {
    const session = this.liveSession();
    if (!session) return false;
    try {
      await session.client.sendRootsListChanged();
      return true;
    } catch {
      return false;
    }
  }

  // ------------------------------------------------------------------ list_changed

  /**
   * A `…/list_changed` notification: re-list that kind after a debounce, one refresh at a time; a
   * notification that arrives while a refresh runs makes it run once more afterwards (it may have
   * listed before the change).
   */
  private scheduleRefresh(kind: ListKind): void {
    const refresh = this.refreshes[kind];
    this.context.clock.clearTimeout(refresh.timer);
    refresh.timer = this.context.clock.setTimeout(() => {
      refresh.timer = undefined;
      if (refresh.running) {
        refresh.again = true;
        return;
      }
      refresh.running = this.relist(kind).finally(() => {
        refresh.running = undefined;
        if (refresh.again) {
          refresh.again = false;
          this.scheduleRefresh(kind);
        }
      });
    }, this.context.options.listChangedDebounceMs);
  }

  private async relist(kind: ListKind): Promise<void> {
    const session = this.liveSession();
    if (!session) return;
    const options = { timeout: this.context.options.callTimeoutMs };
    const client = session.client;
    try {
      let lists: CatalogLists;
      if (kind === 'tools') {
        lists = {
          tools: await listAllPages<Tool>('tools/list', async (cursor) => {
            const result = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, options);
            return { items: result.tools, nextCursor: result.nextCursor };
          }),
        };
      } else if (kind === 'prompts') {
        lists = {
          prompts: await listAllPages<Prompt>('prompts/list', async (cursor) => {
            const result = await client.request({ method: 'prompts/list', params: cursor === undefined ? {} : { cursor } }, ListPromptsResultSchema, options);
            return { items: result.prompts, nextCursor: result.nextCursor };
          }),
        };
      } else {
        const resources = await listAllPages<Resource>('resources/list', async (cursor) => {
          const result = await client.request({ method: 'resources/list', params: cursor === undefined ? {} : { cursor } }, ListResourcesResultSchema, options);
          return { items: result.resources, nextCursor: result.nextCursor };
        });
        const resourceTemplates = await listAllPages<ResourceTemplate>('resources/templates/list', async (cursor) => {
          const result = await client.request({ method: 'resources/templates/list', params: cursor === undefined ? {} : { cursor } }, ListResourceTemplatesResultSchema, options);
          return { items: result.resourceTemplates, nextCursor: result.nextCursor };
        }).catch(() => undefined);
        lists = { resources, ...(resourceTemplates === undefined ? {} : { resourceTemplates }) };
      }
      // The limits discovery applies hold for a refreshed list too: over them, the old list stays.
      if (!withinLimits(lists, this.context.options.maxCatalogItems ?? DEFAULT_MAX_CATALOG_ITEMS, this.context.options.maxSchemaDepth ?? DEFAULT_MAX_SCHEMA_DEPTH)) return;
      if (this.state.kind !== 'closed') this.context.listsChanged(lists);
    } catch {
      // The next notification or discovery will try again; a failed refresh keeps the old list.
    }
  }

  // ------------------------------------------------------------------ lifecycle

  /** Counters and state for `host.stats()`. */
  stats(): SupervisorStats {
    const state = this.state;
    const session = this.liveSession();
    return {
      server: this.server.name,
      profiles: this.context.profiles(),
      state: state.kind,
      ...(state.kind === 'parked' ? { nextProbeAt: state.nextProbeAt, parkReason: state.reason } : {}),
      ...this.counters,
      breaker: this.breaker.state,
      breakerFailures: this.breaker.failures,
      attemptsSinceProven: this.attemptsSinceProven,
      ...(session?.pid === undefined ? {} : { pid: session.pid }),
    };
  }

  /** Ends the session (stdio kill ladder to the whole group) and the loop. */
  /**
   * The error for a call that met a closed supervisor. Closed by the host: HOST_CLOSED. Closed by a
   * reload of the profile: the host is fine, the server is being restarted — a call that was not
   * sent gets RECONNECTING (retry it), one that was running gets OUTCOME_UNCERTAIN unless it is
   * safe to repeat.
   */
  private closedError(subject: messages.CallSubject, op: Operation | undefined, inFlight: boolean): McpSupervisorError {
    if (this.closeReason === 'host') return messages.hostClosed(subject, inFlight);
    if (inFlight && op && !this.isReplayable(op)) return messages.outcomeUncertain(subject, { what: 'was restarted by a reload of its profile' });
    return messages.reloading(subject, inFlight);
  }

  /** The HTTP server lost the last session: the next one counts as a re-initialisation. */
  private httpSessionLost = false;

  /** Why the supervisor was closed (decides the error of calls that meet the closed state). */
  private closeReason: 'host' | 'reload' = 'host';

  /**
   * Ends the session (stdio kill ladder to the whole group) and the loop. `reason` is `reload`
   * when the profile is being reloaded: calls still in flight are then not told the host closed.
   */
  async close(reason: 'host' | 'reload' = 'host'): Promise<void> {
    if (this.state.kind === 'closed') return;
    this.closeReason = reason;
    const session = this.liveSession() ?? (this.state.kind === 'ready' ? this.state.session : undefined);
    this.state = { kind: 'closed' };
    this.context.clock.clearTimeout(this.probeTimer);
    for (const refresh of Object.values(this.refreshes)) this.context.clock.clearTimeout(refresh.timer);
    this.wake.abort();
    this.closing.abort(new Error('the host is closing'));
    this.settleWaiters({ kind: 'closed' });
    // Queued calls are not dropped (their promises would never settle): each one runs, sees
    // the closed state and fails with HOST_CLOSED.
    await session?.close();
    await Promise.allSettled([...this.retiring].map((lost) => lost.kill()));
    await this.loop;
    this.discard(this.resumable);
    this.resumable = undefined;
    await Promise.allSettled([...this.discarding]);
  }
}
