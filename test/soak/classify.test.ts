import test from 'ava';
import { type CallOutcome, type CallRecord, type FaultLog, judge } from './classify.js';

function faults(log: { kills?: number[]; forgets?: number[]; reloads?: [number, number][]; closeStartedAt?: number } = {}): FaultLog {
  return {
    killsOf: () => log.kills ?? [],
    forgetsOf: () => log.forgets ?? [],
    reloadsOf: () => log.reloads ?? [],
    closeStartedAt: log.closeStartedAt,
  };
}

function call(outcome: CallOutcome, over: Partial<CallRecord> = {}): CallRecord {
  return { slot: 'p00/a', profile: 'p00', server: 'a', tool: 'slow', transport: 'stdio', replayable: false, origin: 'turn', start: 100_000, end: 101_000, cancelFired: false, outcome, ...over };
}

const error = (code: string, retryable: boolean, server = 'a'): CallOutcome => ({ kind: 'error', code, retryable, server, message: code });

test('an exit is legitimate only after a kill of the server', (t) => {
  t.true(judge(call(error('SERVER_EXITED', true)), faults({ kills: [90_000] })).ok);
  t.false(judge(call(error('SERVER_EXITED', true)), faults()).ok);
  t.false(judge(call(error('SERVER_EXITED', true), { transport: 'http' }), faults({ kills: [100_500] })).ok);
});

test('OUTCOME_UNCERTAIN needs a mid-call fault and a tool that is not replayed', (t) => {
  t.true(judge(call(error('OUTCOME_UNCERTAIN', false)), faults({ kills: [100_500] })).ok);
  t.false(judge(call(error('OUTCOME_UNCERTAIN', false), { replayable: true, tool: 'slow_read' }), faults({ kills: [100_500] })).ok);
  t.false(judge(call(error('OUTCOME_UNCERTAIN', false)), faults({ kills: [50_000] })).ok);
  t.false(judge(call(error('OUTCOME_UNCERTAIN', true)), faults({ kills: [100_500] })).ok, 'must not be retryable');
});

test('CALL_TIMEOUT is wrong when the server was killed, forgot the session or was reloaded', (t) => {
  t.false(judge(call(error('CALL_TIMEOUT', true)), faults({ kills: [100_200] })).ok);
  t.false(judge(call(error('CALL_TIMEOUT', true), { transport: 'http' }), faults({ forgets: [100_200] })).ok);
  t.false(judge(call(error('CALL_TIMEOUT', true)), faults({ reloads: [[100_100, 100_300]] })).ok);
  const live = judge(call(error('CALL_TIMEOUT', true)), faults());
  t.true(live.ok);
  t.true(live.warning);
});

test('HOST_CLOSED only after close(); CANCELLED only after an abort', (t) => {
  t.false(judge(call(error('HOST_CLOSED', true)), faults({ reloads: [[100_100, 100_300]] })).ok);
  t.true(judge(call(error('HOST_CLOSED', true)), faults({ closeStartedAt: 100_500 })).ok);
  t.false(judge(call(error('CANCELLED', true)), faults()).ok);
  t.true(judge(call(error('CANCELLED', true), { cancelFired: true }), faults()).ok);
});

test('a listening HTTP server is never unreachable', (t) => {
  const http = { transport: 'http' as const, server: 'h', slot: 'p02/h' };
  t.false(judge(call(error('SERVER_UNREACHABLE', true, 'h'), http), faults({ forgets: [100_500] })).ok);
  t.false(judge(call(error('SERVER_UNREACHABLE', true, 'h'), http), faults({ forgets: [99_000] })).ok);
  t.true(judge(call(error('SERVER_UNREACHABLE', true)), faults({ kills: [99_000] })).ok);
});

test('results, foreign errors and misattributed errors', (t) => {
  t.true(judge(call({ kind: 'ok' }), faults()).ok);
  t.true(judge(call({ kind: 'tool-error', text: 'x' }, { tool: 'fail' }), faults()).ok);
  t.false(judge(call({ kind: 'tool-error', text: 'x' }, { tool: 'echo' }), faults()).ok);
  t.false(judge(call({ kind: 'foreign', message: 'TypeError' }), faults()).ok);
  t.false(judge(call({ kind: 'bad-result', message: 'sum' }), faults()).ok);
  t.false(judge(call(error('SERVER_EXITED', true, 'b')), faults({ kills: [100_500] })).ok);
  t.false(judge(call(error('UNKNOWN_TOOL', false)), faults()).ok);
});
