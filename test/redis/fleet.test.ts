/**
 * The checks of issue 16 with real processes: a real `redis-server` started by the test, and
 * three gateway replicas, each its own Node process (`test/programs/redis-replica.ts`), driven
 * over stdin/stdout. Lease expiry needs real time, so TTLs are short (1 s) and every wait polls a
 * condition under a deadline. Serial: the lease timings should not compete with each other for
 * the two cores.
 */
import test, { type ExecutionContext } from 'ava';
import type { BindStatus } from '../../src/gateway/index.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { REDIS_SERVER, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from './redis-server.js';
import { eventually, Replica, type ReplicaConfig, type ReplicaEvent } from './replicas.js';

const LEASE_TTL_MS = 1000;
/**
 * What a takeover may take beyond `leaseTtlMs` + one sweep: process scheduling on a shared 2-core
 * machine (timers fire late under load) and the stdout pipe the event travels through.
 */
const SCHEDULING_SLACK_MS = 500;

interface Fleet {
  redis: RedisServer;
  replicas: Replica[];
  /** Graceful exit of every replica still alive (each must end by itself), then Redis. */
  shutdown(): Promise<void>;
}

async function startFleet(t: ExecutionContext, config: Partial<ReplicaConfig>, names = ['A', 'B', 'C']): Promise<Fleet> {
  const tag = useFixtureTag(t, 'redis-fleet');
  const redis = await startRedisServer(tag);
  const replicas: Replica[] = [];
  t.teardown(async () => {
    for (const replica of replicas) await replica.kill();
    await redis.stop();
  });
  const prefix = `fleet-${Math.random().toString(36).slice(2)}`;
  for (const replicaId of names) {
    replicas.push(
      await Replica.start(
        {
          url: redis.url,
          prefix,
          replicaId,
          leaseTtlMs: LEASE_TTL_MS,
          sweepMs: 100,
          heartbeatMs: 50,
          policy: { deadlineFloorMs: 0, graceMs: 60_000, minRecoveryIntervalMs: 60_000 },
          agents: [],
          connectTimeoutMs: 20_000,
          ...config,
        },
        tag,
      ),
    );
  }
  return {
    redis,
    replicas,
    async shutdown() {
      for (const replica of replicas) if (replica.alive) await replica.exit();
      await redis.stop();
    },
  };
}

interface Stats {
  connected: boolean;
  epoch: string;
  leader: boolean;
  leaseToken: number | undefined;
  writes: { buffered: number; pending: number; dropped: number; failed: number; flushed: number };
}

const stats = (replica: Replica) => replica.request<Stats>('stats');
interface Recovery {
  replica: string;
  agent: string;
  token: number;
  receivedAt: number;
}
const recoveries = (replicas: Replica[]): Recovery[] =>
  replicas
    .flatMap((replica) =>
      replica.eventsNamed('recovered').map((event) => ({ replica: replica.id, agent: String(event['agent']), token: Number(event['token']), receivedAt: event.receivedAt })),
    )
    .sort((x, y) => x.receivedAt - y.receivedAt);

async function leaderOf(replicas: Replica[]): Promise<Replica> {
  return eventually('a leader', async () => {
    const leaders: Replica[] = [];
    for (const replica of replicas) if (replica.alive && (await stats(replica)).leader) leaders.push(replica);
    return leaders.length === 1 ? leaders[0] : undefined;
  });
}

function sweptAs(replica: Replica, agent: string, action: string, pattern: RegExp = /./): (event: ReplicaEvent) => boolean {
  void replica;
  return (event) => (event['results'] as Array<{ agent: string; action: string; reason: string }>).some((r) => r.agent === agent && r.action === action && pattern.test(r.reason));
}

const skip = REDIS_SERVER === undefined;
const fleetTest = skip ? test.skip : test.serial;
if (skip) test.skip(`Redis fleet tests skipped: ${REDIS_SKIP_REASON}`, () => {});

fleetTest('three replicas: a bind on A is seen by B and C; bump() on B moves A and C and unbinds', async (t) => {
  const { replicas, shutdown } = await startFleet(t, { watchdog: false });
  const [a, b, c] = replicas as [Replica, Replica, Replica];
  const epoch0 = await a.request<string>('epoch');
  t.is(await b.request('epoch'), epoch0);
  t.is(await c.request('epoch'), epoch0);

  t.true(await a.request<boolean>('bind', { agent: 'agent-1' }));
  const [seenA, seenB, seenC] = await Promise.all(replicas.map((r) => r.request<BindStatus>('status', { agent: 'agent-1' })));
  t.true(seenB!.bound, 'B sees the bind made on A');
  t.true(seenC!.bound, 'C sees it too');
  t.is(seenB!.observedAt, seenA!.observedAt);
  t.is(seenC!.observedAt, seenA!.observedAt);

  const epoch1 = await b.request<string>('bump');
  t.not(epoch1, epoch0);
  await eventually('A and C on the new epoch', async () => (await a.request('epoch')) === epoch1 && (await c.request('epoch')) === epoch1);
  t.truthy(a.eventsNamed('epoch:changed', (e) => e['epoch'] === epoch1 && e['source'] === 'fleet').length);
  t.truthy(c.eventsNamed('epoch:changed', (e) => e['epoch'] === epoch1 && e['source'] === 'fleet').length);
  for (const replica of replicas) {
    const status = await replica.request<BindStatus>('status', { agent: 'agent-1' });
    t.false(status.bound, `${replica.id} sees agent-1 unbound after the bump`);
    t.is(status.epoch, epoch1);
  }
  // A write that started in the old epoch is refused (by A itself, or by Redis's compare-and-set).
  t.false(await a.request<boolean>('bindIn', { agent: 'agent-1', epoch: epoch0 }));
  t.false((await c.request<BindStatus>('status', { agent: 'agent-1' })).bound);
  // And the new epoch binds again, fleet-wide.
  t.true(await c.request<boolean>('bind', { agent: 'agent-1' }));
  t.true((await a.request<BindStatus>('status', { agent: 'agent-1' })).bound);
  await shutdown();
});

fleetTest('one stuck agent is recovered exactly once across the fleet; a second is not recovered by another replica inside the fleet interval', async (t) => {
  // Long enough that another replica is surely leading and sweeping well inside it, even on a loaded machine.
  const intervalMs = 8000;
  const { replicas, shutdown } = await startFleet(t, {
    agents: ['stuck-1'],
    policy: { deadlineFloorMs: 0, graceMs: 60_000, minRecoveryIntervalMs: intervalMs },
  });
  const first = await eventually('the first recovery', () => recoveries(replicas)[0]);
  t.is(first.agent, 'stuck-1');
  // The replica that recovered it leaves the fleet: whoever acts from now on is another replica,
  // and knows nothing of that recovery but what Redis holds.
  const recoverer = replicas.find((r) => r.id === first.replica)!;
  await recoverer.exit();
  const others = replicas.filter((r) => r !== recoverer);
  for (const replica of others) await replica.request('agents', { agents: ['stuck-1', 'stuck-2'] });

  const deferredBy = (agent: string, pattern: RegExp) => () =>
    others.flatMap((r) => r.eventsNamed('sweep', sweptAs(r, agent, 'deferred', pattern)).map((e) => ({ replica: r.id, at: e.receivedAt })))[0];
  const deferred = await eventually('another replica deferring stuck-2 (rate limit)', deferredBy('stuck-2', /rate limit/));
  t.true(deferred.at < first.receivedAt + intervalMs, 'inside the interval');
  await eventually('and stuck-1 (its grace)', deferredBy('stuck-1', /grace/));

  // Once the interval is over, stuck-2 is recovered, once.
  const second = await eventually('the second recovery', () => recoveries(replicas).find((r) => r.agent === 'stuck-2'), intervalMs + 10_000);
  t.not(second.replica, recoverer.id);
  t.true(second.receivedAt - first.receivedAt >= intervalMs - 50, `second recovery ${Math.round(second.receivedAt - first.receivedAt)} ms after the first`);
  const after = await eventually('a later sweep', () =>
    others.find((r) => r.eventsNamed('sweep', (e) => e.receivedAt > second.receivedAt && sweptAs(r, 'stuck-2', 'deferred', /grace/)(e)).length > 0),
  );
  t.truthy(after);

  const all = recoveries(replicas).map((r) => r.agent);
  t.deepEqual(all, ['stuck-1', 'stuck-2'], 'exactly one recovery per stuck agent, fleet-wide');
  const log = await others[0]!.request<Array<{ outcome: string; agent: string; replica: string }>>('log');
  t.deepEqual(
    log.filter((e) => e.outcome === 'claimed').map((e) => `${e.replica}:${e.agent}`),
    [`${second.replica}:stuck-2`, `${first.replica}:stuck-1`],
  );
  await shutdown();
});

fleetTest('SIGKILL the leader: another replica takes over within leaseTtlMs + one sweep', async (t) => {
  const sweepMs = 200;
  const { replicas, shutdown } = await startFleet(t, { sweepMs, agents: ['agent-1'] });
  const leader = await leaderOf(replicas);
  const { leaseToken } = await stats(leader);
  const others = replicas.filter((r) => r !== leader);

  const killedAt = performance.now();
  leader.signal('SIGKILL');
  const takeover = await eventually(
    'a sweep by another replica',
    () => others.flatMap((r) => r.eventsNamed('sweeping', (e) => e.receivedAt > killedAt).map((e) => ({ replica: r, at: e.receivedAt })))[0],
    LEASE_TTL_MS + sweepMs + 5000,
  );
  const elapsed = takeover.at - killedAt;
  t.log(`takeover after ${Math.round(elapsed)} ms (lease ${LEASE_TTL_MS} ms, sweep every ${sweepMs} ms)`);
  t.true(elapsed <= LEASE_TTL_MS + sweepMs + SCHEDULING_SLACK_MS, `took over after ${Math.round(elapsed)} ms`);
  const acquired = takeover.replica.eventsNamed('lease:acquired').at(-1);
  t.true(Number(acquired?.['token']) > Number(leaseToken), 'the new lease has a higher fencing token');
  t.is((await leaderOf(others)).id, takeover.replica.id, 'and it is the only leader');
  await leader.exited;
  await shutdown();
});

fleetTest('SIGSTOP the leader until its lease passes, then SIGCONT: it performs no recovery and no ledger write', async (t) => {
  // Every replica blocks in its second status lookup of `stuck` (the first one armed its clock),
  // i.e. exactly where its next step would be to recover it, until the test releases it.
  const { replicas, shutdown } = await startFleet(t, { agents: ['stuck'], heartbeatMs: 1, gateAfter: { stuck: 1 } });
  const gatedLeader = await eventually('a leader about to recover', () => replicas.find((r) => r.eventsNamed('gated').length > 0));
  const oldToken = Number(gatedLeader.eventsNamed('lease:acquired').at(-1)?.['token']);
  const oldEpoch = await gatedLeader.request<string>('epoch');

  gatedLeader.signal('SIGSTOP');
  const others = replicas.filter((r) => r !== gatedLeader);
  const successor = await eventually(
    'a new leader',
    () => others.find((r) => r.eventsNamed('lease:acquired').length > 0),
    LEASE_TTL_MS + 5000,
  );
  t.true(Number(successor.eventsNamed('lease:acquired')[0]?.['token']) > oldToken);
  await successor.waitEvent('gated');
  // Meanwhile the fleet moves to a new epoch: whatever the paused replica held is stale.
  const newEpoch = await successor.request<string>('bump');

  gatedLeader.signal('SIGCONT');
  await gatedLeader.request('release', { agent: 'stuck' });
  const resumed = await gatedLeader.waitEvent('sweep', sweptAs(gatedLeader, 'stuck', 'deferred', /lease|fenced/));
  t.regex(JSON.stringify(resumed['results']), /no longer holds the watchdog lease \(fenced\)/);
  t.truthy(gatedLeader.eventsNamed('lease:lost', (e) => Number(e['token']) === oldToken).length, 'it noticed its lease was gone');
  // No ledger write either: a record of the epoch it was on is refused, whatever it believes.
  t.false(await gatedLeader.request<boolean>('bindIn', { agent: 'late', epoch: oldEpoch }));
  t.false((await successor.request<BindStatus>('status', { agent: 'late' })).bound);
  t.is(await gatedLeader.request('epoch'), newEpoch);

  t.deepEqual(recoveries(replicas), [], 'nobody recovered while the successor was held');
  t.deepEqual(await successor.request('log'), [], 'and the paused leader wrote no claim');

  // The legitimate leader recovers it: exactly once, under its own token.
  await successor.request('release', { agent: 'stuck' });
  const recovered = await eventually('the recovery by the new leader', () => recoveries(replicas)[0]);
  t.is(recovered.replica, successor.id);
  t.true(recovered.token > oldToken);
  await successor.waitEvent('sweep', (e) => e.receivedAt > recovered.receivedAt && sweptAs(successor, 'stuck', 'deferred', /grace/)(e));
  t.is(recoveries(replicas).length, 1);
  await shutdown();
});

fleetTest('Redis killed and restarted under load: no crash, no recovery storm, ledgers consistent afterwards', async (t) => {
  const agents = Array.from({ length: 12 }, (_, i) => `a${i}`);
  const { redis, replicas, shutdown } = await startFleet(t, {
    // Agents bind every 50 ms; the deadline (1.5 s) is shorter than the outage, so a watchdog that
    // acted on a wiped ledger would recover every agent.
    policy: { deadlineFloorMs: 1500, graceMs: 60_000, minRecoveryIntervalMs: 60_000 },
  });
  for (const [i, replica] of replicas.entries()) await replica.request('load', { agents: agents.slice(i * 4, i * 4 + 4), everyMs: 50 });
  const epoch = await replicas[0]!.request<string>('epoch');
  await eventually('every agent bound', async () => (await replicas[0]!.request<BindStatus[]>('statuses', { agents })).every((s) => s.bound));
  // Only now does the fleet watch them: every agent is bound and keeps binding.
  for (const replica of replicas) await replica.request('agents', { agents });
  await leaderOf(replicas);
  const allBound = (e: ReplicaEvent) => {
    const results = e['results'] as Array<{ action: string }>;
    return results.length === agents.length && results.every((x) => x.action === 'none');
  };
  await eventually('a sweep that found every agent bound', () => replicas.some((r) => r.eventsNamed('sweep', allBound).length > 0));

  redis.signal('SIGKILL');
  await redis.exited();
  await eventually('every replica buffering, none leading', async () => {
    const all = await Promise.all(replicas.map(stats));
    return all.every((s) => !s.connected && !s.leader && s.writes.buffered > 20);
  });

  await redis.restart();
  await eventually(
    'the fleet back on the same epoch, with a leader and nothing buffered',
    async () => {
      const all = await Promise.all(replicas.map(stats));
      return all.every((s) => s.connected && s.epoch === epoch && s.writes.pending === 0) && all.filter((s) => s.leader).length === 1;
    },
    15_000,
  );
  t.truthy(replicas.flatMap((r) => r.eventsNamed('epoch:changed', (e) => e['source'] === 'restored')).length, 'Redis had lost the epoch: it was restored');

  const loads = await Promise.all(replicas.map((r) => r.request<{ ok: number; dropped: number; failed: number; maxMs: number }>('stopLoad')));
  for (const load of loads) {
    t.is(load.failed, 0, 'no write failed');
    t.is(load.dropped, 0, 'and none was refused');
    // writeTimeoutMs (250) bounds it; the rest is this loaded machine scheduling the replica late.
    t.true(load.maxMs < 250 + 1000, `a write waited at most ${Math.round(load.maxMs)} ms`);
  }
  await eventually('nothing buffered', async () => (await Promise.all(replicas.map(stats))).every((s) => s.writes.pending === 0));
  const views = await Promise.all(replicas.map((r) => r.request<BindStatus[]>('statuses', { agents })));
  for (const view of views) {
    t.true(view.every((s) => s.bound && s.epoch === epoch));
    t.deepEqual(
      view.map((s) => s.observedAt),
      views[0]!.map((s) => s.observedAt),
      'every replica reads the same ledger',
    );
  }
  t.true(replicas.every((r) => r.alive), 'no replica crashed');
  t.deepEqual(recoveries(replicas), [], 'no recovery at all');
  t.deepEqual(await replicas[0]!.request('log'), []);
  const totals = (await Promise.all(replicas.map(stats))).map((s) => s.writes);
  t.true(totals.every((w) => w.dropped === 0 && w.failed === 0 && w.flushed > 0));
  t.log(`buffered during the outage: ${totals.map((w) => w.buffered).join(', ')}; flushed: ${totals.map((w) => w.flushed).join(', ')}`);
  await shutdown();
});
