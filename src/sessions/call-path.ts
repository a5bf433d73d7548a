/**
 * The call path of one supervised server: every tool call, resource read and prompt fetch goes
 * through the same gate, the same queue and the same single retry loop.
 *
 * - gate: closed, cancelled, breaker, parked — a refused request never reaches a server;
 * - pre-call: no live session → one respawn request, wait up to `respawnWaitMs` for a *fresh*
 *   session, then call once; a respawn that dies at once → SERVER_EXITED_AGAIN;
 * - retry loop: a failed attempt is judged by the pure call policy ({@link decide}) from the facts
 *   the transport recorded (delivery) and what is known of the session, never from an error's
 *   wording: resend what provably never ran, replay once what may have run and is safe to repeat
 *   (a mid-call death, a lost HTTP answer stream), otherwise fail with an error saying which it was.
 *   An exited or unreachable server is never reported as a timeout.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Tool as SdkTool } from '@modelcontextprotocol/client';
import { AsyncResource } from 'node:async_hooks';
import PQueue from 'p-queue';
import type { ServerConfig } from '../config/types.js';
import { DEADLINE } from '../deadline.js';
import { type McpSupervisorError, isMcpSupervisorError } from '../errors.js';
import { type Delivery, mayHaveRun, trackDelivery } from '../connection/delivery.js';
import type { ExitInfo } from '../process/stdio-transport.js';
import type { CallOptions } from '../readiness/types.js';
import { checkStructuredResult } from './output-validation.js';
import type { CircuitBreaker } from './breaker.js';
import { type Verdict, decide } from './call-policy.js';
import { classifyError, finalFailure, isReplayable, labelOf, lostWhat, noSessionError } from './call-errors.js';
import type { ConnectLoop } from './connect-loop.js';
import type { LiveSession } from './live-session.js';
import * as messages from './messages.js';
import { type CallTraceContext, callChannel, traceAttempt } from '../observability/channels.js';
import type { Operation, SupervisorContext, SupervisorCounters } from './types.js';

/** What the call path uses of its supervisor. */
export interface CallPathDeps {
  server: ServerConfig;
  context: SupervisorContext;
  breaker: CircuitBreaker;
  loop: ConnectLoop<LiveSession>;
  counters: SupervisorCounters;
  /** How the last session died, and its stderr, for SERVER_EXITED. */
  lastDeath(): { exit: ExitInfo | undefined; stderr: string | undefined };
  /** Stops using a session: the server lost it, or its pipe broke. */
  dropSession(session: LiveSession): void;
}

/** One failed attempt and where the call stands. */
interface FailedAttempt {
  subject: messages.CallSubject;
  session: LiveSession;
  op: Operation;
  options: CallOptions;
  error: unknown;
  delivery: Delivery;
  resent: boolean;
  replayed: boolean;
}

/** The call path of one server. */
export class CallPath {
  private readonly queue: PQueue;

  constructor(private readonly deps: CallPathDeps) {
    this.queue = new PQueue({ concurrency: deps.context.options.maxConcurrentCalls });
  }

  /** Runs a supervised request. Throws McpSupervisorError (never a raw SDK error). */
  async run<T>(op: Operation, options: CallOptions): Promise<T> {
    const { breaker, loop, context } = this.deps;
    const subject = this.subject(op);
    if (loop.state.kind === 'closed') throw this.closedError(subject, op, false);
    if (options.signal?.aborted) throw messages.callCancelled(subject);
    const admission = breaker.admit();
    if (!admission.allowed) throw messages.breakerOpen(subject, context.options.breaker.failureThreshold, admission.probeAt, context.clock.now());
    const state = loop.state;
    if (state.kind === 'parked') {
      if (admission.probe) {
        // Half-open probe on a parked server: revive now, but never write into a dead pipe. The
        // probe stays in flight until that reconnect's outcome settles the breaker.
        loop.request('signal');
        throw messages.reconnecting(subject);
      }
      throw messages.serverParked(subject, state.reason, state.nextProbeAt);
    }
    this.deps.counters.calls++;
    try {
      // A traced call runs in its caller's async context even when it waited in the queue (the
      // queue starts it from another call's continuation): a tracer's parent span is the caller's.
      const job = (): Promise<unknown> => this.admitted(op, options, admission.probe);
      return (await this.queue.add(callChannel.hasSubscribers ? AsyncResource.bind(job) : job)) as T;
    } catch (error) {
      if (isMcpSupervisorError(error)) throw error;
      throw messages.protocolError(subject, error instanceof Error ? error.message : String(error));
    }
  }

  /**
   * The error for a call that met a closed supervisor. Closed by the host: HOST_CLOSED. Closed by a
   * reload of the profile: the host is fine, the server is being restarted — a call that was not
   * sent gets RECONNECTING (retry it), one that was running gets OUTCOME_UNCERTAIN unless it is
   * safe to repeat.
   */
  private closedError(subject: messages.CallSubject, op: Operation | undefined, inFlight: boolean): McpSupervisorError {
    const state = this.deps.loop.state;
    if (state.kind !== 'closed' || state.reason === 'host') return messages.hostClosed(subject, inFlight);
    if (inFlight && op && !isReplayable(op, this.deps.context.options.replay)) return messages.outcomeUncertain(subject, { what: 'was restarted by a reload of its profile' });
    return messages.reloading(subject, inFlight);
  }

  private subject(op?: Operation): messages.CallSubject {
    const tool = op === undefined ? undefined : labelOf(op);
    return { server: this.deps.server.name, profile: this.deps.context.profiles().join(', '), ...(tool === undefined ? {} : { tool }) };
  }

  /** A request through the queue: a session, then the retry loop. */
  private async admitted(op: Operation, options: CallOptions, probe: boolean): Promise<unknown> {
    const subject = this.subject(op);
    let verdictPending = probe;
    try {
      // Queued behind other calls while the host closed: never start anything now.
      if (this.deps.loop.state.kind === 'closed') throw this.closedError(subject, op, false);
      if (options.signal?.aborted) throw messages.callCancelled(subject);
      let session = this.deps.loop.live();
      if (!session) {
        if (probe) {
          // Half-open with no live session: request one reconnect, do not write into a dead pipe.
          // The probe stays in flight: the reconnect's outcome is its verdict.
          verdictPending = false;
          this.deps.loop.request('signal');
          throw messages.reconnecting(subject);
        }
        session = await this.freshSession(subject, options.signal);
      }
      return await this.retryLoop(session, op, options);
    } finally {
      // A probe that ended without a verdict (cancelled, rejected by the server, host closed)
      // frees the half-open slot; otherwise the breaker would wait for a verdict forever.
      if (verdictPending) this.deps.breaker.releaseProbe();
    }
  }

  /**
   * The one retry loop of every request: sends it, and on failure does what {@link decide} says
   * (see {@link judge}); a call is resent at most once and replayed at most once.
   */
  private async retryLoop(first: LiveSession, op: Operation, options: CallOptions): Promise<unknown> {
    const subject = this.subject(op);
    let session = first;
    let resent = false;
    let replayed = false;
    for (let attempt = 1; ; attempt++) {
      const current = session;
      const traced = (): CallTraceContext => this.traceContext(op, current, attempt);
      const { promise, delivery } = trackDelivery(() => traceAttempt(traced, (meta) => this.invoke(current, op, options, meta)));
      try {
        return await promise;
      } catch (error) {
        const verdict = this.judge({ subject, session, op, options, error, delivery, resent, replayed });
        if (verdict.action === 'replay') {
          this.deps.counters.replays++;
          replayed = true;
        } else resent = true;
        // A session the server lost meanwhile (dropped by another request's 404) is not reused
        // either; a stdio session whose pipe broke is dead even if its exit is not observed yet.
        if (verdict.freshSession || !session.alive) {
          this.deps.dropSession(session);
          session = await this.freshSession(subject, options.signal, session);
        }
      }
    }
  }

  /**
   * What a failed attempt means: throws the call's final error (counting it on the breaker and
   * giving the session up as {@link finalFailure} says), or returns the resend or replay to do.
   */
  private judge(attempt: FailedAttempt): Extract<Verdict, { action: 'resend' | 'replay' }> {
    const { subject, session, op, options, error, delivery } = attempt;
    const { breaker, server, context } = this.deps;
    if (isMcpSupervisorError(error)) throw error;
    if (this.deps.loop.state.kind === 'closed') throw this.closedError(subject, op, mayHaveRun(delivery));
    const tooLarge = delivery.tooLarge ?? session.connection.tooLarge;
    if (tooLarge !== undefined) {
      breaker.recordFailure();
      throw messages.messageTooLarge(subject, tooLarge, mayHaveRun(delivery));
    }
    const exited = server.transport === 'stdio' && (session.exit !== undefined || !session.alive);
    const replayable = isReplayable(op, context.options.replay);
    const verdict = decide({ transport: server.transport, error: classifyError(error, options.signal), delivery, exited, resent: attempt.resent, replayed: attempt.replayed, replayable });
    if (verdict.action === 'fail') {
      const final = finalFailure(verdict.reason, {
        subject,
        error,
        delivery,
        timeoutMs: this.timeoutOf(options),
        exit: session.exit,
        stderrTail: () => session.stderrTail(),
        authorizationUrl: () => context.pendingAuthorization?.(),
      });
      if (final.breakerFailure) breaker.recordFailure();
      if (final.dropSession) this.deps.dropSession(session);
      throw final.error;
    }
    if (verdict.action === 'uncertain') {
      breaker.recordFailure();
      // Reconnect in the background for the next call; this one may have run.
      if (exited) this.deps.loop.request('signal');
      throw messages.outcomeUncertain(subject, verdict.cause === 'exited' ? { exit: session.exit } : { what: lostWhat(delivery) });
    }
    return verdict;
  }

  /** One respawn request, then a bounded wait for a fresh session (not `dead`). */
  private async freshSession(subject: messages.CallSubject, signal: AbortSignal | undefined, dead?: LiveSession): Promise<LiveSession> {
    const { loop, context, server } = this.deps;
    if (loop.state.kind === 'closed') throw this.closedError(subject, undefined, false);
    // A concurrent call may already have brought a fresh session back.
    const current = loop.live();
    if (current && current !== dead) return current;
    const lastExit = this.deps.lastDeath().exit;
    if (loop.established > 0) this.deps.counters.respawnRequests++;
    const waiting = loop.nextAttempt(context.options.respawnWaitMs, signal);
    loop.request('call');
    let result: Awaited<typeof waiting>;
    try {
      result = await waiting;
    } catch {
      throw messages.callCancelled(subject);
    }
    if (result !== DEADLINE && result.kind === 'session') return result.session;
    if (result !== DEADLINE && result.kind === 'closed') throw this.closedError(subject, undefined, false);
    this.deps.breaker.recordFailure();
    const state = loop.state;
    throw noSessionError(result, {
      subject,
      transport: server.transport,
      respawnWaitMs: context.options.respawnWaitMs,
      lastExit,
      lastStderr: this.deps.lastDeath().stderr,
      parked: state.kind === 'parked' ? { reason: state.reason, nextProbeAt: state.nextProbeAt } : undefined,
      now: context.clock.now(),
      authorizationUrl: () => context.pendingAuthorization?.(),
    });
  }

  private timeoutOf(options: CallOptions): number {
    return options.timeoutMs ?? this.deps.server.callTimeoutMs ?? this.deps.context.options.callTimeoutMs;
  }

  /** What a trace of one attempt says (built only when someone listens). */
  private traceContext(op: Operation, session: LiveSession, attempt: number): CallTraceContext {
    const connection = session.connection;
    const sessionId = connection.sessionId;
    const protocolVersion = connection.negotiatedVersion;
    return {
      profile: op.profile ?? '',
      server: this.deps.server.name,
      method: op.kind === 'tool' ? 'tools/call' : op.kind === 'resource' ? 'resources/read' : 'prompts/get',
      ...(op.kind === 'tool' ? { tool: op.route.tool } : op.kind === 'prompt' ? { tool: op.name } : { uri: op.uri }),
      attempt,
      transport: this.deps.server.transport,
      ...(sessionId === undefined ? {} : { sessionId }),
      ...(protocolVersion === undefined ? {} : { protocolVersion }),
      meta: {},
    };
  }

  /** One attempt on `session`; `meta` (from a tracer) goes into the request's `params._meta`. */
  private async invoke(session: LiveSession, op: Operation, options: CallOptions, meta?: Record<string, unknown>): Promise<unknown> {
    const requestOptions = {
      timeout: this.timeoutOf(options),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onProgress ? { onprogress: options.onProgress, resetTimeoutOnProgress: false } : {}),
    };
    const client = session.client;
    // The 2026-07-28 era has no `logging/setLevel`: the host's level travels with each request.
    const envelope = session.connection.requestMeta;
    const merged = envelope === undefined ? meta : { ...envelope, ...meta };
    const withMeta = merged === undefined ? {} : { _meta: merged };
    if (op.kind === 'resource') return this.succeeded(await client.readResource({ uri: op.uri, ...withMeta }, requestOptions));
    if (op.kind === 'prompt') return this.succeeded(await client.getPrompt({ name: op.name, ...(op.args === undefined ? {} : { arguments: op.args }), ...withMeta }, requestOptions));
    // The SDK's callTool, given the tool's input schema from discovery: in the 2026-07-28 era over
    // HTTP it mirrors the `x-mcp-header` parameters into `Mcp-Param-*` headers (SEP-2243). Without
    // its output schema: the check of structured results is ours, compiled once per tool on first
    // use, with the host's own error wording.
    const toolDefinition = { name: op.route.tool, inputSchema: op.route.inputSchema ?? { type: 'object' } } as SdkTool;
    const result = (await client.callTool({ name: op.route.tool, arguments: op.args, ...withMeta }, { ...requestOptions, toolDefinition })) as unknown as CallToolResult;
    if (result.isError && this.deps.context.options.countToolErrors) this.deps.breaker.recordFailure();
    else this.succeeded(result);
    checkStructuredResult(op.route, result, this.subject(op));
    return result;
  }

  /** A request answered: the session is proven and the breaker hears of a success. */
  private succeeded<T>(result: T): T {
    this.deps.breaker.recordSuccess();
    this.deps.loop.proven();
    return result;
  }
}
