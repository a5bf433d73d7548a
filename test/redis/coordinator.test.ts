/**
 * `redisCoordinator` in one process, against one real `redis-server` shared by the tests of this
 * file (each test has a fleet prefix of its own): the epoch as a fencing token, the ledger's
 * compare-and-set, the lease and its fencing (a coordinator on a frozen clock plays a paused
 * leader while Redis's clock runs on), the fleet-held rate limit and grace, and the watchdog
 * without a lease. The watchdog's policy runs on a manual clock; only lease expiry needs real time.
 */
import anyTest, { type ExecutionContext, type TestFn } from 'ava';
import { createGateway, createWatchdog, isStaleEpochError, type BindRecord, type SweepResult, type Watchdog, type WatchdogOptions } from '../../src/gateway/index.js';
import { redisCoordinator, type RedisCoordinator, type RedisCoordinatorOptions } from '../../src/redis/index.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import { newFixtureTag, reapTag } from '../helpers/fixtures.js';
import { ManualClock, ManualScheduler } from '../gateway/helpers.js';
import { REDIS_SERVER, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from './redis-server.js';
import { eventually } from './replicas.js';
import { ManualTimers, rawClient, uniquePrefix } from './helpers.js';

interface Context {
  redis: RedisServer;
  tag: string;
}
const test = anyTest as TestFn<Context>;
const S = 1000;
const skip = REDIS_SERVER === undefined;
// Serial: a dozen tests opening coordinators at once would mostly measure how long connecting takes.
const redisTest = skip ? test.skip : test.serial;
if (skip) test.skip(`Redis coordinator tests skipped: ${REDIS_SKIP_REASON}`, () => {});

test.before(async (t) => {
  if (skip) return;
  t.context.tag = newFixtureTag('redis-coord');
  t.context.redis = await startRedisServer(t.context.tag);
});

test.after.always(async (t) => {
  if (skip) return;
  await t.context.redis?.stop();
  const { leaked } = await reapTag(t.context.tag);
  if (leaked.length > 0) throw new Error(`leak guard: ${leaked.length} process(es) outlived the tests`);
});

type Ctx = ExecutionContext<Context>;

/** Coordinators of one fleet, closed when the test ends. */
function fleetOf(t: Ctx, prefix = uniquePrefix('coord')) {
  const opened: RedisCoordinator[] = [];
  const dogs: Watchdog[] = [];
  t.teardown(async () => {
    for (const dog of dogs) await dog.stop();
    for (const coordinator of opened) await coordinator.close();
  });
  return {
    prefix,
    async join(replicaId: string, over: Partial<RedisCoordinatorOptions> = {}): Promise<RedisCoordinator> {
      const coordinator = await redisCoordinator({ url: t.context.redis.url, prefix, replicaId, connectTimeoutMs: 20_000, ...over });
      opened.push(coordinator);
      return coordinator;
    },
    watchdog(options: WatchdogOptions): Watchdog {
      const dog = createWatchdog(options);
      dogs.push(dog);
      return dog;
    },
  };
}

const actions = (results: readonly SweepResult[]) => results.map((r) => `${r.agent}:${r.action}`);

/** Watchdog options for agents that are connected, checkable and never bound. */
function stuckAgents(agents: string[], clock: ManualClock, recovered: string[], over: Partial<WatchdogOptions> = {}): WatchdogOptions {
  return {
    recover: true,
    clock,
    scheduler: new ManualScheduler(),
    leaseTtlMs: 2000,
    agents: () => agents,
    session: () => ({ connected: true, heartbeatIntervalMs: 30 * S }),
    status: () => ({ bound: false, epoch: 'e' }),
    recoverAgent: (agent) => {
      recovered.push(agent);
    },
    ...over,
  };
}

redisTest('the epoch is the fleet\'s: shared on join, moved fleet-wide by a bump, old ledgers purged', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  const b = await fleet.join('B');
  const gwA = createGateway({ identify: () => undefined, coordinator: a });
  const gwB = createGateway({ identify: () => undefined, coordinator: b });
  t.is(gwA.epoch, gwB.epoch);
  t.regex(gwA.epoch, /^1-[0-9a-f]{12}$/);
  const old = gwA.epoch;
  t.true(await gwA.recordSuccess('agent'));
  t.true((await gwB.status('agent')).bound);

  const changes: string[] = [];
  a.on('epoch:changed', (e) => changes.push(`${e.previous}->${e.epoch} (${e.source})`));
  const next = await gwB.bump();
  t.regex(next, /^2-[0-9a-f]{12}$/);
  await eventually('A on the new epoch (pub/sub)', () => gwA.epoch === next);
  t.deepEqual(changes, [`${old}->${next} (fleet)`]);
  t.false((await gwA.status('agent')).bound);
  t.false(gwA.isCurrentSession(`${old}.6f1c1f59-3f56-4b8a-9b4e-8d7c2a1e0b11`), 'sessions of the old epoch are no longer current anywhere');

  const raw = await rawClient(t.context.redis.url);
  t.teardown(() => raw.close());
  t.is(await raw.exists(`{${fleet.prefix}}:ledger:${old}`), 0, 'the old ledger was purged');
  t.deepEqual(await raw.sMembers(`{${fleet.prefix}}:ledgers`), [next]);
});

redisTest('a write naming an old epoch is refused by Redis, even by a replica that has not heard of the bump', async (t) => {
  const fleet = fleetOf(t);
  // A generous write deadline keeps the write on the direct path even on a loaded machine.
  const a = await fleet.join('A', { epochRefreshMs: 3_600_000, writeTimeoutMs: 10_000 });
  const gwA = createGateway({ identify: () => undefined, coordinator: a });
  const old = gwA.epoch;
  // A bump whose announcement A never gets: the epoch key is moved behind its back.
  const raw = await rawClient(t.context.redis.url);
  t.teardown(() => raw.close());
  const newer = `7-${'ab'.repeat(6)}`;
  await raw.set(`{${fleet.prefix}}:epoch`, newer);
  t.is(gwA.epoch, old, 'A still believes in the old epoch');

  t.false(await gwA.recordSuccess('agent'), 'through the gateway: dropped');
  t.is(gwA.epoch, newer, 'and the refusal taught A the current epoch');
  const error = await t.throwsAsync(
    a.store.update(old, 'agent', () => ({ agent: 'agent', epoch: old, observedAt: 1, lastNonce: undefined, lastLaunchId: undefined, probe: undefined })),
  );
  t.true(isStaleEpochError(error), 'straight to the store: refused');
  t.is(await raw.hGet(`{${fleet.prefix}}:ledger:${old}`, 'agent'), null, 'nothing was written');
  t.is(a.stats().writes.stale, 2);
  t.true(await gwA.recordSuccess('agent'));
  t.truthy(await raw.hGet(`{${fleet.prefix}}:ledger:${newer}`, 'agent'));
});

redisTest('concurrent writers of one record lose no change (compare-and-set on the record version)', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A', { writeTimeoutMs: 10_000 });
  const b = await fleet.join('B', { writeTimeoutMs: 10_000 });
  const epoch = a.epochs.current;
  // Each change adds its own mark (idempotent, like the ledger's): a lost update loses a mark.
  const mark = (id: number) => (current: BindRecord | undefined): BindRecord => ({
    agent: 'hot',
    epoch,
    observedAt: 1,
    lastNonce: [...new Set([...(current?.lastNonce?.split(',') ?? []), String(id)])].sort().join(','),
    lastLaunchId: undefined,
    probe: undefined,
  });
  await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 === 0 ? a : b).store.update(epoch, 'hot', mark(i))));
  await eventually('every held write written', () => a.stats().writes.pending === 0 && b.stats().writes.pending === 0);
  const marks = (await a.store.get(epoch, 'hot'))?.lastNonce?.split(',') ?? [];
  t.is(marks.length, 100, 'every change is in the record');
  const conflicts = a.stats().writes.conflicts + b.stats().writes.conflicts;
  t.true(conflicts > 0, `${conflicts} conflicts were resolved by re-applying the change`);
});

redisTest('one leader at a time; stop() releases the lease and another takes over at once, with a higher token', async (t) => {
  const fleet = fleetOf(t);
  const coordinators = [await fleet.join('A'), await fleet.join('B'), await fleet.join('C')];
  const leases = coordinators.map((c) => c.leadership({ ttlMs: 5000 }));
  leases.forEach((lease) => lease.start());
  const leader = await eventually('a leader', () => {
    const held = leases.filter((lease) => lease.fence() !== undefined);
    return held.length === 1 ? held[0] : undefined;
  });
  const token = leader.fence()!.token;
  await leader.stop();
  const started = performance.now();
  const next = await eventually('the next leader', () => leases.find((lease) => lease !== leader && lease.fence() !== undefined));
  t.true(performance.now() - started < 2500, 'taken over long before the 5 s TTL would have run out');
  t.true(next.fence()!.token > token);
  t.is(leases.filter((lease) => lease.fence() !== undefined).length, 1);
  await Promise.all(leases.map((lease) => lease.stop()));
});

redisTest('fencing: a leader whose clock stood still (a paused process) is refused by Redis once its lease has passed', async (t) => {
  const fleet = fleetOf(t);
  const frozen = new ManualTimers();
  const a = await fleet.join('A', { clock: frozen });
  const b = await fleet.join('B');
  const policyClock = new ManualClock();
  const recovered: string[] = [];
  const lost: string[] = [];
  a.on('lease:lost', (e) => lost.push(e.reason));
  const ttl = 300;
  const dogA = fleet.watchdog(stuckAgents(['stuck'], policyClock, recovered, { coordinator: a, leaseTtlMs: ttl }));
  dogA.start();
  // A's clock moves only to let its acquire attempts run (a loaded machine may need a retry).
  await eventually('A leads', () => {
    if (!dogA.leader) frozen.advance(10);
    return dogA.leader;
  });
  t.deepEqual(actions(await dogA.sweep()), ['stuck:armed']);
  policyClock.advance(240 * S);

  // A's process "pauses": its clock and timers stop; Redis's do not.
  const dogB = fleet.watchdog(stuckAgents(['stuck'], policyClock, recovered, { coordinator: b, leaseTtlMs: ttl }));
  dogB.start();
  await eventually('B takes over once Redis expired A\'s lease', () => dogB.leader, 5000);
  t.true(dogA.leader, 'A\'s own clock still says it leads');

  // A "resumes" mid-sweep with a due agent: its claim is refused by Redis, its hook never runs.
  const results = await dogA.sweep();
  t.deepEqual(actions(results), ['stuck:deferred']);
  t.regex(results[0]!.reason, /no longer holds the watchdog lease \(fenced\)/);
  t.deepEqual(recovered, []);
  t.deepEqual(await a.recoveryLog(), [], 'and wrote nothing in the fleet\'s recovery state');

  frozen.advance(ttl);
  t.false(dogA.leader, 'once its clock moves, A sees the lease gone');
  t.deepEqual(lost, ['expired']);
});

redisTest('claims are atomic: of 20 concurrent claims under one lease, exactly one is granted; a foreign fence never is', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  const lease = a.leadership({ ttlMs: 5000 });
  lease.start();
  const fence = await eventually('the lease', () => lease.fence());
  const timings = { minRecoveryIntervalMs: 60 * S, graceMs: 600 * S };
  const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => a.recoveries.claim(`agent-${i}`, fence, timings, 'test')));
  t.is(outcomes.filter((o) => o.granted).length, 1);
  t.true(outcomes.filter((o) => !o.granted).every((o) => !o.granted && o.why === 'interval' && o.remainingMs > 59 * S));
  const forged = { token: fence.token, signal: fence.signal, valid: () => true };
  t.like(await a.recoveries.claim('agent-x', forged, timings, 'test'), { granted: false, why: 'fenced' });
  await lease.stop();
});

redisTest('the rate limit and the grace are the fleet\'s: a new leader defers what the old one just did, whatever its own clock says', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  const b = await fleet.join('B');
  const clock = new ManualClock();
  const recovered: string[] = [];
  const dogA = fleet.watchdog(stuckAgents(['x', 'y'], clock, recovered, { coordinator: a }));
  dogA.start();
  await eventually('A leads', () => dogA.leader);
  t.deepEqual(actions(await dogA.sweep()), ['x:armed', 'y:armed']);
  clock.advance(240 * S);
  t.deepEqual(actions(await dogA.sweep()), ['x:recovered', 'y:deferred']);
  await dogA.stop(); // releases the lease

  const dogB = fleet.watchdog(stuckAgents(['x', 'y'], clock, recovered, { coordinator: b }));
  dogB.start();
  await eventually('B leads', () => dogB.leader);
  t.deepEqual(actions(await dogB.sweep()), ['x:armed', 'y:armed'], 'a new leader starts its own clocks');
  // Eight minutes pass on B's clock, a few milliseconds in Redis: the interval (120 s) and the
  // grace (600 s) are still running there.
  clock.advance(480 * S);
  const results = await dogB.sweep();
  t.deepEqual(actions(results), ['x:deferred', 'y:deferred']);
  t.regex(results[0]!.reason, /in post-recovery grace for (599|600) s more/);
  t.regex(results[1]!.reason, /fleet recovery rate limit, next recovery in (119|120) s/);
  t.deepEqual(recovered, ['x']);
  const log = await b.recoveryLog();
  t.deepEqual(
    log.map((e) => `${e.outcome}:${e.agent}:${e.replica}`),
    ['recovered:x:A', 'claimed:x:A'],
  );
});

redisTest('a failed recovery releases its reservation: the next due agent may be recovered in the same sweep', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  const clock = new ManualClock();
  const recovered: string[] = [];
  const dog = fleet.watchdog(
    stuckAgents(['x', 'y'], clock, recovered, {
      coordinator: a,
      recoverAgent: (agent, _reason, context) => {
        t.is(typeof context.leaseToken, 'number');
        if (agent === 'x') throw new Error('relaunch failed');
        recovered.push(agent);
      },
    }),
  );
  dog.start();
  await eventually('A leads', () => dog.leader);
  await dog.sweep();
  clock.advance(240 * S);
  t.deepEqual(actions(await dog.sweep()), ['x:failed', 'y:recovered']);
  t.deepEqual(recovered, ['y']);
  t.deepEqual(
    (await a.recoveryLog()).map((e) => `${e.outcome}:${e.agent}`),
    ['recovered:y', 'claimed:y', 'released:x', 'claimed:x'],
  );
});

redisTest('without the lease the watchdog does nothing at all: no lookup, no claim', async (t) => {
  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  const b = await fleet.join('B');
  const clock = new ManualClock();
  const recovered: string[] = [];
  let lookups = 0;
  const counting = (over: Partial<WatchdogOptions>) =>
    stuckAgents(['x'], clock, recovered, {
      agents: () => {
        lookups++;
        return ['x'];
      },
      ...over,
    });
  const dogA = fleet.watchdog(counting({ coordinator: a }));
  t.deepEqual(await dogA.sweep(), [], 'not started: no campaign, no lease');
  dogA.start();
  await eventually('A leads', () => dogA.leader);
  const dogB = fleet.watchdog(counting({ coordinator: b }));
  dogB.start();
  await dogA.sweep();
  const before = lookups;
  t.false(dogB.leader);
  t.deepEqual(await dogB.sweep(), []);
  t.is(lookups, before, 'B looked nothing up');
});

redisTest('options are validated; a gateway takes a coordinator or a store, not both', async (t) => {
  const url = t.context.redis.url;
  const bad = async (options: unknown, message: RegExp) => {
    const error = await t.throwsAsync(redisCoordinator(options as RedisCoordinatorOptions), { message });
    t.true(isMcpSupervisorError(error));
  };
  await bad({ prefix: 'p', replicaId: 'r' }, /exactly one of `url` and `client`, got neither/);
  await bad({ url, client: {}, prefix: 'p', replicaId: 'r' }, /got both/);
  await bad({ url: 'http://x', prefix: 'p', replicaId: 'r' }, /redis:\/\//);
  await bad({ url, prefix: 'a{b}', replicaId: 'r' }, /`prefix`/);
  await bad({ url, prefix: 'p', replicaId: '' }, /`replicaId` to be a non-empty string/);
  await bad({ url, prefix: 'p', replicaId: 'r', maxBufferedWrites: 0 }, /`maxBufferedWrites` to be a positive integer/);
  await bad({ url, prefix: 'p', replicaId: 'r', writeTimeoutMs: -1 }, /`writeTimeoutMs`/);

  const fleet = fleetOf(t);
  const a = await fleet.join('A');
  t.throws(() => createGateway({ identify: () => undefined, coordinator: a, newEpoch: () => 'x' }), { message: /either `coordinator` or `store`\/`newEpoch`/ });
  t.throws(() => createWatchdog({ ...stuckAgents([], new ManualClock(), []), coordinator: a, leaseTtlMs: 5 }), { message: /`leaseTtlMs`/ });
});

redisTest('a node-redis client can stand in for the URL: its options are reused, the client itself is left alone', async (t) => {
  const host = await rawClient(t.context.redis.url);
  t.teardown(() => host.close());
  const fleet = fleetOf(t);
  const viaUrl = await fleet.join('A');
  const viaClient = await redisCoordinator({ client: host, prefix: fleet.prefix, replicaId: 'B' });
  t.teardown(() => viaClient.close());
  t.is(viaClient.epochs.current, viaUrl.epochs.current);
  await viaClient.close();
  t.true(host.isReady, 'the host\'s client is still open');
});
