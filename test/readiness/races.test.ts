/**
 * Readiness races, each pinned deterministically with a scripted discovery driver (the test says
 * when each body publishes, finishes or survives), a manual clock and barriers. Names follow the
 * race they pin.
 */
import test from 'ava';
import fc from 'fast-check';
import { parseProfileConfig, type ProfileConfig } from '../../src/index.js';
import { McpSupervisorError, isMcpSupervisorError } from '../../src/errors.js';
import { TypedEmitter } from '../../src/events.js';
import { type ReadinessEvents, ReadinessRegistry } from '../../src/readiness/registry.js';
import { ManualClock, barrier, flush } from '../helpers/clock.js';
import { FakeSessions, ScriptedDriver } from '../helpers/scripted-driver.js';

function profile(servers: string[]): ProfileConfig {
  return parseProfileConfig({ mcpServers: Object.fromEntries(servers.map((name) => [name, { command: `/bin/${name}` }])) }, { profile: 'p' });
}

interface Setup {
  registry: ReadinessRegistry;
  driver: ScriptedDriver;
  sessions: FakeSessions;
  clock: ManualClock;
  events: TypedEmitter<ReadinessEvents>;
  configs: Map<string, ProfileConfig>;
}

function setup(t: import('ava').ExecutionContext, configs: Record<string, string[]>, options: Partial<{ readinessCapMs: number; retryCooldownMs: number; maxRetryCooldownMs: number }> = {}): Setup {
  const driver = new ScriptedDriver();
  const sessions = new FakeSessions();
  const clock = new ManualClock();
  const events = new TypedEmitter<ReadinessEvents>();
  const map = new Map(Object.entries(configs).map(([key, servers]) => [key, profile(servers)]));
  const registry = new ReadinessRegistry(
    driver,
    sessions,
    async (key) => map.get(key),
    clock,
    { readinessCapMs: options.readinessCapMs ?? 120_000, retryCooldownMs: options.retryCooldownMs ?? 30_000, maxRetryCooldownMs: options.maxRetryCooldownMs ?? 600_000 },
    events,
  );
  // Registered first, so it runs last (after close): no test, whatever it asserts, may have
  // started a body while another of the same key was alive.
  t.teardown(() => {
    if (driver.overlaps.length > 0) throw new Error(`owner overlap: ${JSON.stringify(driver.overlaps)}`);
  });
  t.teardown(() => registry.close());
  return { registry, driver, sessions, clock, events, configs: map };
}

/** Tracks whether a promise has settled, without awaiting it. */
function track<T>(promise: Promise<T>): { readonly done: boolean; readonly value: T | undefined; promise: Promise<T> } {
  const state = { done: false, value: undefined as T | undefined, promise };
  promise.then(
    (value) => {
      state.done = true;
      state.value = value;
    },
    () => {
      state.done = true;
    },
  );
  return state;
}

test('first-turn completeness: a discovery settling after any fixed guess (4.5 s vs a 4 s "join") is fully awaited', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['a', 'b'] });
  const turn = track(registry.wait('p'));
  await flush();
  const run = driver.last('p');
  driver.ready(run, 'a', ['read']);
  await clock.advance(4000);
  t.false(turn.done, 'a 4 s guess would have dropped server b; the turn keeps waiting');
  await clock.advance(500);
  driver.ready(run, 'b', ['write']);
  await flush();
  t.true(turn.done);
  t.is(turn.value?.view.status, 'ready');
  t.deepEqual(turn.value?.catalog.tools.map((tool) => tool.name), ['mcp__a__read', 'mcp__b__write']);

  // A second turn on the ready entry does not wait: it resolves with no time passing and no new body.
  const second = track(registry.wait('p'));
  await flush();
  t.true(second.done);
  t.is(driver.runsOf('p').length, 1);
});

test('first-turn completeness: only the caller\'s own maxWaitMs ends the wait, and then every pending server is named', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['a', 'b', 'c'] });
  const turn = track(registry.wait('p', { maxWaitMs: 4000 }));
  await flush();
  driver.ready(driver.last('p'), 'a');
  await clock.advance(4000);
  t.true(turn.done);
  t.true(turn.value?.view.waitTimedOut);
  t.is(turn.value?.view.status, 'pending');
  t.deepEqual(turn.value?.view.pending, ['b', 'c']);
  t.deepEqual(turn.value?.catalog.tools.map((tool) => tool.name), ['mcp__a__t']);
});

test('coalescing and isolation: concurrent same-profile turns share one owner and one wait; other profiles are independent', async (t) => {
  const { registry, driver } = setup(t, { p: ['a'], q: ['a'] });
  const turns = Array.from({ length: 10 }, () => track(registry.wait('p')));
  const other = track(registry.wait('q'));
  await flush();
  t.is(driver.runsOf('p').length, 1, 'one owner for ten turns');
  driver.ready(driver.last('p'), 'a', ['x']);
  await flush();
  t.true(turns.every((turn) => turn.done));
  t.is(new Set(turns.map((turn) => turn.value?.view)).size, 1, 'one shared settlement');
  t.false(other.done, 'profile q is not settled by p');
  driver.fail(driver.last('q'), 'a');
  await flush();
  t.is(other.value?.view.status, 'failed');
  t.is(turns[0]?.value?.view.status, 'ready', 'q\'s failure never reaches p');
});

test('honest failure: a body that dies without outcomes settles failed with kinds, never ready; degraded lists its failures', async (t) => {
  const { registry, driver } = setup(t, { dead: ['a', 'b'], half: ['a', 'b'] });
  const dead = track(registry.wait('dead'));
  const half = track(registry.wait('half'));
  await flush();
  driver.finish(driver.last('dead'), new McpSupervisorError('DISCOVERY_FAILED', 'worker crashed'));
  driver.ready(driver.last('half'), 'a');
  driver.fail(driver.last('half'), 'b', 'refused');
  await flush();
  t.is(dead.value?.view.status, 'failed');
  t.deepEqual(dead.value?.view.failed, ['a', 'b']);
  t.like(dead.value?.view.servers['a'], { status: 'failed', kind: 'cancelled' });
  t.regex((dead.value?.view.servers['a'] as { message: string }).message, /worker crashed/);
  t.is(half.value?.view.status, 'degraded');
  t.deepEqual(half.value?.view.failed, ['b']);
  t.like(half.value?.view.servers['b'], { status: 'failed', kind: 'refused' });
});

test('cap retirement: at the cap the generation is retired, every waiter wakes at once, a late body publishes nothing', async (t) => {
  const { registry, driver, sessions, clock } = setup(t, { p: ['slow'] }, { readinessCapMs: 1000 });
  driver.deliverStale = true; // the late body really does try: readiness must ignore it by itself
  const early = track(registry.wait('p'));
  await flush();
  await clock.advance(900);
  const late = track(registry.wait('p', { maxWaitMs: 60_000 }));
  await clock.advance(99);
  t.false(early.done);
  t.false(late.done);
  await clock.advance(1);
  t.true(early.done && late.done, 'both waiters woke at the cap, the later one not after its own wait');
  t.is(early.value?.view, late.value?.view);
  t.like(late.value?.view.servers['slow'], { status: 'failed', kind: 'timeout' });
  t.deepEqual(driver.quiesceCalls, [{ key: 'p', reason: 'readiness cap' }]);
  const run = driver.last('p');
  t.true(run.retired);
  const publishedBefore = sessions.publishedFor.length;
  driver.ready(run, 'slow', ['late']);
  driver.finish(run);
  await flush();
  t.like(registry.status('p').servers['slow'], { status: 'failed', kind: 'timeout' });
  t.is(sessions.publishedFor.length, publishedBefore, 'nothing of the retired generation was registered');
});

test('retry overlap: retry while pending never leaves two live owners; the new body starts only after the old one is quiesced', async (t) => {
  const { registry, driver } = setup(t, { p: ['a'] });
  const waiter = track(registry.wait('p'));
  await flush();
  const first = driver.last('p');
  const gate = barrier();
  t.teardown(() => gate.resolve());
  driver.quiesceGate.set('p', gate);
  const retried = track(registry.retry('p'));
  await flush();
  t.is(driver.runsOf('p').length, 1, 'no new body while the old one is being quiesced');
  t.true(first.retired);
  gate.resolve();
  await flush();
  t.is(driver.runsOf('p').length, 2);
  t.deepEqual(driver.overlaps, []);
  t.is(driver.maxLiveOwners('p'), 1);
  driver.ready(driver.last('p'), 'a');
  await flush();
  t.true(waiter.done && retried.done, 'the first waiter followed the entry to the new generation');
  t.is(waiter.value?.view.generation, driver.last('p').generation);
});

test('refresh while the settled body is still releasing its connections: the old body is quiesced before the new one starts', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['ok', 'flaky'] }, { retryCooldownMs: 1000 });
  track(registry.wait('p'));
  await flush();
  const first = driver.last('p');
  driver.ready(first, 'ok');
  driver.fail(first, 'flaky');
  await flush();
  t.is(registry.status('p').status, 'degraded');
  // Settled, but the body has not finished (it is still closing its connections).
  t.true(driver.hasOwner('p'));
  const gate = barrier();
  t.teardown(() => gate.resolve()); // (runs before close(), which would wait for it)
  driver.quiesceGate.set('p', gate);
  await clock.advance(1000);
  t.deepEqual(driver.overlaps, [], 'no body started while the old one lives');
  t.is(driver.maxLiveOwners('p'), 1);
  t.deepEqual(driver.quiesceCalls, [{ key: 'p', reason: 'cooldown refresh' }], 'the refresh quiesces the live body first');
  t.is(driver.runsOf('p').length, 1, 'no new body while the old one is being quiesced');
  gate.resolve();
  await flush();
  t.is(driver.runsOf('p').length, 2);
  t.true(first.finished);
  t.deepEqual(driver.overlaps, []);
  t.is(driver.maxLiveOwners('p'), 1);
  driver.ready(driver.last('p'), 'flaky');
  await flush();
  t.is(registry.status('p').status, 'ready');
});

test('cap, then the cooldown refresh while the capped body is still being killed: never two owners', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['slow'] }, { readinessCapMs: 1000, retryCooldownMs: 500 });
  const waiter = track(registry.wait('p'));
  await flush();
  const first = driver.last('p');
  // The cap's own quiesce is slow (the kill rung takes a while)…
  const capGate = barrier();
  t.teardown(() => capGate.resolve());
  driver.quiesceGate.set('p', capGate);
  await clock.advance(1000);
  t.true(waiter.done);
  t.like(registry.status('p').servers['slow'], { status: 'failed', kind: 'timeout' });
  t.true(first.retired && !first.finished, 'retired at the cap, still alive');
  // …and the refresh of the timed-out server comes due before it is over.
  const refreshGate = barrier();
  t.teardown(() => refreshGate.resolve());
  driver.quiesceGate.set('p', refreshGate);
  await clock.advance(500);
  t.deepEqual(driver.overlaps, [], 'no body started while the capped one lives');
  t.is(driver.maxLiveOwners('p'), 1);
  t.deepEqual(driver.quiesceCalls.map((call) => call.reason), ['readiness cap', 'cooldown refresh']);
  t.is(driver.runsOf('p').length, 1, 'the refresh waits for the capped body');
  refreshGate.resolve();
  await flush();
  t.is(driver.runsOf('p').length, 2);
  t.deepEqual(driver.overlaps, []);
  t.is(driver.maxLiveOwners('p'), 1);
  capGate.resolve();
  driver.ready(driver.last('p'), 'slow');
  await flush();
  t.is(registry.status('p').status, 'ready');
});

test('retry refused when the old owner cannot be quiesced (RETRY_REFUSED), and its waiters still wake', async (t) => {
  const { registry, driver } = setup(t, { p: ['a'] });
  const waiter = track(registry.wait('p'));
  await flush();
  driver.survivors.add('p');
  const error = await t.throwsAsync(registry.retry('p'));
  t.true(isMcpSupervisorError(error) && error.code === 'RETRY_REFUSED');
  await flush();
  t.true(waiter.done);
  t.is(driver.runsOf('p').length, 1);
});

test('deadline boundary: a generation change exactly at a waiter\'s deadline neither throws, returns bare pending, nor deadlocks', async (t) => {
  // Both orders of the two same-instant events, chosen by fast-check's scheduler.
  await fc.assert(
    fc.asyncProperty(fc.scheduler(), fc.boolean(), async (s, settleFirst) => {
      const driver = new ScriptedDriver();
      const clock = new ManualClock();
      const registry = new ReadinessRegistry(driver, new FakeSessions(), async () => profile(['a']), clock, { readinessCapMs: 120_000, retryCooldownMs: 30_000, maxRetryCooldownMs: 600_000 }, new TypedEmitter());
      try {
        const first = registry.wait('p', { maxWaitMs: 1000 });
        await flush();
        const run = driver.last('p');
        // The generation changes (a retry retires it and starts the next) at t = 1000 exactly.
        const change = s.schedule(Promise.resolve()).then(() => registry.retry('p'));
        const deadline = s.schedule(Promise.resolve()).then(() => clock.advance(1000));
        if (settleFirst) driver.ready(run, 'a');
        await s.waitAll();
        await Promise.all([deadline]);
        const result = await first;
        driver.ready(driver.last('p'), 'a');
        await change;
        const view = result.view;
        if (view.status === 'pending' && !(view.waitTimedOut && view.pending.length > 0)) return false;
        // The retry must have quiesced the first body before starting the second.
        if (driver.overlaps.length > 0 || driver.maxLiveOwners('p') !== 1) return false;
        return true;
      } finally {
        await registry.close();
      }
    }),
    { numRuns: 60 },
  );
  t.pass('all schedules resolved without throwing, bare pending or deadlock');
});

test('reload: owner creation waits for the fence; a turn of an unrelated settled profile does not', async (t) => {
  const { registry, driver } = setup(t, { busy: ['a'], settled: ['a'], fresh: ['a'] });
  const settled = track(registry.wait('settled'));
  const busy = track(registry.wait('busy'));
  await flush();
  driver.ready(driver.last('settled'), 'a');
  await flush();
  t.true(settled.done);
  // The reload of "busy" holds the fence while its owner is being quiesced.
  const gate = barrier();
  t.teardown(() => gate.resolve());
  driver.quiesceGate.set('busy', gate);
  const reload = track(registry.reload(['busy']));
  await flush();
  const fresh = track(registry.wait('fresh'));
  const unrelated = track(registry.wait('settled'));
  await flush();
  t.true(unrelated.done, 'a settled profile answers during the reload');
  t.is(driver.runsOf('fresh').length, 0, 'no owner is created while the fence is held');
  gate.resolve();
  await flush();
  t.true(reload.done);
  t.is(driver.runsOf('fresh').length, 1, 'owner created once the fence opened');
  t.is(driver.runsOf('busy').length, 2, 'the reloaded profile is discovered again');
  t.false(fresh.done);
  t.false(busy.done);
  driver.ready(driver.last('busy'), 'a');
  await flush();
  t.true(busy.done, 'waiters of the reloaded profile get the new generation');
});

test('reload fails closed when an owner survives quiescence: RELOAD_ABORTED and nothing torn down', async (t) => {
  const { registry, driver, sessions } = setup(t, { p: ['a'], q: ['a'] });
  const q = track(registry.wait('q'));
  track(registry.wait('p'));
  await flush();
  driver.ready(driver.last('q'), 'a');
  await flush();
  const settledView = q.value?.view;
  driver.survivors.add('p');
  const error = await t.throwsAsync(registry.reload(undefined));
  t.true(isMcpSupervisorError(error) && error.code === 'RELOAD_ABORTED');
  t.deepEqual(sessions.shutdowns, [], 'no session was shut down');
  t.truthy(settledView);
  t.is(registry.status('q'), settledView!, 'q keeps its settlement');
  t.is(driver.runsOf('q').length, 1);
});

test('reload: a throwing session shutdown still invalidates every affected entry', async (t) => {
  const { registry, driver, sessions } = setup(t, { p: ['a'], q: ['a'] });
  for (const key of ['p', 'q']) {
    track(registry.wait(key));
    await flush();
    driver.ready(driver.last(key), 'a');
  }
  await flush();
  sessions.throwOnShutdown.add('p');
  const result = await registry.reload(undefined);
  t.deepEqual(sessions.shutdowns.sort(), ['p', 'q']);
  t.is(result.teardownErrors.length, 1);
  t.regex(result.teardownErrors[0]?.message ?? '', /exploded/);
  await flush();
  for (const key of ['p', 'q']) {
    t.is(driver.runsOf(key).length, 2, `${key} was invalidated and re-discovered`);
    t.is(registry.status(key).status, 'pending');
  }
});

test('reload reports servers added, removed and changed by fingerprint', async (t) => {
  const { registry, driver, configs } = setup(t, { p: ['keep', 'change', 'drop'] });
  track(registry.wait('p'));
  await flush();
  for (const name of ['keep', 'change', 'drop']) driver.ready(driver.last('p'), name);
  await flush();
  configs.set(
    'p',
    parseProfileConfig({ mcpServers: { keep: { command: '/bin/keep' }, change: { command: '/bin/changed' }, added: { command: '/bin/added' } } }, { profile: 'p' }),
  );
  const { changes } = await registry.reload(['p']);
  t.deepEqual(changes, [{ key: 'p', added: ['added'], removed: ['drop'], changed: ['change'], unchanged: ['keep'] }]);
});

test('cooldown refresh: a failed entry answers turns at once with its last result and re-discovers once, in the background, when due', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['ok', 'flaky'] }, { retryCooldownMs: 1000 });
  track(registry.wait('p'));
  await flush();
  driver.ready(driver.last('p'), 'ok');
  driver.fail(driver.last('p'), 'flaky');
  driver.finish(driver.last('p'));
  await flush();
  t.is(registry.status('p').status, 'degraded');
  const early = track(registry.wait('p'));
  await flush();
  t.true(early.done, 'a turn on a degraded entry returns at once');
  t.is(driver.runsOf('p').length, 1, 'no refresh before the cooldown');
  await clock.advance(1000);
  t.is(driver.runsOf('p').length, 2, 'exactly one background owner after the cooldown');
  t.deepEqual(driver.last('p').servers, ['flaky'], 'only the failed server is re-discovered');
  const during = track(registry.wait('p'));
  await flush();
  t.true(during.done, 'turns keep answering from the last settlement during the refresh');
  t.is(during.value?.view.status, 'degraded');
  driver.ready(driver.last('p'), 'flaky', ['back']);
  await flush();
  const after = await registry.wait('p');
  t.is(after.view.status, 'ready');
  t.deepEqual(after.catalog.tools.map((tool) => tool.name), ['mcp__ok__t', 'mcp__flaky__back']);
  t.is(driver.maxLiveOwners('p'), 1);
});

test('cooldown doubles per consecutive failure of a server, capped', async (t) => {
  const { registry, driver, clock } = setup(t, { p: ['bad'] }, { retryCooldownMs: 1000, maxRetryCooldownMs: 10_000 });
  track(registry.wait('p'));
  await flush();
  const retryAts: number[] = [];
  for (let round = 0; round < 6; round++) {
    const start = clock.now();
    driver.fail(driver.last('p'), 'bad');
    driver.finish(driver.last('p'));
    await flush();
    const view = registry.status('p').servers['bad'] as { retryAt: number; consecutiveFailures: number };
    t.is(view.consecutiveFailures, round + 1);
    retryAts.push(view.retryAt - start);
    await clock.advance(view.retryAt - clock.now());
  }
  t.deepEqual(retryAts, [1000, 2000, 4000, 8000, 10_000, 10_000]);
  t.is(driver.maxLiveOwners('p'), 1);
});

test('close(): waiters of a pending entry get HOST_CLOSED, not a hang', async (t) => {
  const { registry } = setup(t, { p: ['a'] });
  const waiting = registry.wait('p');
  await flush();
  await registry.close();
  const error = await t.throwsAsync(waiting);
  t.true(isMcpSupervisorError(error) && error.code === 'HOST_CLOSED');
});
