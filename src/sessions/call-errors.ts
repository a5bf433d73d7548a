/**
 * What the caller of a supervised request hears, as pure functions of what is known: how an
 * attempt's error is classed for the call policy, and which error a final verdict (or a wait for a
 * session that brought none) becomes — with whether it counts on the breaker and whether the
 * session must be given up. The call path applies those two effects; nothing here has any.
 */
import { ProtocolError, SdkError, SdkErrorCode, UnauthorizedError } from '@modelcontextprotocol/client';
import { DEADLINE } from '../deadline.js';
import type { McpSupervisorError } from '../errors.js';
import { httpStatusOf } from '../connection/classify.js';
import { type Delivery, mayHaveRun } from '../connection/delivery.js';
import { NotMcpAnswerError, RESPONSE_LOST_CODE } from '../connection/http-transport.js';
import type { ServerFailure } from '../discovery/types.js';
import type { ExitInfo } from '../process/stdio-transport.js';
import type { ErrorClass, FailReason } from './call-policy.js';
import type { AttemptResult } from './connect-loop.js';
import * as messages from './messages.js';
import type { Operation, SessionOptions } from './types.js';

/** How errors name a request: the tool, or what was read or fetched. */
export function labelOf(op: Operation): string {
  if (op.kind === 'tool') return op.route.tool;
  return op.kind === 'resource' ? `resources/read ${op.uri}` : `prompts/get ${op.name}`;
}

/** May `op` be repeated after it may have run? */
export function isReplayable(op: Operation, replay: SessionOptions['replay']): boolean {
  if (replay === 'always') return true;
  if (replay === 'never') return false;
  // Reading a resource or fetching a prompt changes nothing: both are read-only by nature.
  if (op.kind !== 'tool') return true;
  return op.route.annotations?.readOnlyHint === true || op.route.annotations?.idempotentHint === true;
}

/** What an attempt's error tells by itself; delivery and liveness tell the rest. */
export function classifyError(error: unknown, signal: AbortSignal | undefined): ErrorClass {
  if (signal?.aborted) return 'cancelled';
  if (error instanceof UnauthorizedError) return 'auth';
  const status = httpStatusOf(error);
  if (status === 401 || status === 403) return 'auth';
  if (error instanceof ProtocolError) return error.code === RESPONSE_LOST_CODE ? 'transport' : 'rpc';
  if (error instanceof SdkError) {
    if (error.code === SdkErrorCode.RequestTimeout) return 'timeout';
    if (error.code === SdkErrorCode.ConnectionClosed || error.code === SdkErrorCode.SendFailed || error.code === SdkErrorCode.NotConnected) return 'transport';
    // HTTP answers are judged by their delivery record; anything else the SDK refused locally
    // (an invalid result, an `input_required` round bound, a method the era lacks) is an answer.
    return error.code.startsWith('CLIENT_HTTP_') ? 'transport' : 'rpc';
  }
  return 'transport';
}

/** How an HTTP request was lost, for the model's text. */
export function lostWhat(delivery: Delivery): string {
  if (delivery.state === 'unknown' && delivery.httpStatus !== undefined) return `answered HTTP ${delivery.httpStatus}`;
  return delivery.sessionGone ? 'lost its session' : 'lost the connection';
}

/** AUTH_REQUIRED, with the authorization URL when a code flow is waiting for the user. */
export function authError(subject: messages.CallSubject, status: number | undefined, authorizationUrl: () => string | undefined): McpSupervisorError {
  return messages.authRequired(subject, status, authorizationUrl());
}

/** The error a final verdict becomes, and its two effects. */
export interface FinalFailure {
  error: McpSupervisorError;
  /** An infrastructure failure: the breaker counts it. */
  breakerFailure: boolean;
  /** The session is of no more use (unreachable, or lost by the server). */
  dropSession: boolean;
}

/** What is known when an attempt failed for good. */
export interface FailureContext {
  subject: messages.CallSubject;
  error: unknown;
  delivery: Delivery;
  /** The call's timeout (ms), for CALL_TIMEOUT. */
  timeoutMs: number;
  /** How the session's stdio process exited, and its stderr (read only when it matters). */
  exit: ExitInfo | undefined;
  stderrTail(): string;
  /** The authorization URL of a code flow waiting for the user, if any. */
  authorizationUrl(): string | undefined;
}

/** The error of a final failure ({@link decide}'s `fail` verdict). */
export function finalFailure(reason: FailReason, context: FailureContext): FinalFailure {
  const { subject, error, delivery } = context;
  const infrastructure = (failure: McpSupervisorError, dropSession = false): FinalFailure => ({ error: failure, breakerFailure: true, dropSession });
  const refusal = (failure: McpSupervisorError): FinalFailure => ({ error: failure, breakerFailure: false, dropSession: false });
  switch (reason) {
    case 'cancelled':
      return refusal(messages.callCancelled(subject));
    case 'timeout':
      return infrastructure(messages.callTimeout(subject, context.timeoutMs, mayHaveRun(delivery)));
    case 'auth':
      return refusal(authError(subject, delivery.httpStatus ?? httpStatusOf(error), context.authorizationUrl));
    case 'rpc':
      return refusal(rpcFailure(subject, error));
    case 'rejected':
      return refusal(error instanceof NotMcpAnswerError ? messages.notMcpAnswer(subject, error.message) : messages.requestRejected(subject, delivery.httpStatus ?? 400));
    case 'unreachable':
    case 'unreachable-after-replay':
      return infrastructure(messages.serverUnavailable(subject, { kind: 'refused', message: 'the server could not be reached' }, reason === 'unreachable-after-replay'), true);
    case 'exited-again-not-run':
      return infrastructure(messages.serverExitedAgain(subject, context.exit, context.stderrTail()));
    case 'exited-again-during-replay':
      return infrastructure(messages.serverExitedAgain(subject, context.exit, context.stderrTail(), true));
    case 'lost-again-not-run':
      return infrastructure(messages.sessionLostAgain(subject, false), delivery.sessionLost === true);
    case 'lost-again-maybe-run':
      return infrastructure(messages.sessionLostAgain(subject, true));
  }
}

/** JSON-RPC code of "the request needs a client capability the client did not declare" (2026-07-28). */
const MISSING_CLIENT_CAPABILITY_CODE = -32021;

/** The error of a request the server answered with an error (or the SDK could not complete). */
function rpcFailure(subject: messages.CallSubject, error: unknown): McpSupervisorError {
  if (error instanceof SdkError && error.code === SdkErrorCode.InputRequiredRoundsExceeded) {
    const rounds = (error.data as { rounds?: unknown } | undefined)?.rounds;
    return messages.inputRoundsExceeded(subject, typeof rounds === 'number' ? rounds : 0);
  }
  if (error instanceof ProtocolError && error.code === MISSING_CLIENT_CAPABILITY_CODE) {
    // The server says which request it could not send ("… (elicitation/create) …"), quoted bounded.
    const method = /\((elicitation\/create|sampling\/createMessage|roots\/list)\)/.exec(error.message)?.[1];
    return messages.inputUnavailable(subject, method ?? 'a capability the host does not declare', error.code);
  }
  if (error instanceof ProtocolError) return messages.protocolError(subject, error.message, error.code);
  return messages.protocolError(subject, error instanceof Error ? error.message : String(error));
}

/** What is known when a wait for a fresh session brought none. */
export interface NoSessionContext {
  subject: messages.CallSubject;
  transport: 'stdio' | 'http' | 'sse';
  respawnWaitMs: number;
  /** How the session before died (read before the wait), and its stderr. */
  lastExit: ExitInfo | undefined;
  lastStderr: string | undefined;
  /** The parked state's reason and next probe, when parked now. */
  parked: { reason: string; nextProbeAt: number } | undefined;
  now: number;
  authorizationUrl(): string | undefined;
}

/** The error of a call whose wait for a fresh session ended without one (the loop is not closed). */
export function noSessionError(result: Exclude<AttemptResult<unknown>, { kind: 'session' } | { kind: 'closed' }> | typeof DEADLINE, context: NoSessionContext): McpSupervisorError {
  const { subject } = context;
  if (result === DEADLINE) {
    // An exited server is never reported as a timeout: the text names the exit.
    if (context.transport === 'stdio') return messages.serverExited(subject, context.respawnWaitMs, context.lastExit, context.lastStderr);
    return messages.serverUnavailable(subject, { kind: 'refused', message: 'no session could be established yet (it is being reconnected)' });
  }
  if (result.kind === 'parked') return messages.serverParked(subject, context.parked?.reason ?? 'reconnect budget spent', context.parked?.nextProbeAt ?? context.now);
  const failure: ServerFailure = result.failure;
  if (failure.kind === 'auth') return authError(subject, failure.httpStatus, context.authorizationUrl);
  if (result.exitedAfterSession) return messages.serverExitedAgain(subject, { code: failure.exitCode ?? null, signal: failure.signal ?? null }, failure.stderrTail);
  return messages.serverUnavailable(subject, failure);
}
