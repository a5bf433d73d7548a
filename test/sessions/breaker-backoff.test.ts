/**
 * Pure logic of the session layer's circuit breaker and reconnect backoff: no processes, an
 * injected manual clock, a scripted random source.
 */
import test from 'ava';
import { backoffDelay } from '../../src/sessions/backoff.js';
import { CircuitBreaker } from '../../src/sessions/breaker.js';
import type { BreakerState } from '../../src/sessions/breaker.js';
import { ManualClock } from '../helpers/clock.js';
import { guardOpenHandles } from './helpers.js';

guardOpenHandles(test);

function breaker(failureThreshold = 3, cooldownMs = 1000) {
  const clock = new ManualClock();
  const transitions: BreakerState['kind'][] = [];
  const subject = new CircuitBreaker({ failureThreshold, cooldownMs }, clock, (to) => transitions.push(to));
  return { clock, subject, transitions };
}

test('breaker: stays closed below the threshold and opens exactly at it', (t) => {
  const { subject, transitions } = breaker(3);
  subject.recordFailure();
  subject.recordFailure();
  t.is(subject.state.kind, 'closed');
  t.is(subject.failures, 2);
  t.deepEqual(subject.admit(), { allowed: true, probe: false });
  subject.recordFailure();
  t.is(subject.state.kind, 'open');
  t.deepEqual(transitions, ['open']);
});

test('breaker: a success resets the consecutive count (failures must be consecutive)', (t) => {
  const { subject } = breaker(3);
  subject.recordFailure();
  subject.recordFailure();
  subject.recordSuccess();
  t.is(subject.failures, 0);
  subject.recordFailure();
  subject.recordFailure();
  t.is(subject.state.kind, 'closed');
});

test('breaker: open refuses every call until the cooldown, naming when the probe comes', async (t) => {
  const { clock, subject } = breaker(1, 1000);
  const openedAt = clock.now();
  subject.recordFailure();
  t.deepEqual(subject.admit(), { allowed: false, probeAt: openedAt + 1000 });
  await clock.advance(999);
  t.false(subject.admit().allowed);
});

test('breaker: after the cooldown exactly one probe is admitted, others wait for its verdict', async (t) => {
  const { clock, subject, transitions } = breaker(1, 1000);
  subject.recordFailure();
  await clock.advance(1000);
  t.deepEqual(subject.admit(), { allowed: true, probe: true });
  t.is(subject.state.kind, 'half-open');
  t.false(subject.admit().allowed);
  t.false(subject.admit().allowed);
  subject.recordSuccess();
  t.is(subject.state.kind, 'closed');
  t.deepEqual(subject.admit(), { allowed: true, probe: false });
  t.deepEqual(transitions, ['open', 'half-open', 'closed']);
});

test('breaker: a failed probe re-arms for a full cooldown from the failure', async (t) => {
  const { clock, subject, transitions } = breaker(2, 1000);
  subject.recordFailure();
  subject.recordFailure();
  await clock.advance(1500);
  t.true(subject.admit().allowed);
  subject.recordFailure();
  t.is(subject.state.kind, 'open');
  t.deepEqual(subject.admit(), { allowed: false, probeAt: clock.now() + 1000 });
  await clock.advance(1000);
  t.deepEqual(subject.admit(), { allowed: true, probe: true });
  t.deepEqual(transitions, ['open', 'half-open', 'open', 'half-open']);
});

test('breaker: a released probe (no verdict) frees the slot for the next caller', async (t) => {
  const { clock, subject } = breaker(1, 1000);
  subject.recordFailure();
  await clock.advance(1000);
  t.true(subject.admit().allowed);
  t.false(subject.admit().allowed);
  subject.releaseProbe();
  t.deepEqual(subject.admit(), { allowed: true, probe: true });
});

test('breaker: a failed connect is the verdict of a half-open probe (re-arms), and is ignored otherwise', async (t) => {
  const { clock, subject } = breaker(2, 1000);
  subject.connectFailed();
  t.deepEqual(subject.state, { kind: 'closed', failures: 0 }, 'while closed, failures are counted per call');
  subject.recordFailure();
  subject.recordFailure();
  const open = subject.state;
  subject.connectFailed();
  t.deepEqual(subject.state, open, 'while open, the cooldown is not extended');
  await clock.advance(1000);
  t.true(subject.admit().allowed);
  subject.connectFailed();
  t.deepEqual(subject.state, { kind: 'open', openedAt: clock.now(), probeAt: clock.now() + 1000 });
});

test('breaker: a successful session initialisation closes it from open or half-open', async (t) => {
  const { clock, subject } = breaker(1, 1000);
  subject.recordFailure();
  subject.sessionEstablished();
  t.is(subject.state.kind, 'closed');
  subject.recordFailure();
  await clock.advance(1000);
  t.true(subject.admit().allowed);
  subject.sessionEstablished();
  t.deepEqual(subject.state, { kind: 'closed', failures: 0 });
});

test('breaker: sessionEstablished does not reset a closed breaker\'s count (only a proven call does)', (t) => {
  const { subject, transitions } = breaker(3);
  subject.recordFailure();
  subject.sessionEstablished();
  t.is(subject.failures, 1);
  t.deepEqual(transitions, []);
});

test('backoff: the first attempt is immediate', (t) => {
  t.is(backoffDelay(1, { baseMs: 250, maxMs: 30_000 }, () => 0.9), 0);
  t.is(backoffDelay(0, { baseMs: 250, maxMs: 30_000 }, () => 0.9), 0);
});

test('backoff: doubles per attempt with equal jitter (half fixed, half random)', (t) => {
  const options = { baseMs: 200, maxMs: 100_000 };
  // attempt 2 → ceiling 200, attempt 3 → 400, attempt 4 → 800
  t.is(backoffDelay(2, options, () => 0), 100);
  t.is(backoffDelay(2, options, () => 0.999999), 200);
  t.is(backoffDelay(3, options, () => 0), 200);
  t.is(backoffDelay(3, options, () => 0.5), 300);
  t.is(backoffDelay(4, options, () => 0), 400);
});

test('backoff: never exceeds the cap, never drops below half of it once capped', (t) => {
  const options = { baseMs: 250, maxMs: 30_000 };
  for (const attempt of [10, 20, 60, 1000]) {
    t.is(backoffDelay(attempt, options, () => 0), 15_000);
    t.true(backoffDelay(attempt, options, () => 0.999999) <= 30_000);
  }
});

test('backoff: jitter spreads a fleet that failed together', (t) => {
  const options = { baseMs: 1000, maxMs: 30_000 };
  const delays = new Set([0, 0.2, 0.4, 0.6, 0.8].map((r) => backoffDelay(3, options, () => r)));
  t.is(delays.size, 5);
  for (const delay of delays) t.true(delay >= 1000 && delay <= 2000);
});
