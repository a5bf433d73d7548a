/**
 * The watchdog runner: lookups in the right order, swallowed failures, recovery outcomes applied
 * to the rate limit and grace, single-flight sweeps, and the interval runner. Injected clock and
 * scheduler; barriers instead of sleeps.
 */
import test from 'ava';
import { createWatchdog, type SessionInfo, type WatchdogOptions, type WatchedStatus } from '../../src/gateway/index.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import { deferred, ManualClock, ManualScheduler } from './helpers.js';

const S = 1000;

interface Fleet {
  clock: ManualClock;
  sessions: Map<string, SessionInfo>;
  statuses: Map<string, WatchedStatus | Error>;
  calls: { status: string[]; session: string[]; agents: number; recover: Array<{ agent: string; reason: string }> };
  failRecovery: Set<string>;
  options(over?: Partial<WatchdogOptions>): WatchdogOptions;
}

function fleet(agents: string[]): Fleet {
  const clock = new ManualClock();
  const sessions = new Map<string, SessionInfo>(agents.map((a) => [a, { connected: true, heartbeatIntervalMs: 30 * S }]));
  const statuses = new Map<string, WatchedStatus | Error>(agents.map((a) => [a, { bound: false, epoch: 'e1' }]));
  const calls: Fleet['calls'] = { status: [], session: [], agents: 0, recover: [] };
  const failRecovery = new Set<string>();
  return {
    clock,
    sessions,
    statuses,
    calls,
    failRecovery,
    options: (over = {}) => ({
      recover: true,
      clock,
      agents: () => {
        calls.agents++;
        return agents;
      },
      session: (agent) => {
        calls.session.push(agent);
        return sessions.get(agent) ?? { connected: false };
      },
      status: async (agent) => {
        calls.status.push(agent);
        const status = statuses.get(agent);
        if (status instanceof Error) throw status;
        return status ?? { bound: false, epoch: 'e1' };
      },
      recoverAgent: async (agent, reason) => {
        calls.recover.push({ agent, reason });
        if (failRecovery.has(agent)) throw new Error(`relaunch of ${agent} failed`);
      },
      ...over,
    }),
  };
}

const actions = (results: Array<{ agent: string; action: string }>) => results.map((r) => `${r.agent}:${r.action}`);

test('flag off (the default): a sweep makes no lookup at all and the runner never schedules', async (t) => {
  const f = fleet(['a']);
  const scheduler = new ManualScheduler();
  const { recover: _unused, ...rest } = f.options({ scheduler });
  const dog = createWatchdog(rest);
  t.false(dog.recover);
  t.deepEqual(await dog.sweep(), []);
  dog.start();
  t.is(scheduler.active, 0);
  t.false(dog.running);
  t.deepEqual(f.calls, { status: [], session: [], agents: 0, recover: [] });
  await dog.stop();
});

test('a not-connected agent is cleared without a status lookup', async (t) => {
  const f = fleet(['a']);
  const dog = createWatchdog(f.options());
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  f.sessions.set('a', { connected: false });
  t.deepEqual(actions(await dog.sweep()), ['a:none']);
  t.deepEqual(f.calls.status, ['a']);
  t.is(dog.watch('a')?.unboundSince, undefined);
});

test('status lookup errors are swallowed (sync throw or rejection) and the clock is kept', async (t) => {
  const f = fleet(['a', 'b', 'c']);
  const dog = createWatchdog(
    f.options({
      status: (agent) => {
        if (agent === 'a') throw new Error('sync boom');
        const status = f.statuses.get(agent);
        if (status instanceof Error) return Promise.reject(status);
        return status!;
      },
    }),
  );
  const first = await dog.sweep();
  t.deepEqual(actions(first), ['a:none', 'b:armed', 'c:armed']);
  t.regex(first[0]!.reason, /status lookup failed \(ignored\): sync boom/);
  const armedAt = dog.watch('b')?.unboundSince;
  f.statuses.set('b', new Error('async boom'));
  f.clock.advance(300 * S);
  const second = await dog.sweep();
  t.deepEqual(actions(second), ['a:none', 'b:none', 'c:recovered']);
  t.regex(second[1]!.reason, /async boom/);
  t.is(dog.watch('b')?.unboundSince, armedAt);
});

test('session lookup errors and a failing agent list are swallowed too', async (t) => {
  const f = fleet(['a']);
  const errors: string[] = [];
  const dog = createWatchdog(f.options({ session: () => Promise.reject(new Error('no session table')) }));
  t.deepEqual(actions(await dog.sweep()), ['a:none']);
  const dog2 = createWatchdog(
    f.options({ agents: () => Promise.reject(new Error('no list')), onError: (e, ctx) => errors.push(`${ctx}: ${String(e)}`) }),
  );
  t.deepEqual(await dog2.sweep(), []);
  t.deepEqual(errors, ['listing agents: Error: no list']);
});

test('the recover hook is called once at the deadline with the reason, then grace holds', async (t) => {
  const f = fleet(['a']);
  const dog = createWatchdog(f.options());
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  f.clock.advance(239 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  f.clock.advance(1 * S);
  const due = await dog.sweep();
  t.deepEqual(actions(due), ['a:recovered']);
  t.deepEqual(f.calls.recover, [{ agent: 'a', reason: due[0]!.reason }]);
  t.regex(due[0]!.reason, /not bound to epoch e1 for 240 s \(deadline 240 s\)/);
  // Still unbound: re-armed, due again after 240 s, but the 600 s grace defers it.
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  f.clock.advance(300 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:deferred']);
  f.clock.advance(300 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:recovered']);
  t.is(f.calls.recover.length, 2);
});

test('rate limit: the second due agent is deferred, then allowed 120 s after the first recovery', async (t) => {
  const f = fleet(['a', 'b']);
  const dog = createWatchdog(f.options());
  await dog.sweep();
  f.clock.advance(240 * S);
  const first = await dog.sweep();
  t.deepEqual(actions(first), ['a:recovered', 'b:deferred']);
  t.regex(first[1]!.reason, /fleet recovery rate limit, next recovery in 120 s/);
  f.clock.advance(119 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:armed', 'b:deferred']);
  f.clock.advance(1 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:armed', 'b:recovered']);
  t.deepEqual(
    f.calls.recover.map((c) => c.agent),
    ['a', 'b'],
  );
});

test('a failed recovery spends neither the rate limit nor the grace', async (t) => {
  const f = fleet(['a', 'b']);
  f.failRecovery.add('a');
  const dog = createWatchdog(f.options());
  await dog.sweep();
  f.clock.advance(240 * S);
  const results = await dog.sweep();
  // a failed, so b may still be recovered in the same sweep.
  t.deepEqual(actions(results), ['a:failed', 'b:recovered']);
  t.regex(results[0]!.reason, /recovery failed: relaunch of a failed/);
  t.is(dog.watch('a')?.graceUntil, undefined);
  t.not(dog.watch('a')?.unboundSince, undefined);
  // a is retried once the rate limit b spent is over, without any grace of its own.
  f.failRecovery.clear();
  f.clock.advance(120 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:recovered', 'b:armed']);
  t.deepEqual(
    f.calls.recover.map((c) => c.agent),
    ['a', 'b', 'a'],
  );
});

test('a lone failed recovery is retried on the next sweep, not deferred', async (t) => {
  const f = fleet(['a']);
  f.failRecovery.add('a');
  const dog = createWatchdog(f.options());
  await dog.sweep();
  f.clock.advance(240 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:failed']);
  f.failRecovery.clear();
  f.clock.advance(60 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:recovered']);
});

test('bound agents are cleared and never recovered', async (t) => {
  const f = fleet(['a']);
  const dog = createWatchdog(f.options());
  await dog.sweep();
  f.statuses.set('a', { bound: true, epoch: 'e1' });
  f.clock.advance(1000 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:none']);
  t.is(dog.watch('a')?.unboundSince, undefined);
  t.deepEqual(f.calls.recover, []);
});

test('concurrent sweeps share the one in flight', async (t) => {
  const f = fleet(['a']);
  const gate = deferred();
  const entered = deferred();
  let hooks = 0;
  const dog = createWatchdog(
    f.options({
      recoverAgent: async () => {
        hooks++;
        entered.resolve();
        await gate.promise;
      },
    }),
  );
  await dog.sweep();
  f.clock.advance(240 * S);
  const one = dog.sweep();
  await entered.promise;
  const two = dog.sweep();
  t.is(one, two);
  gate.resolve();
  t.deepEqual(actions(await one), ['a:recovered']);
  t.is(hooks, 1);
});

test('runner: sweeps on each tick, skips a tick while a sweep runs, stop aborts the hook and waits', async (t) => {
  const f = fleet(['a']);
  const scheduler = new ManualScheduler();
  const entered = deferred<AbortSignal>();
  let sweeps = 0;
  const dog = createWatchdog(
    f.options({
      scheduler,
      agents: () => {
        sweeps++;
        return ['a'];
      },
      recoverAgent: (_agent, _reason, { signal }) => {
        entered.resolve(signal);
        return new Promise<void>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));
      },
    }),
  );
  dog.start();
  dog.start();
  t.deepEqual(scheduler.periods, [60_000]);
  t.true(dog.running);
  scheduler.tick();
  await dog.sweep(); // joins the tick's sweep
  t.is(sweeps, 1);
  f.clock.advance(240 * S);
  scheduler.tick();
  const signal = await entered.promise;
  scheduler.tick(); // skipped: the previous sweep is still in its hook
  t.is(sweeps, 2);
  await dog.stop();
  t.true(signal.aborted);
  t.is(scheduler.active, 0);
  t.false(dog.running);
  // The aborted hook counts as a failed recovery: the clock stays armed.
  t.not(dog.watch('a')?.unboundSince, undefined);
});

test('runner on real timers is unref\'d and stops cleanly', async (t) => {
  const f = fleet(['a']);
  // getActiveResourcesInfo lists only timers that keep the process alive, i.e. ref'd ones.
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const dog = createWatchdog(f.options({ intervalMs: 3_600_000 }));
  dog.start();
  t.true(dog.running);
  t.is(timers(), before, 'the interval is unref\'d');
  await dog.stop();
  t.false(dog.running);
  t.is(timers(), before);
});

test('options are validated', (t) => {
  const f = fleet(['a']);
  const bad = t.throws(() => createWatchdog(f.options({ intervalMs: 0 })));
  t.true(isMcpSupervisorError(bad));
  t.is(bad?.message, 'Expected `intervalMs` to be a finite number > 0, got `0` (number)');
  t.throws(() => createWatchdog({ ...f.options(), recoverAgent: undefined as never }), { message: /`recoverAgent` to be a function/ });
});
