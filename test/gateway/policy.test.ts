/**
 * The recovery policy as pure functions: one test per rule, plus a property that `recover` is
 * only ever decided when every precondition holds.
 */
import test from 'ava';
import fc from 'fast-check';
import {
  afterRecovery,
  decide,
  deadlineMs,
  DEFAULT_POLICY,
  missedProbeDetail,
  policyConfig,
  type AgentWatch,
  type FleetWatch,
  type ProbeRecord,
  type SessionInfo,
  type WatchedStatus,
} from '../../src/gateway/index.js';
import { isMcpSupervisorError } from '../../src/errors.js';

const T0 = 1_000_000_000;
const S = 1000;
const EPOCH = 'e1';
const live: SessionInfo = { connected: true, heartbeatIntervalMs: 30 * S };
const unbound: WatchedStatus = { bound: false, epoch: EPOCH };
const bound: WatchedStatus = { bound: true, epoch: EPOCH };
const noFleet: FleetWatch = { lastRecoveryAt: undefined };
const ok = (status: WatchedStatus) => ({ ok: true as const, status });
const armedAt = (at: number, graceUntil?: number): AgentWatch => ({ unboundSince: at, graceUntil });

test('arming: the first unbound observation arms the clock and does nothing else', (t) => {
  const d = decide(undefined, noFleet, { session: live, status: ok(unbound) }, T0);
  t.is(d.action, 'armed');
  t.is(d.next.unboundSince, T0);
  t.regex(d.reason, /clock armed/);
  // A later sweep keeps the original arming time.
  const later = decide(d.next, noFleet, { session: live, status: ok(unbound) }, T0 + 60 * S);
  t.is(later.action, 'armed');
  t.is(later.next.unboundSince, T0);
});

test('deadline: max(3 × heartbeat interval, 240 s), recovery exactly at the deadline', (t) => {
  t.is(deadlineMs({ connected: true, heartbeatIntervalMs: 30 * S }), 240 * S);
  t.is(deadlineMs({ connected: true, heartbeatIntervalMs: 100 * S }), 300 * S);
  t.is(deadlineMs({ connected: true }), 240 * S);
  const session: SessionInfo = { connected: true, heartbeatIntervalMs: 100 * S };
  const before = decide(armedAt(T0), noFleet, { session, status: ok(unbound) }, T0 + 300 * S - 1);
  t.is(before.action, 'armed');
  t.regex(before.reason, /deadline 300 s/);
  const at = decide(armedAt(T0), noFleet, { session, status: ok(unbound) }, T0 + 300 * S);
  t.is(at.action, 'recover');
});

test('bound clears the clock', (t) => {
  const d = decide(armedAt(T0), noFleet, { session: live, status: ok(bound) }, T0 + 1000 * S);
  t.is(d.action, 'none');
  t.is(d.next.unboundSince, undefined);
  t.regex(d.reason, /^bound to epoch e1/);
});

test('not connected clears the clock and keeps the grace', (t) => {
  const d = decide(armedAt(T0, T0 + 5), noFleet, { session: { ...live, connected: false } }, T0 + 1000 * S);
  t.deepEqual([d.action, d.reason], ['none', 'not connected']);
  t.deepEqual(d.next, { unboundSince: undefined, graceUntil: T0 + 5 });
});

test('not checkable clears; synthetic presence never makes an agent checkable', (t) => {
  const now = T0 + 1000 * S;
  const cases: Array<[SessionInfo, boolean]> = [
    [{ connected: true }, false],
    [{ connected: true, heartbeatIntervalMs: 0 }, false],
    [{ connected: true, heartbeatIntervalMs: Number.NaN }, false],
    [{ connected: true, lastAgentHeartbeatAt: now - 30 * 60 * S }, true],
    [{ connected: true, lastAgentHeartbeatAt: now - 30 * 60 * S - 1 }, false],
    [{ connected: true, lastHeartbeat: { at: now - S, origin: 'agent' } }, true],
    [{ connected: true, lastHeartbeat: { at: now - S, origin: 'synthetic' } }, false],
    [{ connected: true, heartbeatIntervalMs: 1 }, true],
  ];
  for (const [session, checkable] of cases) {
    const d = decide(armedAt(T0), noFleet, { session, status: ok(unbound) }, now);
    if (checkable) {
      t.is(d.action, 'recover', JSON.stringify(session));
    } else {
      t.is(d.action, 'none', JSON.stringify(session));
      t.regex(d.reason, /^not checkable/);
      t.is(d.next.unboundSince, undefined);
    }
  }
});

test('a failed status lookup is swallowed: no action and the clock neither moves nor clears', (t) => {
  const watch = armedAt(T0);
  const d = decide(watch, noFleet, { session: live, status: { ok: false, error: new Error('store down') } }, T0 + 1000 * S);
  t.is(d.action, 'none');
  t.regex(d.reason, /status lookup failed \(ignored\): store down/);
  t.is(d.next, watch);
  // Missing a status for a connected agent is treated the same way.
  t.is(decide(watch, noFleet, { session: live }, T0 + 1000 * S).action, 'none');
});

test('grace: a recovered agent is deferred until its grace is over', (t) => {
  const recoveredAt = T0 + 240 * S;
  const { watch, fleet } = afterRecovery(armedAt(T0), noFleet, recoveredAt);
  t.deepEqual(watch, { unboundSince: undefined, graceUntil: recoveredAt + DEFAULT_POLICY.graceMs });
  // Still unbound after the relaunch: armed again, then due at its own deadline, but in grace.
  const rearmed = decide(watch, fleet, { session: live, status: ok(unbound) }, recoveredAt + 60 * S);
  t.is(rearmed.action, 'armed');
  const inGrace = decide(rearmed.next, fleet, { session: live, status: ok(unbound) }, recoveredAt + 300 * S);
  t.is(inGrace.action, 'deferred');
  t.regex(inGrace.reason, /post-recovery grace/);
  const afterGrace = decide(rearmed.next, fleet, { session: live, status: ok(unbound) }, recoveredAt + DEFAULT_POLICY.graceMs);
  t.is(afterGrace.action, 'recover');
});

test('rate limit: a recovery anywhere in the fleet defers the next one for 120 s, then allows it', (t) => {
  const fleet: FleetWatch = { lastRecoveryAt: T0 + 300 * S };
  const deferred = decide(armedAt(T0), fleet, { session: live, status: ok(unbound) }, T0 + 300 * S + 119_999);
  t.is(deferred.action, 'deferred');
  t.regex(deferred.reason, /fleet recovery rate limit, next recovery in 1 s/);
  const allowed = decide(armedAt(T0), fleet, { session: live, status: ok(unbound) }, T0 + 420 * S);
  t.is(allowed.action, 'recover');
});

test('the grace is checked before the rate limit', (t) => {
  const d = decide(armedAt(T0, T0 + 10_000 * S), { lastRecoveryAt: T0 + 1000 * S }, { session: live, status: ok(unbound) }, T0 + 1001 * S);
  t.is(d.action, 'deferred');
  t.regex(d.reason, /grace/);
  t.notRegex(d.reason, /rate limit/);
});

const probe = (over: Partial<ProbeRecord> = {}): ProbeRecord => ({
  nonce: 'n1',
  launchId: 'L1',
  epoch: EPOCH,
  requestedAt: T0,
  fulfilledAt: undefined,
  ...over,
});

test('missed-probe text appears only for a current, unfulfilled probe at least 120 s old', (t) => {
  const at = T0 + 120 * S;
  const status = (p: ProbeRecord | undefined): WatchedStatus => ({ bound: false, epoch: EPOCH, probe: p });
  t.is(missedProbeDetail(status(probe()), live, at), '; probe n1 (launch L1) unanswered for 120 s');
  t.is(missedProbeDetail(status(undefined), live, at), '');
  t.is(missedProbeDetail(status(probe({ epoch: 'e0' })), live, at), '', 'probe of another epoch is not current');
  t.is(missedProbeDetail(status(probe()), { ...live, launchId: 'L2' }, at), '', 'probe of another launch is not current');
  t.not(missedProbeDetail(status(probe()), { ...live, launchId: 'L1' }, at), '');
  t.is(missedProbeDetail(status(probe({ fulfilledAt: T0 + 5 })), live, at), '', 'fulfilled');
  t.is(missedProbeDetail(status(probe()), live, at - 1), '', 'younger than 120 s');
});

test('a missed probe never triggers recovery by itself, it only explains', (t) => {
  const at = T0 + 1000 * S;
  const missed = probe();
  const boundButMissed = decide(armedAt(T0), noFleet, { session: live, status: ok({ ...bound, probe: missed }) }, at);
  t.is(boundButMissed.action, 'none');
  t.regex(boundButMissed.reason, /probe n1 .* unanswered/);
  const firstSighting = decide(undefined, noFleet, { session: live, status: ok({ ...unbound, probe: missed }) }, at);
  t.is(firstSighting.action, 'armed');
  const due = decide(armedAt(T0), noFleet, { session: live, status: ok({ ...unbound, probe: missed }) }, at);
  t.is(due.action, 'recover');
  t.regex(due.reason, /^not bound to epoch e1 for 1000 s \(deadline 240 s\); probe n1 \(launch L1\) unanswered for 1000 s$/);
});

test('property: recover is decided only when connected, checkable, unbound, past the deadline, out of grace and rate limit', (t) => {
  fc.assert(
    fc.property(
      fc.record({
        connected: fc.boolean(),
        heartbeatIntervalMs: fc.option(fc.integer({ min: 0, max: 600 * S }), { nil: undefined }),
        lastAgentHeartbeatAt: fc.option(fc.integer({ min: 0, max: 4000 * S }), { nil: undefined }),
      }),
      fc.option(fc.boolean(), { nil: undefined }),
      fc.option(fc.integer({ min: 0, max: 4000 * S }), { nil: undefined }),
      fc.option(fc.integer({ min: 0, max: 4000 * S }), { nil: undefined }),
      fc.option(fc.integer({ min: 0, max: 4000 * S }), { nil: undefined }),
      fc.integer({ min: 0, max: 4000 * S }),
      (session, isBound, unboundSince, graceUntil, lastRecoveryAt, now) => {
        const status = isBound === undefined ? { ok: false as const, error: new Error('x') } : ok({ bound: isBound, epoch: EPOCH });
        const d = decide({ unboundSince, graceUntil }, { lastRecoveryAt }, { session, status }, now);
        const interval = session.heartbeatIntervalMs ?? 0;
        const checkable =
          interval > 0 || (session.lastAgentHeartbeatAt !== undefined && now - session.lastAgentHeartbeatAt <= 30 * 60 * S);
        const expectRecover =
          session.connected &&
          isBound === false &&
          checkable &&
          unboundSince !== undefined &&
          now - unboundSince >= Math.max(3 * interval, 240 * S) &&
          (graceUntil === undefined || now >= graceUntil) &&
          (lastRecoveryAt === undefined || now - lastRecoveryAt >= 120 * S);
        return (d.action === 'recover') === expectRecover;
      },
    ),
    { seed: 424242, numRuns: 2000 },
  );
  t.pass();
});

test('policy options are validated with what was expected and what was received', (t) => {
  const error = t.throws(() => policyConfig({ deadlineFloorMs: -1 }));
  t.true(isMcpSupervisorError(error));
  t.is((error as { code?: string }).code, 'INVALID_CONFIG');
  t.is(error?.message, 'Expected `deadlineFloorMs` to be a finite number of milliseconds ≥ 0, got `-1` (number)');
  t.deepEqual(policyConfig({ graceMs: 0 }).graceMs, 0);
});
