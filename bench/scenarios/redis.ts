/**
 * Scenario `redis`: a gateway fleet coordinated through Redis (`mcp-supervisor/redis`), against a
 * local `redis-server` the scenario starts itself (skipped, with a note, when none is installed).
 *
 * Series:
 *   - bind record, 1 replica: `gw.recordSuccess(agent)` through a Redis coordinator, one at a
 *     time (µs, p50/p99), 100 agents in rotation: one Lua compare-and-set round trip when the
 *     replica saw the record's version last, as in steady state;
 *   - baselines, interleaved with it in blocks of 100: the same call on a gateway with the
 *     default in-memory store (what a single process pays), and a raw node-redis `SET` round
 *     trip on its own connection (the floor under any Redis write);
 *   - throughput, 1 replica: records/s with 16 calls in flight, against raw `SET`s with 16 in
 *     flight (node-redis pipelines both);
 *   - throughput per replica, 3 replicas: three replica processes (`test/programs/redis-replica.ts`)
 *     writing at once, 16 in flight each, on the same Redis (and the same 2 cores): records/s and
 *     p99 per replica, against the 1-replica figure;
 *   - lease failover: three replicas with `leaseTtlMs` 1 000 and a 100 ms sweep; SIGKILL the
 *     leader, time until another replica has acquired the lease (and until it swept); 8 rounds
 *     (3 with `--quick`), a fresh replica replacing the dead one each round. Target: every
 *     takeover within `leaseTtlMs` + one sweep.
 */
import { createClient } from 'redis';
import { createGateway } from '../../src/gateway/index.js';
import { redisCoordinator, type RedisCoordinator } from '../../src/redis/index.js';
import { REDIS_SERVER, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from '../../test/redis/redis-server.js';
import { Replica, eventually, type ReplicaConfig } from '../../test/redis/replicas.js';
import { round2, roundSummary, summarize } from '../lib/stats.js';
import type { Metric, Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';

const AGENTS = 100;
const BLOCK = 100;
const IN_FLIGHT = 16;
const LEASE_TTL_MS = 1000;
const SWEEP_MS = 100;

const elapsedUs = (start: number) => (performance.now() - start) * 1000;

/** Runs `count` calls of `op` with `inFlight` at a time; resolves to calls per second and the latencies (µs). */
async function throughput(count: number, inFlight: number, op: (i: number) => Promise<unknown>): Promise<{ perSecond: number; latenciesUs: number[] }> {
  const latenciesUs: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        const t0 = performance.now();
        await op(i);
        latenciesUs.push(elapsedUs(t0));
      }
    }),
  );
  return { perSecond: count / ((performance.now() - started) / 1000), latenciesUs };
}

async function singleReplica(context: ScenarioContext, redis: RedisServer) {
  const coordinator: RedisCoordinator = await redisCoordinator({ url: redis.url, prefix: 'bench-single', replicaId: 'bench' });
  const raw = createClient({ url: redis.url });
  raw.on('error', () => {});
  await raw.connect();
  try {
    const fleetGw = createGateway({ identify: () => undefined, coordinator });
    const memoryGw = createGateway({ identify: () => undefined });
    const viaRedis: number[] = [];
    const inMemory: number[] = [];
    const rawSet: number[] = [];
    let i = 0;
    const block = async (record: boolean) => {
      for (let n = 0; n < BLOCK; n++) {
        const t0 = performance.now();
        await fleetGw.recordSuccess(`agent-${i++ % AGENTS}`);
        if (record) viaRedis.push(elapsedUs(t0));
      }
      for (let n = 0; n < BLOCK; n++) {
        const t0 = performance.now();
        await memoryGw.recordSuccess(`agent-${i++ % AGENTS}`);
        if (record) inMemory.push(elapsedUs(t0));
      }
      for (let n = 0; n < BLOCK; n++) {
        const t0 = performance.now();
        await raw.set(`bench-raw-${i++ % AGENTS}`, 'x');
        if (record) rawSet.push(elapsedUs(t0));
      }
    };
    for (let b = 0; b < 5; b++) await block(false); // warm-up: scripts loaded, JIT, versions cached
    const blocks = context.samples(50, 5);
    for (let b = 0; b < blocks; b++) await block(true);
    context.log(`latency: ${viaRedis.length} samples per series`);

    const count = context.samples(20_000, 2_000);
    const rawRate = await throughput(count, IN_FLIGHT, (n) => raw.set(`bench-raw-${n % AGENTS}`, 'x'));
    const bindRate = await throughput(count, IN_FLIGHT, (n) => fleetGw.recordSuccess(`agent-${n % AGENTS}`));
    const writes = coordinator.stats().writes;
    return { viaRedis, inMemory, rawSet, rawRate, bindRate, writes };
  } finally {
    await raw.close();
    await coordinator.close();
  }
}

function replicaConfig(redis: RedisServer, prefix: string, replicaId: string): ReplicaConfig {
  return {
    url: redis.url,
    prefix,
    replicaId,
    leaseTtlMs: LEASE_TTL_MS,
    sweepMs: SWEEP_MS,
    heartbeatMs: 30_000,
    policy: {},
    agents: [],
  };
}

async function fleetThroughput(context: ScenarioContext, redis: RedisServer) {
  const replicas: Replica[] = [];
  try {
    for (const id of ['A', 'B', 'C']) replicas.push(await Replica.start({ ...replicaConfig(redis, 'bench-fleet', id), watchdog: false }, context.tag));
    const count = context.samples(20_000, 2_000);
    // Warm up each, then all three at once.
    await Promise.all(replicas.map((r) => r.request('benchBind', { count: 1000, concurrency: IN_FLIGHT, agentCount: AGENTS }, 60_000)));
    const runs = await Promise.all(
      replicas.map((r) => r.request<{ latenciesUs: number[]; wallMs: number }>('benchBind', { count, concurrency: IN_FLIGHT, agentCount: AGENTS }, 120_000)),
    );
    return runs.map((run) => ({ perSecond: count / (run.wallMs / 1000), latency: summarize(run.latenciesUs) }));
  } finally {
    for (const replica of replicas) await replica.exit().catch(() => replica.kill());
  }
}

async function failover(context: ScenarioContext, redis: RedisServer) {
  const replicas: Replica[] = [];
  const acquiredMs: number[] = [];
  const sweptMs: number[] = [];
  let next = 0;
  const start = async () => {
    const replica = await Replica.start(replicaConfig(redis, 'bench-failover', `R${next++}`), context.tag);
    replicas.push(replica);
    return replica;
  };
  try {
    for (let n = 0; n < 3; n++) await start();
    const rounds = context.samples(8, 3);
    for (let round = 0; round < rounds; round++) {
      const alive = replicas.filter((r) => r.alive);
      const leader = await eventually('a leader', async () => {
        for (const replica of alive) if ((await replica.request<{ leader: boolean }>('stats')).leader) return replica;
        return undefined;
      });
      // Let the leader renew at least once, so the kill lands at a random point of its lease.
      await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 400));
      const others = alive.filter((r) => r !== leader);
      const killedAt = performance.now();
      leader.signal('SIGKILL');
      const acquired = await eventually('a takeover', () => others.flatMap((r) => r.eventsNamed('lease:acquired', (e) => e.receivedAt > killedAt))[0], 10_000, 1);
      const swept = await eventually('a sweep by the new leader', () => others.flatMap((r) => r.eventsNamed('sweeping', (e) => e.receivedAt > killedAt))[0], 10_000, 1);
      acquiredMs.push(acquired.receivedAt - killedAt);
      sweptMs.push(swept.receivedAt - killedAt);
      await leader.kill();
      await start();
    }
    return { acquiredMs, sweptMs };
  } finally {
    for (const replica of replicas) await replica.exit().catch(() => replica.kill());
  }
}

export const redisScenario: Scenario = {
  name: 'redis',
  description: 'fleet on Redis: bind-record latency and throughput per replica (vs in-memory store and raw SET), lease failover time',
  timeoutMs: 300_000,
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    if (REDIS_SERVER === undefined) {
      context.log(`skipped: ${REDIS_SKIP_REASON}`);
      return { metrics: [], notes: [`redis: skipped — ${REDIS_SKIP_REASON}`], details: { skipped: REDIS_SKIP_REASON } };
    }
    const redis = await startRedisServer(context.tag);
    try {
      const single = await singleReplica(context, redis);
      context.log(`1 replica: ${Math.round(single.bindRate.perSecond)} records/s, raw SET ${Math.round(single.rawRate.perSecond)}/s`);
      const fleet = await fleetThroughput(context, redis);
      context.log(`3 replicas: ${fleet.map((r) => Math.round(r.perSecond)).join(', ')} records/s`);
      const lease = await failover(context, redis);
      context.log(`failover: ${lease.acquiredMs.map(Math.round).join(', ')} ms`);

      const viaRedis = summarize(single.viaRedis);
      const inMemory = summarize(single.inMemory);
      const rawSet = summarize(single.rawSet);
      const perReplica = summarize(fleet.map((r) => r.perSecond));
      const fleetP99 = Math.max(...fleet.map((r) => r.latency.p99));
      const acquired = summarize(lease.acquiredMs);
      const swept = summarize(lease.sweptMs);
      const metrics: Metric[] = [
        { name: 'bind record, 1 replica, p50', unit: 'µs', value: round2(viaRedis.p50), samples: viaRedis.n, baseline: { label: 'raw SET p50', value: round2(rawSet.p50) } },
        { name: 'bind record, 1 replica, p99', unit: 'µs', value: round2(viaRedis.p99), samples: viaRedis.n, baseline: { label: 'raw SET p99', value: round2(rawSet.p99) } },
        { name: 'bind record, in-memory store, p50', unit: 'µs', value: round2(inMemory.p50), samples: inMemory.n },
        { name: 'bind record, in-memory store, p99', unit: 'µs', value: round2(inMemory.p99), samples: inMemory.n },
        {
          name: `records/s, 1 replica, ${IN_FLIGHT} in flight`,
          unit: 'count',
          value: Math.round(single.bindRate.perSecond),
          baseline: { label: `raw SET/s, ${IN_FLIGHT} in flight`, value: Math.round(single.rawRate.perSecond) },
        },
        {
          name: `records/s per replica, 3 replicas, ${IN_FLIGHT} in flight each (median)`,
          unit: 'count',
          value: Math.round(perReplica.p50),
          samples: fleet.length,
          baseline: { label: '1 replica alone', value: Math.round(single.bindRate.perSecond) },
        },
        { name: 'bind record p99 under 3-replica load (worst replica)', unit: 'µs', value: round2(fleetP99), baseline: { label: '1 replica, 1 in flight, p99', value: round2(viaRedis.p99) } },
        {
          name: 'lease failover: SIGKILL → lease acquired, max',
          unit: 'ms',
          value: round2(acquired.max),
          samples: acquired.n,
          baseline: { label: 'leaseTtlMs', value: LEASE_TTL_MS },
          target: { of: 'value', op: '<=', limit: LEASE_TTL_MS + SWEEP_MS },
        },
        { name: 'lease failover: SIGKILL → lease acquired, p50', unit: 'ms', value: round2(acquired.p50), samples: acquired.n, baseline: { label: 'leaseTtlMs', value: LEASE_TTL_MS } },
        {
          name: 'lease failover: SIGKILL → first sweep by the new leader, max',
          unit: 'ms',
          value: round2(swept.max),
          samples: swept.n,
          baseline: { label: 'leaseTtlMs + one sweep', value: LEASE_TTL_MS + SWEEP_MS },
          target: { of: 'value', op: '<=', limit: LEASE_TTL_MS + SWEEP_MS },
        },
      ];
      return {
        metrics,
        notes: [
          'redis: a bind record is one EVALSHA (compare-and-set on the fleet epoch and the record version) when the replica saw the record last; raw SET is the floor of any Redis round trip.',
          `redis: the in-memory store is what a single-process gateway pays (Redis adds ${round2(viaRedis.p50 - inMemory.p50)} µs at p50).`,
          `redis: failover is bounded by what is left of the dead leader's lease (≤ ${LEASE_TTL_MS} ms, renewed every ${Math.floor(LEASE_TTL_MS / 3)} ms) plus the follower's retry at its PTTL; the first sweep follows within one ${SWEEP_MS} ms tick.`,
        ],
        details: {
          latencyUs: { redis: roundSummary(viaRedis), memory: roundSummary(inMemory), rawSet: roundSummary(rawSet) },
          throughput: { single: round2(single.bindRate.perSecond), rawSet: round2(single.rawRate.perSecond), fleet: fleet.map((r) => ({ perSecond: round2(r.perSecond), latencyUs: roundSummary(r.latency) })) },
          writes: single.writes,
          failoverMs: { acquired: lease.acquiredMs.map(round2), swept: lease.sweptMs.map(round2) },
        },
      };
    } finally {
      await redis.stop();
    }
  },
};
