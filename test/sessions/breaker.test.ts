/**
 * The circuit breaker in a real supervisor, on a manual clock: real fixture processes, no
 * discovery (the supervisor is built directly). Start 1 of each plan is the first session.
 */
import path from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ManualClock } from '../helpers/clock.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { signal } from '../helpers/processes.js';
import { StartPlan, advanceSettled, callError, directSupervisor, guardOpenHandles, sideEffects, structured, tempDir, textOf } from './helpers.js';
import type { Direct } from './helpers.js';

guardOpenHandles(test);

const COOLDOWN = 30_000;

/**
 * A supervisor whose server answered once, exited, and now crash-loops; three calls (the
 * threshold) each paid one respawn and failed, so the breaker is open.
 */
async function openBreaker(t: ExecutionContext): Promise<{ plan: StartPlan; clock: ManualClock; direct: Direct; effects: string; probeAt: number }> {
  const tag = useFixtureTag(t);
  const effects = path.join(await tempDir(t), 'effects');
  const plan = await StartPlan.create(t, tag, ['--crash-loop'], { MCP_FIXTURE_SIDE_EFFECT_FILE: effects });
  plan.set(1, ['--die-after-calls', '1']);
  const clock = new ManualClock();
  const direct = directSupervisor(t, plan.config(), clock, { breaker: { failureThreshold: 3, cooldownMs: COOLDOWN } });
  const exited = direct.next('server:exited');
  t.is(textOf(await direct.call('echo', { text: 'ok' })), 'ok');
  await exited;
  const opened = direct.next('breaker:open');
  for (let call = 1; call <= 3; call++) {
    await callError(t, direct.call('increment'), 'SERVER_EXITED_AGAIN');
    t.is(direct.supervisor.stats().breaker.kind, call < 3 ? 'closed' : 'open');
  }
  const { probeAt } = await opened;
  t.is(probeAt, clock.now() + COOLDOWN);
  t.is(plan.starts(), 4);
  return { plan, clock, direct, effects, probeAt };
}

test('breaker opens at the threshold and blocked calls reach no server (no spawn, no RPC)', async (t) => {
  const { plan, clock, direct, effects, probeAt } = await openBreaker(t);
  for (let call = 0; call < 5; call++) {
    const error = await callError(t, direct.call('increment'), 'BREAKER_OPEN');
    t.regex(error.modelText, new RegExp(new Date(probeAt).toISOString().replace(/\./g, '\\.')));
    t.regex(error.modelText, /3 consecutive failures/);
  }
  // The loop's own backoff does not respawn while the breaker is open: the cooldown replaces it.
  await clock.advance(COOLDOWN - 1);
  await callError(t, direct.call('echo', { text: 'x' }), 'BREAKER_OPEN');
  t.is(plan.starts(), 4, 'no process was started for a blocked call');
  t.is(sideEffects(effects).length, 0);
  t.is(direct.supervisor.stats().state, 'idle');
});

test('after the cooldown exactly one probe; a failed probe re-arms; a half-open probe without a session reconnects and recovers once the server is back', async (t) => {
  const { plan, clock, direct } = await openBreaker(t);
  await clock.advance(COOLDOWN);

  // Half-open, no live session: the probe signals one reconnect instead of writing into a dead pipe.
  const reopened = direct.next('breaker:open');
  const probe = direct.call('echo', { text: 'probe' });
  const second = direct.call('echo', { text: 'second' });
  await callError(t, probe, 'RECONNECTING');
  const blocked = await callError(t, second, 'BREAKER_OPEN');
  t.regex(blocked.modelText, /probe of the server is in progress/);
  // That reconnect crashed: the probe failed, and the breaker re-armed for a full cooldown.
  const { probeAt } = await reopened;
  t.is(probeAt, clock.now() + COOLDOWN);
  t.is(plan.starts(), 5, 'exactly one probe');
  await callError(t, direct.call('echo', { text: 'x' }), 'BREAKER_OPEN');
  await clock.advance(COOLDOWN - 1);
  await callError(t, direct.call('echo', { text: 'x' }), 'BREAKER_OPEN');
  t.is(plan.starts(), 5);

  // The server is back: the next probe's reconnect succeeds and closes the breaker.
  plan.set('default', []);
  await clock.advance(1);
  const closed = direct.next('breaker:closed');
  await callError(t, direct.call('echo', { text: 'probe' }), 'RECONNECTING');
  await closed;
  t.is(textOf(await direct.call('echo', { text: 'back' })), 'back');
  t.is(plan.starts(), 6);
  t.is(structured<{ calls: number }>(await direct.call('calls')).calls, 2);
  t.like(direct.supervisor.stats(), { state: 'ready', breakerFailures: 0, breaker: { kind: 'closed' } });
});

test('three isError results in a row do not open the breaker (they are the tool\'s answer)', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  const direct = directSupervisor(t, plan.config(), new ManualClock(), { breaker: { failureThreshold: 3, cooldownMs: COOLDOWN } });
  for (let call = 0; call < 3; call++) {
    const result = await direct.call('fail');
    t.true(result.isError);
  }
  t.like(direct.supervisor.stats(), { breakerFailures: 0, breaker: { kind: 'closed' } });
  t.is(textOf(await direct.call('echo', { text: 'still fine' })), 'still fine');
});

test('countToolErrors: three isError results in a row do open the breaker', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  const direct = directSupervisor(t, plan.config(), new ManualClock(), { countToolErrors: true, breaker: { failureThreshold: 3, cooldownMs: COOLDOWN } });
  for (let call = 0; call < 3; call++) t.true((await direct.call('fail')).isError);
  t.is(direct.supervisor.stats().breaker.kind, 'open');
  await callError(t, direct.call('echo', { text: 'x' }), 'BREAKER_OPEN');
});

test('a half-open probe the server rejects (no verdict) frees the probe slot instead of wedging the breaker', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  const clock = new ManualClock();
  const direct = directSupervisor(t, plan.config(), clock, { breaker: { failureThreshold: 3, cooldownMs: COOLDOWN } });
  // Three real timeouts against a live server open the breaker; the session stays up.
  for (let call = 0; call < 3; call++) {
    await callError(t, direct.call('slow', { ms: 600_000 }, { timeoutMs: 1 }), 'CALL_TIMEOUT');
  }
  t.is(direct.supervisor.stats().breaker.kind, 'open');
  await clock.advance(COOLDOWN);
  // The probe reaches the live server, which rejects it (unknown tool): no verdict on the server.
  await callError(t, direct.call('no_such_tool'), 'PROTOCOL_ERROR');
  // The next call is admitted as the probe and closes the breaker.
  t.is(textOf(await direct.call('echo', { text: 'x' })), 'x');
  t.is(direct.supervisor.stats().breaker.kind, 'closed');
});

test('a server down for 10 minutes of injected time, then back, is callable again: never wedged', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag, ['--crash-loop']);
  plan.set(1, ['--die-after-calls', '1']);
  const clock = new ManualClock();
  // Backoff (base 40 s) slower than the calls (every 20 s), so calls drive the failures: the
  // breaker opens at 2, its probes spend the budget of 5, and it parks too.
  const direct = directSupervisor(t, plan.config(), clock, {
    reconnectBudget: 5,
    backoffBaseMs: 40_000,
    backoffMaxMs: 60_000,
    parkProbeIntervalMs: 60_000,
    breaker: { failureThreshold: 2, cooldownMs: COOLDOWN },
  });
  const exited = direct.next('server:exited');
  t.is(textOf(await direct.call('echo', { text: 'ok' })), 'ok');
  await exited;
  const idle = (): boolean => direct.supervisor.stats().state !== 'connecting';
  const seen = new Set<string>();
  const states = new Set<string>();
  const step = 20_000;
  for (let elapsed = 0; elapsed < 10 * 60_000; elapsed += step) {
    const error = await t.throwsAsync(direct.call('echo', { text: 'down' }));
    seen.add((error as { code?: string }).code ?? String(error));
    await advanceSettled(clock, step, idle);
    states.add(direct.supervisor.stats().state);
  }
  t.true([...seen].every((code) => ['SERVER_EXITED_AGAIN', 'BREAKER_OPEN', 'RECONNECTING', 'SERVER_PARKED'].includes(code)), [...seen].join(', '));
  // It went through both defences: the breaker (open, re-armed by failed probes) and parking.
  t.true(seen.has('SERVER_EXITED_AGAIN') && seen.has('BREAKER_OPEN') && seen.has('RECONNECTING'), [...seen].join(', '));
  t.true(states.has('parked'), [...states].join(', '));
  const startsWhileDown = plan.starts();
  t.true(startsWhileDown < 40, `no hot respawn loop while down (${startsWhileDown} starts in 10 minutes)`);

  // Back: within one breaker cooldown plus one park probe interval, a call succeeds.
  plan.set('default', []);
  let answer: string | undefined;
  for (let elapsed = 0; elapsed <= COOLDOWN + 60_000 + step && answer === undefined; elapsed += step) {
    try {
      answer = textOf(await direct.call('echo', { text: 'back' }));
    } catch {
      await advanceSettled(clock, step, idle);
    }
  }
  t.is(answer, 'back');
  t.like(direct.supervisor.stats(), { state: 'ready', breaker: { kind: 'closed' } });
});

test('reconnect budget: each proven session refills it, so a server killed between calls more often than the budget keeps coming back', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag);
  const direct = directSupervisor(t, plan.config(), new ManualClock(), { reconnectBudget: 2 });
  for (let kill = 1; kill <= 3; kill++) {
    t.is(textOf(await direct.call('echo', { text: `life ${kill}` })), `life ${kill}`);
    const exited = direct.next('server:exited');
    t.true(signal(direct.supervisor.stats().pid!, 'SIGKILL'));
    await exited;
  }
  t.is(textOf(await direct.call('echo', { text: 'still here' })), 'still here');
  t.like(direct.supervisor.stats(), { state: 'ready', respawns: 3, attemptsSinceProven: 0 });
});

test('reconnect budget: connects alone do not refill it — a server that dies in every call parks once it is spent', async (t) => {
  const tag = useFixtureTag(t);
  const plan = await StartPlan.create(t, tag, ['--die-in-tool', 'echo']);
  const direct = directSupervisor(t, plan.config(), new ManualClock(), { reconnectBudget: 4, breaker: { failureThreshold: 100, cooldownMs: COOLDOWN } });
  // Each call: a session that initialises fine, dies in the call, and its replay dies too.
  await callError(t, direct.call('echo', { text: 'x' }), 'SERVER_EXITED_AGAIN');
  await callError(t, direct.call('echo', { text: 'x' }), 'SERVER_EXITED_AGAIN');
  t.is(plan.starts(), 4);
  const parked = direct.next('server:parked');
  const error = await callError(t, direct.call('echo', { text: 'x' }), 'SERVER_PARKED');
  t.regex((await parked).reason, /4 sessions in a row ended .*before a call succeeded/);
  t.regex(error.modelText, /parked/);
  t.is(plan.starts(), 4, 'parked without starting it a fifth time');
  t.is(direct.supervisor.stats().connects, 4);
});
