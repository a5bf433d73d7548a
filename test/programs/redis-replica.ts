/**
 * One gateway replica of a fleet, as its own process, for the Redis fleet tests and the bench.
 *
 * argv[2] is a JSON {@link ReplicaConfig}. It builds a coordinator, a gateway and a watchdog
 * exactly as a host would (`redisCoordinator` → `createGateway({ coordinator })` →
 * `createWatchdog({ coordinator, leaseTtlMs })` → `start()`), then takes one JSON command per
 * line on stdin and answers one JSON line per command on stdout (`{ id, ok, result | error }`).
 * Unprompted lines are events: `{ event, at, … }` (`at`: this process's monotonic ms), among
 * them every coordinator event, each sweep that did something, every recovery, and `gated` when
 * a status lookup blocks (see `gateAfter`).
 *
 * The host's view of its agents is simple: every listed agent is connected and heartbeats every
 * `heartbeatMs`; an agent is bound only if someone records a success for it. A recovery is only
 * reported (nothing is relaunched), so a stuck agent stays stuck and the grace is what protects it.
 *
 * `exit` stops the watchdog and closes the coordinator, then lets the process end by itself: a
 * handle left open would keep it alive, and the test would see that.
 */
import { createInterface } from 'node:readline';
import { createGateway, createWatchdog, type PolicyConfig, type SweepResult } from '../../src/gateway/index.js';
import { redisCoordinator } from '../../src/redis/index.js';
import type { RedisCoordinatorEvents } from '../../src/redis/index.js';

/** Configuration of one replica. */
export interface ReplicaConfig {
  url: string;
  prefix: string;
  replicaId: string;
  leaseTtlMs: number;
  sweepMs: number;
  heartbeatMs: number;
  policy: Partial<PolicyConfig>;
  agents: string[];
  /** Per agent: the status lookup after this many blocks until `release`. */
  gateAfter?: Record<string, number>;
  writeTimeoutMs?: number;
  epochRefreshMs?: number;
  connectTimeoutMs?: number;
  /** Start the watchdog (default true). */
  watchdog?: boolean;
}

const config = JSON.parse(process.argv[2] ?? '{}') as ReplicaConfig;
const write = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const emit = (event: string, detail: object = {}) => write({ event, at: performance.now(), ...detail });

const coord = await redisCoordinator({
  url: config.url,
  prefix: config.prefix,
  replicaId: config.replicaId,
  ...(config.writeTimeoutMs === undefined ? {} : { writeTimeoutMs: config.writeTimeoutMs }),
  ...(config.epochRefreshMs === undefined ? {} : { epochRefreshMs: config.epochRefreshMs }),
  ...(config.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: config.connectTimeoutMs }),
  onError: (error, context) => emit('error', { context, message: String(error) }),
});
const names: Array<keyof RedisCoordinatorEvents> = ['redis:down', 'redis:up', 'epoch:changed', 'lease:acquired', 'lease:lost', 'writes:buffered', 'writes:flushed', 'writes:dropped'];
for (const name of names) coord.on(name, (payload) => emit(name, payload));

const gw = createGateway({ identify: () => undefined, coordinator: coord, onError: (error, context) => emit('error', { context, message: String(error) }) });

let agents = [...config.agents];
const lookups = new Map<string, number>();
const gates = new Map<string, () => void>();
const released = new Set<string>();

async function status(agent: string) {
  const seen = (lookups.get(agent) ?? 0) + 1;
  lookups.set(agent, seen);
  const after = config.gateAfter?.[agent];
  if (after !== undefined && seen > after && !released.has(agent)) {
    emit('gated', { agent });
    await new Promise<void>((resolve) => gates.set(agent, resolve));
  }
  return gw.status(agent);
}

const dog = createWatchdog({
  recover: true,
  coordinator: coord,
  leaseTtlMs: config.leaseTtlMs,
  intervalMs: config.sweepMs,
  policy: config.policy,
  agents: () => {
    emit('sweeping');
    return agents;
  },
  session: () => ({ connected: true, heartbeatIntervalMs: config.heartbeatMs }),
  status,
  recoverAgent: (agent, reason, context) => {
    emit('recovered', { agent, reason, token: context.leaseToken });
  },
  onSweep: (results: readonly SweepResult[]) => {
    if (results.length > 0) emit('sweep', { results });
  },
  onError: (error, context) => emit('error', { context, message: String(error) }),
});
if (config.watchdog !== false) dog.start();

/** A background load: every agent of the list gets a success every `everyMs`. */
let load: { timer: NodeJS.Timeout | undefined; ok: number; dropped: number; failed: number; maxMs: number } | undefined;

function startLoad(list: string[], everyMs: number): void {
  const state: NonNullable<typeof load> = { timer: undefined, ok: 0, dropped: 0, failed: 0, maxMs: 0 };
  state.timer = setInterval(() => {
    for (const agent of list) {
      const started = performance.now();
      gw.recordSuccess(agent).then(
        (written) => {
          state.maxMs = Math.max(state.maxMs, performance.now() - started);
          if (written) state.ok++;
          else state.dropped++;
        },
        () => {
          state.failed++;
        },
      );
    }
  }, everyMs);
  load = state;
}

async function benchBind(count: number, concurrency: number, agentCount: number): Promise<{ latenciesUs: number[]; wallMs: number }> {
  const latenciesUs: number[] = [];
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const t0 = performance.now();
      await gw.recordSuccess(`bench-${config.replicaId}-${i % agentCount}`);
      latenciesUs.push((performance.now() - t0) * 1000);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { latenciesUs, wallMs: performance.now() - started };
}

let closing: Promise<void> | undefined;
/** Stops everything this replica started; the process then ends by itself. */
function shutdown(): Promise<void> {
  closing ??= (async () => {
    if (load !== undefined) clearInterval(load.timer);
    for (const release of gates.values()) release();
    await dog.stop();
    await coord.close();
  })();
  return closing;
}

type Command = { id: number; cmd: string; [key: string]: unknown };

async function handle(command: Command): Promise<unknown> {
  switch (command.cmd) {
    case 'bind':
      return gw.recordSuccess(String(command['agent']));
    case 'bindIn':
      return gw.recordSuccess(String(command['agent']), { epoch: String(command['epoch']) });
    case 'status':
      return gw.status(String(command['agent']));
    case 'statuses': {
      const list = command['agents'] as string[];
      return Promise.all(list.map((agent) => gw.status(agent)));
    }
    case 'epoch':
      return gw.epoch;
    case 'bump':
      return gw.bump();
    case 'stats':
      return { ...coord.stats(), watchdogLeader: dog.leader };
    case 'agents':
      agents = command['agents'] as string[];
      return agents;
    case 'release': {
      const agent = String(command['agent']);
      released.add(agent);
      gates.get(agent)?.();
      gates.delete(agent);
      return true;
    }
    case 'load':
      startLoad(command['agents'] as string[], Number(command['everyMs']));
      return true;
    case 'stopLoad': {
      if (load !== undefined) clearInterval(load.timer);
      const { ok, dropped, failed, maxMs } = load ?? { ok: 0, dropped: 0, failed: 0, maxMs: 0 };
      load = undefined;
      return { ok, dropped, failed, maxMs };
    }
    case 'log':
      return coord.recoveryLog();
    case 'benchBind':
      return benchBind(Number(command['count']), Number(command['concurrency']), Number(command['agentCount']));
    case 'exit':
      await shutdown();
      setImmediate(() => lines.close());
      return true;
    default:
      throw new Error(`unknown command ${command.cmd}`);
  }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  let command: Command;
  try {
    command = JSON.parse(line) as Command;
  } catch {
    return;
  }
  handle(command).then(
    (result) => write({ id: command.id, ok: true, result }),
    (error: unknown) => write({ id: command.id, ok: false, error: String(error) }),
  );
});
// stdin closed without `exit` (the test runner died): leave the fleet all the same.
lines.on('close', () => {
  process.stdin.destroy();
  void shutdown();
});
emit('ready', { pid: process.pid, epoch: gw.epoch });
