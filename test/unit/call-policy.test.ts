/**
 * The call policy (`decide`), row by row and as properties over every combination of facts.
 * The rows pin the rule of DESIGN §5; the properties pin what must hold whatever the facts:
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
