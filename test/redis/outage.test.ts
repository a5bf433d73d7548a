/**
 * Redis unavailable: a tool call never fails and never waits long (a stalled Redis costs one
 * `writeTimeoutMs`, a dead one nothing), bind writes are buffered within bounds, reported, and
 * written once Redis is back; the epoch survives Redis losing its data, and so does the lease's
 * fencing order. Each test runs its own `redis-server`, which it stalls (SIGSTOP), kills or
 * empties.
 */
import test, { type ExecutionContext } from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createGateway, type Gateway } from '../../src/gateway/index.js';
import { redisCoordinator, type RedisCoordinator, type RedisCoordinatorEvents, type RedisCoordinatorOptions } from '../../src/redis/index.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import { refusedUrl, useFixtureTag } from '../helpers/fixtures.js';
import { REDIS_SERVER, REDIS_SKIP_REASON, startRedisServer, type RedisServer } from './redis-server.js';
import { eventually } from './replicas.js';
import { rawClient, uniquePrefix } from './helpers.js';

/** Scheduling noise allowed on top of a configured bound (shared 2-core machine). */
const SLACK_MS = 150;
const skip = REDIS_SERVER === undefined;
const redisTest = skip ? test.skip : test.serial;
if (skip) test.skip(`Redis outage tests skipped: ${REDIS_SKIP_REASON}`, () => {});

interface Rig {
  redis: RedisServer;
  prefix: string;
  join(replicaId: string, over?: Partial<RedisCoordinatorOptions>): Promise<RedisCoordinator>;
  events<Name extends keyof RedisCoordinatorEvents>(coordinator: RedisCoordinator, name: Name): Array<RedisCoordinatorEvents[Name]>;
}

async function rig(t: ExecutionContext): Promise<Rig> {
  const tag = useFixtureTag(t, 'redis-outage');
  const redis = await startRedisServer(tag);
  const opened: RedisCoordinator[] = [];
  t.teardown(async () => {
    redis.signal('SIGCONT');
    for (const coordinator of opened) await coordinator.close();
    await redis.stop();
  });
  const prefix = uniquePrefix('outage');
  return {
    redis,
    prefix,
    async join(replicaId, over = {}) {
      const coordinator = await redisCoordinator({ url: redis.url, prefix, replicaId, connectTimeoutMs: 20_000, ...over });
      opened.push(coordinator);
      return coordinator;
    },
    events(coordinator, name) {
      const seen: Array<RedisCoordinatorEvents[typeof name]> = [];
      coordinator.on(name, (payload) => seen.push(payload));
      return seen;
    },
  };
}

/** An McpServer with one tool, attached to `gw`, and a connected client for `agent`. */
async function toolHost(t: ExecutionContext, gw: Gateway, agent: string): Promise<{ call(): Promise<number> }> {
  const server = new McpServer({ name: 'replica', version: '1.0.0' });
  gw.attach(server);
  server.registerTool('work', { description: 'does work' }, () => ({ content: [{ type: 'text', text: 'done' }] }));
  const sessions = new Map<string, string>();
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const sessionId = gw.sessionIdGenerator()();
  sessions.set(sessionId, agent);
  serverSide.sessionId = sessionId;
  await server.connect(serverSide);
  const client = new Client({ name: agent, version: '1.0.0' });
  await client.connect(clientSide);
  t.teardown(async () => {
    await client.close();
    await server.close();
  });
  return {
    /** Calls the tool; resolves to how long the call took (ms). */
    async call() {
      const started = performance.now();
      const result = await client.callTool({ name: 'work', arguments: {} });
      if (result.isError) throw new Error('tool call failed');
      return performance.now() - started;
    },
  };
}

/** Identifies agents by the session the test minted for them. */
function gatewayOf(coordinator: RedisCoordinator, agent: string): Gateway {
  return createGateway({ identify: () => agent, coordinator });
}

redisTest('Redis stalled (SIGSTOP): a tool call waits at most writeTimeoutMs once, then not at all; its bind lands after SIGCONT', async (t) => {
  const { redis, join, events } = await rig(t);
  const writeTimeoutMs = 200;
  const a = await join('A', { writeTimeoutMs });
  const gw = gatewayOf(a, 'agent-1');
  const host = await toolHost(t, gw, 'agent-1');
  const buffered = events(a, 'writes:buffered');
  const flushed = events(a, 'writes:flushed');
  t.true((await host.call()) < 100 + SLACK_MS, 'a healthy Redis costs a round trip');

  redis.signal('SIGSTOP');
  const first = await host.call();
  t.log(`first call while Redis is stalled: ${Math.round(first)} ms`);
  t.true(first < writeTimeoutMs + SLACK_MS, `first call took ${Math.round(first)} ms`);
  const later = [await host.call(), await host.call(), await host.call()];
  t.true(later.every((ms) => ms < 50 + SLACK_MS), `later calls took ${later.map(Math.round).join(', ')} ms`);
  t.is(buffered.length, 1, 'reported once, not once per write');
  t.like(a.stats().writes, { buffered: 4, pending: 4, failed: 0 });

  redis.signal('SIGCONT');
  await eventually('the held writes flushed', () => flushed.length > 0);
  t.like(flushed[0], { flushed: 4, stale: 0 });
  const b = await join('B');
  t.true((await gatewayOf(b, 'x').status('agent-1')).bound, 'another replica sees the bind');
  t.true((await host.call()) < 100 + SLACK_MS, 'and writes go straight through again');
  t.like(a.stats().writes, { pending: 0, flushed: 4 });
});

redisTest('Redis killed: writes are held at once, status lookups fail fast; after a restart the epoch is restored and the writes land', async (t) => {
  const { redis, join, events } = await rig(t);
  const a = await join('A', { epochRefreshMs: 100 });
  const gw = gatewayOf(a, 'agent-1');
  const host = await toolHost(t, gw, 'agent-1');
  const epoch = gw.epoch;
  const down = events(a, 'redis:down');
  const changes = events(a, 'epoch:changed');
  await host.call();

  redis.signal('SIGKILL');
  await redis.exited();
  await eventually('the coordinator saw Redis go', () => down.length > 0);
  const calls = [await host.call(), await host.call()];
  t.true(calls.every((ms) => ms < 50 + SLACK_MS), `calls took ${calls.map(Math.round).join(', ')} ms`);
  const started = performance.now();
  await t.throwsAsync(gw.status('agent-1'));
  t.true(performance.now() - started < 1000 + SLACK_MS, 'a status lookup fails within the command timeout');
  await t.throwsAsync(gw.bump(), { code: 'SERVER_UNREACHABLE' } as never);
  t.is(gw.epoch, epoch, 'a bump that could not reach the fleet changed nothing');

  await redis.restart(); // empty: nothing was persisted
  await eventually('writes flushed', () => a.stats().writes.pending === 0 && a.stats().connected, 10_000);
  t.is(gw.epoch, epoch, 'the epoch survived Redis losing its data');
  t.deepEqual(changes.map((c) => c.source), ['restored']);
  const b = await join('B');
  t.is(b.epochs.current, epoch, 'a replica joining afterwards finds it');
  t.true((await gatewayOf(b, 'x').status('agent-1')).bound, 'and the binds held during the outage');
  t.like(a.stats().writes, { buffered: 2, flushed: 2, dropped: 0, failed: 0 });
});

redisTest('the buffer is bounded: beyond maxBufferedWrites the oldest agent\'s writes are dropped and reported', async (t) => {
  const { redis, join, events } = await rig(t);
  const a = await join('A', { maxBufferedWrites: 3 });
  const gw = createGateway({ identify: () => undefined, coordinator: a });
  const dropped = events(a, 'writes:dropped');
  redis.signal('SIGKILL');
  await redis.exited();
  await eventually('offline', () => !a.stats().connected);
  for (let i = 0; i < 5; i++) t.true(await gw.recordSuccess(`agent-${i}`), 'the tool call is never told');
  await eventually('the drops reported', () => dropped.reduce((sum, e) => sum + e.dropped, 0) === 2);
  t.like(a.stats().writes, { buffered: 5, dropped: 2, pending: 3 });

  await redis.restart();
  await eventually('flushed', () => a.stats().writes.pending === 0 && a.stats().connected, 10_000);
  const bound = await Promise.all([0, 1, 2, 3, 4].map(async (i) => (await gw.status(`agent-${i}`)).bound));
  t.deepEqual(bound, [false, false, true, true, true], 'the two oldest were dropped');
});

redisTest('Redis loses its data (FLUSHALL): the leader steps down, the lease is re-acquired with a higher token, the epoch is restored', async (t) => {
  const { redis, prefix, join, events } = await rig(t);
  const a = await join('A', { epochRefreshMs: 100 });
  const b = await join('B', { epochRefreshMs: 100 });
  const epoch = a.epochs.current;
  const leases = [a, b].map((c) => c.leadership({ ttlMs: 600 }));
  const lost = [events(a, 'lease:lost'), events(b, 'lease:lost')];
  leases.forEach((lease) => lease.start());
  const leader = await eventually('a leader', () => leases.find((lease) => lease.fence() !== undefined));
  const token = leader.fence()!.token;

  const raw = await rawClient(redis.url);
  t.teardown(() => raw.close());
  await raw.flushAll();
  await eventually('the old lease given up', () => lost.flat().some((e) => e.token === token && e.reason === 'taken'), 5000);
  const next = await eventually('a new lease', () => leases.map((lease) => lease.fence()).find((fence) => fence !== undefined && fence.token !== token), 5000);
  t.true(next.token > token, `token ${next.token} after ${token}: fencing order kept although Redis lost its counter`);
  await eventually('the epoch restored in Redis', async () => (await raw.get(`{${prefix}}:epoch`)) === epoch, 5000);
  t.is(a.epochs.current, epoch);
  t.is(b.epochs.current, epoch);
  await Promise.all(leases.map((lease) => lease.stop()));
});

test('redisCoordinator rejects within connectTimeoutMs when Redis cannot be reached, and leaves nothing running', async (t) => {
  const url = (await refusedUrl()).replace(/^http:/, 'redis:').replace(/\/mcp$/, '');
  const before = process.getActiveResourcesInfo().length;
  const started = performance.now();
  const error = await t.throwsAsync(redisCoordinator({ url, prefix: 'p', replicaId: 'r', connectTimeoutMs: 300 }));
  const elapsed = performance.now() - started;
  t.true(isMcpSupervisorError(error));
  t.is((error as { code?: string }).code, 'SERVER_UNREACHABLE');
  t.regex(error!.message, /Could not connect to Redis at redis:\/\/127\.0\.0\.1:\d+ within 300 ms/);
  // Bounded by the timeout, not by the reconnect loop (which would retry forever).
  t.true(elapsed < 300 + 1000, `rejected after ${Math.round(elapsed)} ms`);
  await eventually('no socket or timer left', () => process.getActiveResourcesInfo().length <= before, 2000);
  t.pass();
});
