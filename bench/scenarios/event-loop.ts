/**
 * Scenario `event-loop`: how much discovering a big catalog stalls the host's main event loop.
 *
 * The same 20 stdio servers × 200 tools with large output schemas are discovered, in one run,
 * while the main thread is watched (`bench/lib/loop-watch.ts`: event-loop delay at 1 ms
 * resolution, time in stalls, main-thread CPU and run-queue wait):
 *   - pool (the figure): `DiscoveryCoordinator` with 2 threads and `serverConcurrency` 4, the 20
 *     servers split into 2 profiles of 10. A body owns its worker for its whole life, so one
 *     profile of 20 runs on one thread and leaves the other idle; two profiles keep both threads
 *     busy, the shape of a multi-profile host and the worst case for CPU contention with the main
 *     thread. The 1-profile layout is measured too, for comparison. The main thread only receives
 *     one structured-clone message per server;
 *   - SDK on the main thread (the baseline, what hosts do today): 20 × `new Client` +
 *     `StdioClientTransport` + `listTools()`, all at once. `listTools()` compiles every output
 *     schema with Ajv, on the main thread.
 *
 * The pool's stalls are short and come mostly from the OS scheduler (2 cores shared by 2 busy
 * workers, up to 8 servers booting, and other tenants), so one window's maximum is a lottery:
 * each pool layout is run 3 times (interleaved) and the figure is the median of the per-run
 * maxima, with the worst run shown next to it. The main-thread baseline is run once: its stalls
 * are CPU work measured in seconds. The pool runs go first, so the main-thread run's garbage
 * cannot land a GC pause in a pool window; a warm-up (one server, main thread) fills the file
 * cache and JITs the SDK first. A window ends when every server is ready with the expected tool
 * count (asserted); closing the servers is outside it.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { DiscoveryCoordinator, type SettledOutcome } from '../../src/discovery/index.js';
import { parseProfileConfig, type ServerConfig } from '../../src/index.js';
import { BASE_TOOL_NAMES } from '../../test/fixtures/tools.js';
import { stdioFixtureConfig, type StdioServerConfig } from '../../test/helpers/fixtures.js';
import { watchMainThread, type LoopWatch } from '../lib/loop-watch.js';
import { round2, roundSummary, summarize } from '../lib/stats.js';
import type { Metric, Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { withDeadline } from '../lib/wait.js';

const POOL_THREADS = 2;
const SERVER_CONCURRENCY = 4;
/** Profiles of the layout the target applies to. */
const PROFILES = 2;
/** Target: the main-thread SDK's max event-loop delay is at least this many times the pool's. */
const MAX_RATIO_TARGET = 20;
const STALL_MS = 50;
const READY_TIMEOUT_MS = 120_000;

function describeOutcome(outcome: SettledOutcome, expectedTools: number): string {
  if (outcome.status === 'ready') return `${outcome.server}: ${outcome.tools.length} tools, expected ${expectedTools}`;
  if (outcome.status === 'failed') return `${outcome.server}: failed (${outcome.failure.kind}) ${outcome.failure.message}`;
  return `${outcome.server}: ${outcome.status}`;
}

/** One profile's discovery: `ready` once every server is ready, `done` once its body finished. */
interface ProfileRun {
  ready: Promise<number[]>;
  done: Promise<void>;
}

function startProfile(coordinator: DiscoveryCoordinator, key: string, servers: readonly ServerConfig[], expectedTools: number): ProfileRun {
  const listMs: number[] = [];
  let settled = 0;
  let resolveReady!: (listMs: number[]) => void;
  let rejectReady!: (error: Error) => void;
  let resolveDone!: () => void;
  let rejectDone!: (error: Error) => void;
  const ready = new Promise<number[]>((resolve, reject) => ((resolveReady = resolve), (rejectReady = reject)));
  const done = new Promise<void>((resolve, reject) => ((resolveDone = resolve), (rejectDone = reject)));
  // The caller awaits `ready` first and may bail out before it awaits `done`: never unhandled.
  ready.catch(() => undefined);
  done.catch(() => undefined);
  coordinator.start(key, servers, {
    onOutcome: (outcome) => {
      settled++;
      if (outcome.status !== 'ready' || outcome.tools.length !== expectedTools) {
        rejectReady(new Error(`pool, profile ${key}: ${describeOutcome(outcome, expectedTools)}`));
        return;
      }
      listMs.push(outcome.timings.listMs ?? Number.NaN);
      if (settled === servers.length) resolveReady(listMs);
    },
    onDone: ({ error }) => {
      if (settled < servers.length) rejectReady(new Error(`pool, profile ${key}: body ended after ${settled}/${servers.length} servers: ${error?.message ?? 'no error'}`));
      if (error === undefined) resolveDone();
      else rejectDone(error);
    },
  });
  return { ready, done };
}

interface PoolRun {
  watch: LoopWatch;
  /** Per-server `tools/list` (and prompts/resources) time inside the workers. */
  listMs: number[];
  peakWorkers: number;
}

/** Discovers every profile in a fresh coordinator; the window closes when all servers are ready. */
async function discoverInPool(profiles: readonly ServerConfig[][], expectedTools: number): Promise<PoolRun> {
  const coordinator = new DiscoveryCoordinator({ maxThreads: POOL_THREADS, serverConcurrency: SERVER_CONCURRENCY, connectTimeoutMs: READY_TIMEOUT_MS });
  try {
    let runs: ProfileRun[] = [];
    const { result, watch } = await watchMainThread(async () => {
      runs = profiles.map((servers, index) => startProfile(coordinator, `bench-event-loop-${index}`, servers, expectedTools));
      const listMs = await withDeadline('every server to be ready (pool)', Promise.all(runs.map((run) => run.ready)), READY_TIMEOUT_MS);
      return { listMs: listMs.flat(), peakWorkers: coordinator.stats().peakWorkers };
    }, { stallMs: STALL_MS });
    // Outside the window: let each body close its servers and finish.
    await withDeadline('the discovery bodies to finish (pool)', Promise.all(runs.map((run) => run.done)), 30_000);
    return { watch, ...result };
  } finally {
    await coordinator.close();
  }
}

/** What hosts do today: one SDK client per server, on the main thread, all at once. */
async function discoverOnMainThread(configs: readonly StdioServerConfig[], expectedTools: number): Promise<LoopWatch> {
  const opened: Client[] = [];
  try {
    const { watch } = await watchMainThread(async () => {
      const connectAll = configs.map(async (config, index) => {
        const transport = new StdioClientTransport({ command: config.command, args: config.args, env: config.env, stderr: 'pipe' });
        let stderrText = '';
        transport.stderr?.on('data', (chunk: Buffer) => {
          stderrText = (stderrText + chunk.toString('utf8')).slice(-2000);
        });
        const client = new Client({ name: 'bench-host', version: '0.0.0' });
        opened.push(client);
        try {
          await client.connect(transport);
          const { tools, nextCursor } = await client.listTools();
          if (tools.length !== expectedTools || nextCursor !== undefined) {
            throw new Error(`${tools.length} tools (next cursor ${String(nextCursor)}), expected ${expectedTools} in one page`);
          }
        } catch (error) {
          throw new Error(`main thread, server ${index}: ${error instanceof Error ? error.message : String(error)}; stderr: ${stderrText}`);
        }
      });
      await withDeadline('every server to be ready (main thread)', Promise.all(connectAll), READY_TIMEOUT_MS);
    }, { stallMs: STALL_MS });
    return watch;
  } finally {
    // Closes stdin; the fixtures exit on EOF (the SDK escalates to SIGTERM/SIGKILL after 2 s each).
    await Promise.allSettled(opened.map((client) => client.close()));
  }
}

/** Splits the servers round-robin into `count` profiles. */
function splitProfiles(configs: readonly StdioServerConfig[], count: number): ServerConfig[][] {
  return Array.from({ length: count }, (_, profile) => {
    const mcpServers = Object.fromEntries(
      configs.flatMap((config, index) => (index % count === profile ? [[`s${String(index + 1).padStart(2, '0')}`, config]] : [])),
    );
    return Object.values(parseProfileConfig({ mcpServers }, { profile: `p${profile}` }).servers);
  });
}

type WatchField = 'max' | 'p99' | 'stalledMs' | 'cpuMs' | 'runQueueMs' | 'wallMs';

/** Median (nearest rank) of one field over the runs; NaN when a run lacks it. */
function medianOf(runs: readonly PoolRun[], field: WatchField): number {
  return round2(summarize(runs.map((run) => run.watch[field] ?? Number.NaN)).p50);
}

/** Main-thread event-loop delay while 20 × 200-tool catalogs are discovered: pool vs SDK on the main thread. */
export const eventLoopScenario: Scenario = {
  name: 'event-loop',
  description: 'main-thread event-loop delay while 20 stdio servers × 200 tools with output schemas are discovered: pool vs SDK on the main thread',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const serverCount = context.quick ? 6 : 20;
    const toolCount = context.quick ? 50 : 200;
    const repetitions = context.samples(3, 1);
    const flags = ['--tools', String(toolCount), '--output-schemas'];
    const expectedTools = toolCount + BASE_TOOL_NAMES.length;
    const configs = Array.from({ length: serverCount }, () => stdioFixtureConfig(flags, { tag: context.tag }));
    const layouts = [PROFILES, 1];
    const layoutName = (profiles: number): string => `${profiles}x${serverCount / profiles}`;

    context.log('warm-up (1 server, main thread)');
    await discoverOnMainThread(configs.slice(0, 1), expectedTools);
    const pools = new Map<number, PoolRun[]>(layouts.map((profiles) => [profiles, []]));
    for (let repetition = 1; repetition <= repetitions; repetition++) {
      for (const profiles of layouts) {
        context.log(`pool ${layoutName(profiles)} (${serverCount} servers × ${toolCount} tools, ${POOL_THREADS} threads), run ${repetition}/${repetitions}`);
        pools.get(profiles)?.push(await discoverInPool(splitProfiles(configs, profiles), expectedTools));
      }
    }
    context.log(`SDK on the main thread (${serverCount} servers × ${toolCount} tools)`);
    const main = await discoverOnMainThread(configs, expectedTools);

    const runsLabel = repetitions === 1 ? '' : `, median of ${repetitions}`;
    const againstMain = (name: string, field: WatchField, runs: readonly PoolRun[], label: string): Metric => ({
      name,
      unit: 'ms',
      value: medianOf(runs, field),
      ...(repetitions === 1 ? {} : { samples: repetitions }),
      baseline: { label, value: main[field] ?? Number.NaN },
      ratio: 'baseline/value',
    });
    const metrics: Metric[] = [];
    for (const profiles of layouts) {
      const runs = pools.get(profiles) ?? [];
      const layout = layoutName(profiles);
      if (profiles === PROFILES) {
        metrics.push(
          {
            ...againstMain(`loop delay max, pool ${layout}${runsLabel}`, 'max', runs, 'max, SDK main thread'),
            // The target is for the full catalog; a --quick catalog is a small fraction of that work.
            ...(context.quick ? {} : { target: { of: 'ratio', op: '>=', limit: MAX_RATIO_TARGET } as const }),
          },
          ...(repetitions === 1
            ? []
            : [{ ...againstMain(`loop delay max, pool ${layout}, worst of ${repetitions}`, 'max', runs, 'max, SDK main thread'), value: Math.max(...runs.map((run) => run.watch.max)) }]),
          againstMain(`loop delay p99 per tick, pool ${layout}`, 'p99', runs, 'p99, SDK main thread'),
          againstMain(`time in stalls >= ${STALL_MS} ms, pool ${layout}`, 'stalledMs', runs, 'SDK main thread'),
          againstMain(`main-thread CPU, pool ${layout}`, 'cpuMs', runs, 'SDK main thread'),
          againstMain(`main-thread run-queue wait, pool ${layout}`, 'runQueueMs', runs, 'SDK main thread'),
        );
      } else {
        metrics.push(againstMain(`loop delay max, pool ${layout}${runsLabel}`, 'max', runs, 'max, SDK main thread'));
      }
      metrics.push({ ...againstMain(`wall to all ready, pool ${layout}`, 'wallMs', runs, 'wall, SDK main thread'), ratio: 'value/baseline' });
    }
    return {
      metrics,
      notes: [
        `event-loop: ${serverCount} stdio servers × ${toolCount} tools with --output-schemas (${expectedTools} tools each, asserted in every run).`,
        `  pool: DiscoveryCoordinator, ${POOL_THREADS} threads, serverConcurrency ${SERVER_CONCURRENCY}; the target applies to ${layoutName(PROFILES)} (${PROFILES} profiles keep both threads busy:`,
        `  a body owns its worker, so 1x${serverCount} runs on one thread). Each pool layout runs ${repetitions}× interleaved; pool figures are medians over the runs.`,
        '  baseline: the same servers through the SDK on the main thread, once (Client + StdioClientTransport + listTools(), all at once; Ajv compiles each output schema).',
        '  loop delay: monitorEventLoopDelay, 1 ms resolution (includes the 1 ms period); p99 is per tick (one 3 s stall is one tick).',
        `  time in stalls: wall time of ticks >= ${STALL_MS} ms. CPU / run-queue wait: main thread's own schedstat; window = start → all servers ready.`,
        '  ratio (b/v) = SDK main thread / pool.',
      ],
      details: {
        servers: serverCount,
        toolsPerServer: expectedTools,
        poolThreads: POOL_THREADS,
        serverConcurrency: SERVER_CONCURRENCY,
        repetitions,
        pool: layouts.map((profiles) => ({
          layout: layoutName(profiles),
          profiles,
          runs: (pools.get(profiles) ?? []).map((run) => ({
            loop: run.watch,
            peakWorkers: run.peakWorkers,
            workerListMs: roundSummary(summarize(run.listMs)),
          })),
        })),
        mainThread: { loop: main },
      },
    };
  },
};
