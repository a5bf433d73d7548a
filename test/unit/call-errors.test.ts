/**
 * What the caller of a supervised request hears: the error of every final verdict with its two
 * effects (breaker, session), the error of a wait for a session that brought none, how an
 * attempt's error is classed for the call policy, and which operations may be replayed.
 */
import test from 'ava';
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, SdkHttpError, UnauthorizedError } from '@modelcontextprotocol/client';
import type { Delivery } from '../../src/connection/delivery.js';
import { NotMcpAnswerError, RESPONSE_LOST_CODE } from '../../src/connection/http-transport.js';
import { DEADLINE } from '../../src/deadline.js';
import type { ErrorCode as SupervisorErrorCode } from '../../src/errors.js';
import { type FailureContext, type NoSessionContext, classifyError, finalFailure, isReplayable, lostWhat, noSessionError } from '../../src/sessions/call-errors.js';
import type { FailReason } from '../../src/sessions/call-policy.js';
import type { Operation } from '../../src/sessions/types.js';

const subject = { server: 'fx', profile: 'p', tool: 'write' };

function context(delivery: Delivery, error: unknown = new Error('socket hang up')): FailureContext {
  return { subject, error, delivery, timeoutMs: 1234, exit: { code: 3, signal: null }, stderrTail: () => 'boom', authorizationUrl: () => 'https://auth.example/authorize' };
}

/** Every final verdict: the error code, whether the breaker counts it, whether the session is given up. */
const finals: [FailReason, Delivery, SupervisorErrorCode, boolean, boolean][] = [
  ['cancelled', { state: 'accepted' }, 'CANCELLED', false, false],
  ['timeout', { state: 'accepted' }, 'CALL_TIMEOUT', true, false],
  ['auth', { state: 'rejected', httpStatus: 401 }, 'AUTH_REQUIRED', false, false],
  ['rpc', { state: 'accepted' }, 'PROTOCOL_ERROR', false, false],
  ['rejected', { state: 'rejected', httpStatus: 415 }, 'PROTOCOL_ERROR', false, false],
  ['unreachable', { state: 'refused' }, 'SERVER_UNREACHABLE', true, true],
  ['unreachable-after-replay', { state: 'refused' }, 'SERVER_UNREACHABLE', true, true],
  ['exited-again-not-run', { state: 'refused' }, 'SERVER_EXITED_AGAIN', true, false],
  ['exited-again-during-replay', { state: 'accepted' }, 'SERVER_EXITED_AGAIN', true, false],
  ['lost-again-not-run', { state: 'rejected', httpStatus: 404, sessionLost: true }, 'RECONNECTING', true, true],
  ['lost-again-maybe-run', { state: 'accepted', streamLost: true }, 'RECONNECTING', true, false],
];

for (const [reason, delivery, code, breakerFailure, dropSession] of finals) {
  test(`finalFailure: ${reason} → ${code}${breakerFailure ? ', counted on the breaker' : ''}${dropSession ? ', session given up' : ''}`, (t) => {
    const final = finalFailure(reason, context(delivery));
    t.is(final.error.code, code);
    t.is(final.breakerFailure, breakerFailure);
    t.is(final.dropSession, dropSession);
  });
}

test('finalFailure: every reason of the call policy is covered', (t) => {
  const reasons: FailReason[] = ['cancelled', 'timeout', 'rpc', 'auth', 'unreachable', 'unreachable-after-replay', 'rejected', 'exited-again-not-run', 'exited-again-during-replay', 'lost-again-not-run', 'lost-again-maybe-run'];
  t.deepEqual(finals.map(([reason]) => reason).sort(), reasons.sort());
});

test('finalFailure: what the texts say — the timeout named, the exit and stderr, the auth URL kept for the host, a lost retry that never ran keeps its session unless the server lost it', (t) => {
  t.regex(finalFailure('timeout', context({ state: 'accepted' })).error.message, /1234 ms/);
  const exited = finalFailure('exited-again-during-replay', context({ state: 'accepted' })).error;
  t.regex(exited.message, /exit code 3/);
  t.regex(exited.message, /boom/);
  t.is(finalFailure('auth', context({ state: 'rejected', httpStatus: 403 })).error.data?.['authorizationUrl'], 'https://auth.example/authorize');
  t.false(finalFailure('lost-again-not-run', context({ state: 'unsent' })).dropSession);
  const notMcp = finalFailure('rejected', context({ state: 'rejected', httpStatus: 200 }, new NotMcpAnswerError(200, 'text/html', '<html>'))).error;
  t.regex(notMcp.message, /did not answer as an MCP server/);
});

function waited(overrides: Partial<NoSessionContext> = {}): NoSessionContext {
  return { subject, transport: 'stdio', respawnWaitMs: 15_000, lastExit: { code: 1, signal: null }, lastStderr: 'dying', parked: undefined, now: 0, authorizationUrl: () => undefined, ...overrides };
}

test('noSessionError: no session in time is an exit on stdio (never a timeout), unreachable on HTTP', (t) => {
  const stdio = noSessionError(DEADLINE, waited());
  t.is(stdio.code, 'SERVER_EXITED');
  t.notRegex(stdio.message, /15000|15 000|timed? ?out/i);
  t.regex(stdio.message, /dying/);
  t.is(noSessionError(DEADLINE, waited({ transport: 'http' })).code, 'SERVER_UNREACHABLE');
});

test('noSessionError: parked (with its reason and next probe), auth, exited again after a first session, unavailable', (t) => {
  const parked = noSessionError({ kind: 'parked' }, waited({ parked: { reason: 'exited: 5 sessions', nextProbeAt: 60_000 } }));
  t.like(parked, { code: 'SERVER_PARKED', data: { reason: 'exited: 5 sessions', nextProbeAt: 60_000 } });
  t.like(noSessionError({ kind: 'parked' }, waited({ now: 7 })), { code: 'SERVER_PARKED', data: { reason: 'reconnect budget spent', nextProbeAt: 7 } });
  t.is(noSessionError({ kind: 'failure', failure: { kind: 'auth', message: '401', httpStatus: 401 }, exitedAfterSession: false }, waited()).code, 'AUTH_REQUIRED');
  t.is(noSessionError({ kind: 'failure', failure: { kind: 'exited', message: 'died', exitCode: 1 }, exitedAfterSession: true }, waited()).code, 'SERVER_EXITED_AGAIN');
  t.is(noSessionError({ kind: 'failure', failure: { kind: 'exited', message: 'died', exitCode: 1 }, exitedAfterSession: false }, waited()).code, 'SERVER_EXITED');
  t.is(noSessionError({ kind: 'failure', failure: { kind: 'refused', message: 'ECONNREFUSED' }, exitedAfterSession: false }, waited()).code, 'SERVER_UNREACHABLE');
});

test('classifyError: the caller aborting wins; 401/403 and OAuth are auth; SDK timeouts, lost connections and JSON-RPC errors; anything else is transport', (t) => {
  const aborted = AbortSignal.abort();
  const http = (status: number): SdkHttpError => new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `HTTP ${status}`, { status });
  t.is(classifyError(new ProtocolError(ProtocolErrorCode.InternalError, 'x'), aborted), 'cancelled');
  t.is(classifyError(new UnauthorizedError('no token'), undefined), 'auth');
  t.is(classifyError(http(403), undefined), 'auth');
  t.is(classifyError(http(502), undefined), 'transport');
  t.is(classifyError(new SdkError(SdkErrorCode.RequestTimeout, 'timeout'), undefined), 'timeout');
  t.is(classifyError(new SdkError(SdkErrorCode.ConnectionClosed, 'closed'), undefined), 'transport');
  t.is(classifyError(new ProtocolError(RESPONSE_LOST_CODE, 'lost'), undefined), 'transport');
  t.is(classifyError(new ProtocolError(ProtocolErrorCode.InvalidParams, 'bad'), undefined), 'rpc');
  t.is(classifyError(new SdkError(SdkErrorCode.InputRequiredRoundsExceeded, 'rounds'), undefined), 'rpc', 'an answer the SDK could not complete is an answer');
  t.is(classifyError(new Error('EPIPE'), undefined), 'transport');
});

test('isReplayable: always / never; otherwise resources and prompts, and tools marked read-only or idempotent', (t) => {
  const tool = (annotations?: { readOnlyHint?: boolean; idempotentHint?: boolean }): Operation => ({ kind: 'tool', route: { server: 'fx', tool: 't', ...(annotations ? { annotations } : {}) }, args: {} });
  const cases: [Operation, boolean][] = [
    [tool(), false],
    [tool({ readOnlyHint: true }), true],
    [tool({ idempotentHint: true }), true],
    [tool({ readOnlyHint: false, idempotentHint: false }), false],
    [{ kind: 'resource', uri: 'file:///a' }, true],
    [{ kind: 'prompt', name: 'p' }, true],
  ];
  for (const [op, idempotent] of cases) {
    t.is(isReplayable(op, 'idempotent'), idempotent);
    t.true(isReplayable(op, 'always'));
    t.false(isReplayable(op, 'never'));
  }
});

test('lostWhat: a 5xx answer is named, a forgotten session and a lost connection are told apart', (t) => {
  t.is(lostWhat({ state: 'unknown', httpStatus: 502 }), 'answered HTTP 502');
  t.is(lostWhat({ state: 'accepted', streamLost: true, sessionGone: true }), 'lost its session');
  t.is(lostWhat({ state: 'accepted', streamLost: true }), 'lost the connection');
});
