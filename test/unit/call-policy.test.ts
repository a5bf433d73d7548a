/**
 * The call policy (`decide`), row by row, as a decision table checked against every combination
 * of facts, and as properties. The named rows tell the rule of docs/ARCHITECTURE.md §7 case by case; the table
 * gives every combination its one expected verdict; the properties pin what must hold whatever the facts:
 * nothing that may have run is resent as if it had not, a replay happens only for tools safe to
 * repeat and only once, an exit is never a timeout, and every call ends within three attempts.
 */
import test from 'ava';
import fc from 'fast-check';
import type { DeliveryState } from '../../src/connection/delivery.js';
import { mayHaveRun } from '../../src/connection/delivery.js';
import { type ErrorClass, type FailureFacts, type Verdict, decide } from '../../src/sessions/call-policy.js';

const base: FailureFacts = {
  transport: 'http',
  error: 'transport',
  delivery: { state: 'accepted' },
  exited: false,
  resent: false,
  replayed: false,
  replayable: false,
};

const rows: [string, Partial<FailureFacts>, Verdict][] = [
  ['cancelled by the caller', { error: 'cancelled' }, { action: 'fail', reason: 'cancelled' }],
  ['HTTP 404/400 for the session: not processed → one resend on a new session', { error: 'transport', delivery: { state: 'rejected', httpStatus: 404, sessionLost: true } }, { action: 'resend', freshSession: true }],
  ['the resend lost its session too', { delivery: { state: 'rejected', httpStatus: 404, sessionLost: true }, resent: true }, { action: 'fail', reason: 'lost-again-not-run' }],
  ['a replay whose session was lost: one resend is still safe (the replay never ran)', { delivery: { state: 'rejected', httpStatus: 400, sessionLost: true }, replayed: true, replayable: true }, { action: 'resend', freshSession: true }],
  ['401 → auth', { error: 'auth', delivery: { state: 'rejected', httpStatus: 401 } }, { action: 'fail', reason: 'auth' }],
  ['a JSON-RPC error from the server', { error: 'rpc' }, { action: 'fail', reason: 'rpc' }],
  ['HTTP refused before connecting: unreachable, not run', { delivery: { state: 'refused' } }, { action: 'fail', reason: 'unreachable' }],
  ['HTTP refused on the replay: unreachable after a replay', { delivery: { state: 'refused' }, replayed: true, replayable: true }, { action: 'fail', reason: 'unreachable-after-replay' }],
  ['HTTP 415: rejected, not run', { delivery: { state: 'rejected', httpStatus: 415 } }, { action: 'fail', reason: 'rejected' }],
  ['a live HTTP connection that timed out', { error: 'timeout', delivery: { state: 'accepted' } }, { action: 'fail', reason: 'timeout' }],
  ['HTTP answer stream lost, non-idempotent', { delivery: { state: 'accepted', streamLost: true } }, { action: 'uncertain', cause: 'connection' }],
  ['HTTP answer stream lost, read-only: replay on the same session', { delivery: { state: 'accepted', streamLost: true }, replayable: true }, { action: 'replay', freshSession: false }],
  ['HTTP connection reset while sending, read-only', { delivery: { state: 'sending' }, replayable: true }, { action: 'replay', freshSession: false }],
  ['HTTP 502, non-idempotent: uncertain (server error)', { error: 'transport', delivery: { state: 'unknown', httpStatus: 502 } }, { action: 'uncertain', cause: 'connection' }],
  ['the replay lost its connection too', { delivery: { state: 'accepted', streamLost: true }, replayed: true, replayable: true }, { action: 'fail', reason: 'lost-again-maybe-run' }],
  ['stdio: never written, the process was gone → respawn and resend', { transport: 'stdio', delivery: { state: 'refused' }, exited: true }, { action: 'resend', freshSession: true }],
  ['stdio: the restart died before the resend was written', { transport: 'stdio', delivery: { state: 'refused' }, exited: true, resent: true }, { action: 'fail', reason: 'exited-again-not-run' }],
  ['stdio: died mid-call, non-idempotent', { transport: 'stdio', delivery: { state: 'accepted' }, exited: true }, { action: 'uncertain', cause: 'exited' }],
  ['stdio: died mid-call, idempotent → replay on a respawned process', { transport: 'stdio', delivery: { state: 'accepted' }, exited: true, replayable: true }, { action: 'replay', freshSession: true }],
  ['stdio: died again during the replay', { transport: 'stdio', delivery: { state: 'accepted' }, exited: true, replayed: true, replayable: true }, { action: 'fail', reason: 'exited-again-during-replay' }],
  ['stdio: died after the timeout fired: an exit, not a timeout', { transport: 'stdio', error: 'timeout', delivery: { state: 'accepted' }, exited: true }, { action: 'uncertain', cause: 'exited' }],
  ['stdio: a live process that did not answer in time', { transport: 'stdio', error: 'timeout', delivery: { state: 'accepted' } }, { action: 'fail', reason: 'timeout' }],
];

for (const [title, facts, verdict] of rows) {
  test(`decide: ${title}`, (t) => {
    t.deepEqual(decide({ ...base, ...facts }), verdict);
  });
}

const states: DeliveryState[] = ['unsent', 'refused', 'rejected', 'sending', 'accepted', 'unknown'];
const errors: ErrorClass[] = ['cancelled', 'timeout', 'rpc', 'auth', 'transport'];

// ------------------------------------------------------------------ the whole decision table

/** The facts `decide` reads, flat: one column each. */
interface Columns {
  transport: FailureFacts['transport'];
  error: ErrorClass;
  state: DeliveryState;
  sessionLost: boolean;
  streamLost: boolean;
  exited: boolean;
  resent: boolean;
  replayed: boolean;
  replayable: boolean;
}

/** A row's condition: per column one value or a list of values; a column left out is "any". */
type Condition = { [Column in keyof Columns]?: Columns[Column] | readonly Columns[Column][] };

const BOTH = [false, true] as const;
const HTTP = ['http', 'sse'] as const;
/** Errors that do not explain themselves: delivery and liveness decide. */
const SILENT = ['timeout', 'transport'] as const;
const NOT_CANCELLED = ['timeout', 'rpc', 'auth', 'transport'] as const;
const NOT_RUN = ['unsent', 'rejected'] as const;
const MAY_HAVE_RUN = ['sending', 'accepted', 'unknown'] as const;

const fail = (reason: Extract<Verdict, { action: 'fail' }>['reason']): Verdict => ({ action: 'fail', reason });
const resend: Verdict = { action: 'resend', freshSession: true };

/**
 * The rule as a decision table: the rows are disjoint and together cover every combination of
 * facts (both checked below), so each combination has exactly one expected verdict.
 */
const table: [Condition, Verdict][] = [
  // Whatever the transport.
  [{ error: 'cancelled' }, fail('cancelled')],
  [{ error: NOT_CANCELLED, sessionLost: true, resent: false }, resend],
  [{ error: NOT_CANCELLED, sessionLost: true, resent: true, replayed: false }, fail('lost-again-not-run')],
  [{ error: NOT_CANCELLED, sessionLost: true, resent: true, replayed: true }, fail('lost-again-maybe-run')],
  [{ error: 'auth', sessionLost: false }, fail('auth')],
  [{ error: 'rpc', sessionLost: false }, fail('rpc')],
  // Stdio, never written: the process was gone (refused, or exited) → its restart is the retry.
  [{ transport: 'stdio', error: SILENT, state: 'refused', resent: false }, resend],
  [{ transport: 'stdio', error: SILENT, state: 'refused', resent: true, replayed: false }, fail('exited-again-not-run')],
  [{ transport: 'stdio', error: SILENT, state: 'refused', resent: true, replayed: true }, fail('exited-again-during-replay')],
  [{ transport: 'stdio', error: SILENT, state: NOT_RUN, exited: true, resent: false }, resend],
  [{ transport: 'stdio', error: SILENT, state: NOT_RUN, exited: true, resent: true, replayed: false }, fail('exited-again-not-run')],
  [{ transport: 'stdio', error: SILENT, state: NOT_RUN, exited: true, resent: true, replayed: true }, fail('exited-again-during-replay')],
  // Stdio, never written, the process alive.
  [{ transport: 'stdio', error: 'timeout', state: NOT_RUN, exited: false }, fail('timeout')],
  [{ transport: 'stdio', error: 'transport', state: NOT_RUN, exited: false }, fail('unreachable')],
  // Stdio, may have run.
  [{ transport: 'stdio', error: 'timeout', state: MAY_HAVE_RUN, exited: false }, fail('timeout')],
  [{ transport: 'stdio', error: SILENT, state: MAY_HAVE_RUN, exited: true, replayable: false }, { action: 'uncertain', cause: 'exited' }],
  [{ transport: 'stdio', error: 'transport', state: MAY_HAVE_RUN, exited: false, replayable: false }, { action: 'uncertain', cause: 'connection' }],
  [{ transport: 'stdio', error: SILENT, state: MAY_HAVE_RUN, exited: true, replayable: true, replayed: true }, fail('exited-again-during-replay')],
  [{ transport: 'stdio', error: 'transport', state: MAY_HAVE_RUN, exited: false, replayable: true, replayed: true }, fail('exited-again-during-replay')],
  [{ transport: 'stdio', error: SILENT, state: MAY_HAVE_RUN, exited: true, replayable: true, replayed: false }, { action: 'replay', freshSession: true }],
  [{ transport: 'stdio', error: 'transport', state: MAY_HAVE_RUN, exited: false, replayable: true, replayed: false }, { action: 'replay', freshSession: true }],
  // HTTP and SSE, not run.
  [{ transport: HTTP, error: SILENT, state: 'rejected', sessionLost: false }, fail('rejected')],
  [{ transport: HTTP, error: 'timeout', state: ['unsent', 'refused'] }, fail('timeout')],
  [{ transport: HTTP, error: 'transport', state: 'refused', replayed: false }, fail('unreachable')],
  [{ transport: HTTP, error: 'transport', state: 'refused', replayed: true }, fail('unreachable-after-replay')],
  [{ transport: HTTP, error: 'transport', state: 'unsent', resent: false, replayed: false }, fail('unreachable')],
  [{ transport: HTTP, error: 'transport', state: 'unsent', resent: true, replayed: false }, fail('lost-again-not-run')],
  [{ transport: HTTP, error: 'transport', state: 'unsent', replayed: true }, fail('lost-again-maybe-run')],
  // HTTP and SSE, may have run: a live connection that timed out, or a lost stream / connection.
  [{ transport: HTTP, error: 'timeout', state: MAY_HAVE_RUN, streamLost: false }, fail('timeout')],
  [{ transport: HTTP, error: SILENT, state: MAY_HAVE_RUN, streamLost: true, replayable: false }, { action: 'uncertain', cause: 'connection' }],
  [{ transport: HTTP, error: 'transport', state: MAY_HAVE_RUN, streamLost: false, replayable: false }, { action: 'uncertain', cause: 'connection' }],
  [{ transport: HTTP, error: SILENT, state: MAY_HAVE_RUN, streamLost: true, replayable: true, replayed: true }, fail('lost-again-maybe-run')],
  [{ transport: HTTP, error: 'transport', state: MAY_HAVE_RUN, streamLost: false, replayable: true, replayed: true }, fail('lost-again-maybe-run')],
  [{ transport: HTTP, error: SILENT, state: MAY_HAVE_RUN, streamLost: true, replayable: true, replayed: false }, { action: 'replay', freshSession: false }],
  [{ transport: HTTP, error: 'transport', state: MAY_HAVE_RUN, streamLost: false, replayable: true, replayed: false }, { action: 'replay', freshSession: false }],
];

/**
 * Every combination of facts a transport can record: a session loss only with a 4xx rejection, a
 * lost answer stream only with an accepted request, neither on stdio; only stdio servers exit.
 * (Delivery fields `decide` never reads — the HTTP status, `sessionGone`, `tooLarge`,
 * `resumable` — are left out.)
 */
function everyCombination(): Columns[] {
  const histories = BOTH.flatMap((resent) => BOTH.flatMap((replayed) => BOTH.map((replayable) => ({ resent, replayed, replayable }))));
  return (['stdio', 'http', 'sse'] as const).flatMap((transport) => {
    const http = transport !== 'stdio';
    const deliveries = states.flatMap((state) =>
      (http && state === 'rejected' ? BOTH : [false]).flatMap((sessionLost) => (http && state === 'accepted' ? BOTH : [false]).map((streamLost) => ({ state, sessionLost, streamLost }))),
    );
    return errors.flatMap((error) =>
      deliveries.flatMap((delivery) => (http ? [false] : BOTH).flatMap((exited) => histories.map((history) => ({ transport, error, ...delivery, exited, ...history })))),
    );
  });
}

function matches(condition: Condition, columns: Columns): boolean {
  return (Object.keys(condition) as (keyof Columns)[]).every((column) => {
    const cell = condition[column] as unknown;
    return Array.isArray(cell) ? cell.includes(columns[column]) : cell === columns[column];
  });
}

function factsOf(columns: Columns): FailureFacts {
  const { state, sessionLost, streamLost, ...rest } = columns;
  return { ...rest, delivery: { state, sessionLost, streamLost } };
}

const combinations = everyCombination();

test('table: the facts a transport can record come in 1 120 combinations', (t) => {
  // stdio: 5 errors × 6 states × exited × 8 histories; HTTP and SSE: 5 errors × 8 deliveries × 8 histories each.
  t.is(combinations.length, 480 + 320 + 320);
});

test('table: every combination of facts matches exactly one row, and every row matches some', (t) => {
  const ambiguous = combinations.filter((columns) => table.filter(([condition]) => matches(condition, columns)).length !== 1).map((columns) => JSON.stringify(columns));
  t.deepEqual(ambiguous, []);
  const unused = table.filter(([condition]) => !combinations.some((columns) => matches(condition, columns))).map(([condition]) => JSON.stringify(condition));
  t.deepEqual(unused, []);
});

test('table: decide gives every combination of facts the verdict of its row', (t) => {
  const wrong = combinations.flatMap((columns) => {
    const expected = table.find(([condition]) => matches(condition, columns))?.[1];
    const actual = decide(factsOf(columns));
    return JSON.stringify(actual) === JSON.stringify(expected) ? [] : [`${JSON.stringify(columns)}: ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`];
  });
  t.deepEqual(wrong, []);
});

/**
 * Facts a transport can actually record: a session loss comes with a 4xx rejection, a lost answer
 * stream with an accepted request, neither on stdio; only stdio servers exit.
 */
const factsArbitrary: fc.Arbitrary<FailureFacts> = fc
  .record({
    transport: fc.constantFrom('stdio', 'http', 'sse') as fc.Arbitrary<FailureFacts['transport']>,
    error: fc.constantFrom(...errors),
    delivery: fc.constantFrom(...states).chain((state) =>
      fc.record({
        state: fc.constant(state),
        sessionLost: state === 'rejected' ? fc.boolean() : fc.constant(false),
        streamLost: state === 'accepted' ? fc.boolean() : fc.constant(false),
        resumable: fc.boolean(),
      }),
    ),
    exited: fc.boolean(),
    resent: fc.boolean(),
    replayed: fc.boolean(),
    replayable: fc.boolean(),
  })
  .map((facts) =>
    facts.transport === 'stdio'
      ? { ...facts, delivery: { ...facts.delivery, sessionLost: false, streamLost: false } }
      : { ...facts, exited: false },
  );

test('property: a request that may have run is never resent as if it had not (unless the server said it never processed it)', (t) => {
  fc.assert(
    fc.property(factsArbitrary, (facts) => {
      const verdict = decide(facts);
      return verdict.action !== 'resend' || !mayHaveRun(facts.delivery) || facts.delivery.sessionLost === true;
    }),
  );
  t.pass();
});

test('property: a replay happens only for a tool safe to repeat, at most once; a resend at most once', (t) => {
  fc.assert(
    fc.property(factsArbitrary, (facts) => {
      const verdict = decide(facts);
      if (verdict.action === 'replay') return facts.replayable && !facts.replayed;
      if (verdict.action === 'resend') return !facts.resent;
      return true;
    }),
  );
  t.pass();
});

test('property: an exited stdio server or a lost answer stream is never reported as a timeout', (t) => {
  fc.assert(
    fc.property(factsArbitrary, (facts) => {
      const verdict = decide(facts);
      const died = (facts.transport === 'stdio' && facts.exited) || facts.delivery.streamLost === true;
      return !(died && verdict.action === 'fail' && verdict.reason === 'timeout');
    }),
  );
  t.pass();
});

test('property: whatever each attempt meets, a call ends within three attempts', (t) => {
  fc.assert(
    fc.property(fc.array(factsArbitrary, { minLength: 3, maxLength: 3 }), (attempts) => {
      let resent = false;
      let replayed = false;
      for (const facts of attempts) {
        const verdict = decide({ ...facts, resent, replayed });
        if (verdict.action === 'resend') resent = true;
        else if (verdict.action === 'replay') replayed = true;
        else return true;
      }
      // A fourth attempt would be needed: never allowed.
      return false;
    }),
  );
  t.pass();
});
