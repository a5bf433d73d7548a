/**
 * Scenario `scale`: 100 profiles × 5 distinct stdio servers (500 server processes) discovered by
 * one host — wall time and peak RSS, both measured — with the spawn-bound floor measured beside it
 * in the same run, so the ratio says how close to the floor the library is.
 *
 * Every one of the 500 servers is distinct (an env var `BENCH_SCALE_ID=<profile>-<server>` changes
 * each fingerprint), so nothing can be shared: this is the cost of 500 discoveries.
 *
 *   - library: `createHost` with 100 profiles, `host.start()` → every `host.ready()` settled.
 *     Default discovery options; `sessions.eager: false`, so that the window is discovery alone and
 *     the host does not go on to keep 500 live server processes (≈ 60 MB RSS each: more memory than
 *     this machine has). Peak RSS of the host process (threads included), sampled every 25 ms;
 *   - floor, raw SDK: the same 500 configs through the raw SDK on the main thread — spawn,
 *     `initialize`, `tools/list` (no Ajv), then close in the background, as the library's
 *     discovery releases a finished connection — at the library's own discovery concurrency
 *     (`maxThreads × serverConcurrency` of its defaults). What the same work costs without the
 *     library; its peak RSS is the RSS baseline. Run as two halves, one before and one after the
 *     library, so slow drift in the machine's load falls on both;
 *   - floor, bare spawn: 500 × `node <fixture> --exit-at-start 0` (Node starts, reads its flags,
 *     exits before loading the SDK) at the same concurrency, also in two halves: the cost of
 *     starting 500 Node processes at all on this machine.
 */
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createHost } from '../../src/index.js';
import { resolveDiscoveryOptions } from '../../src/discovery/index.js';
import { BASE_TOOL_NAMES } from '../../test/fixtures/tools.js';
import { FIXTURE_TAG_ENV, STDIO_FIXTURE, stdioFixtureConfig, type StdioServerConfig } from '../../test/helpers/fixtures.js';
import { mapLimit } from '../lib/concurrency.js';
import { settleHeap } from '../lib/gc.js';
import { round2 } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { withDeadline } from '../lib/wait.js';
import { listToolsInline, since } from './sdk-baseline.js';

const SERVERS = 5;
const TOOLS = 5;
const MB = 1024 * 1024;
const LIBRARY_TIMEOUT_MS = 300_000;

/** Runs `work` while sampling this process's RSS every 25 ms; resolves with its wall time and the peak. */
async function measured<T>(work: () => Promise<T>): Promise<{ result: T; wallMs: number; peakRssMb: number }> {
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 25);
  const start = performance.now();
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { result, wallMs: since(start), peakRssMb: peak / MB };
  } finally {
    clearInterval(sampler);
  }
}

/**
 * Spawn, initialize, tools/list (no Ajv) with the raw SDK, then close in the background (as the
 * library's discovery releases a finished connection in the background); the close is pushed to
 * `closing`. A failure is returned (with the stderr tail), not thrown.
 */
async function rawDiscovery(config: StdioServerConfig, expected: number, closing: Promise<void>[]): Promise<string | undefined> {
  const transport = new StdioClientTransport({ command: config.command, args: config.args, env: { ...config.env, PATH: process.env['PATH'] ?? '' }, stderr: 'pipe' });
  let stderrText = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderrText = (stderrText + chunk.toString('utf8')).slice(-1000);
  });
  const client = new Client({ name: 'bench-baseline', version: '1.0.0' });
  client.onerror = () => undefined;
  try {
    await client.connect(transport);
    const tools = await listToolsInline(client);
    return tools.length === expected ? undefined : `${tools.length} tools, expected ${expected}`;
  } catch (error) {
    return `${error instanceof Error ? error.message : String(error)}; stderr: ${stderrText.trim()}`;
  } finally {
    closing.push(client.close());
  }
}

/** Starts `node <fixture> --exit-at-start 0` and resolves when it exited. */
function bareSpawn(tag: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [STDIO_FIXTURE, '--exit-at-start', '0'], { stdio: 'ignore', env: { PATH: process.env['PATH'] ?? '', [FIXTURE_TAG_ENV]: tag } });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bare spawn exited with ${String(code)}`))));
  });
}

export const scaleScenario: Scenario = {
  name: 'scale',
  description: 'discovery of 100 profiles × 5 distinct servers: wall and peak RSS vs the spawn-bound floor (raw SDK, same concurrency; bare node spawns)',
  timeoutMs: 600_000,
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const profiles = context.samples(100, 4);
    const defaults = resolveDiscoveryOptions({});
    const concurrency = defaults.maxThreads * defaults.serverConcurrency;
    const expected = TOOLS + BASE_TOOL_NAMES.length;
    const configs = Array.from({ length: profiles }, (_, profile) =>
      Array.from({ length: SERVERS }, (_, server) => stdioFixtureConfig(['--tools', String(TOOLS)], { tag: context.tag, env: { BENCH_SCALE_ID: `${profile}-${server}` } })),
    );
    const flat = configs.flat();
    const half = Math.ceil(flat.length / 2);
    const rssAtStartMb = process.memoryUsage.rss() / MB;

    const bare = async (count: number) => {
      await settleHeap(100);
      return measured(() => mapLimit(Array.from({ length: count }), concurrency, () => bareSpawn(context.tag)));
    };
    const raw = async (part: readonly StdioServerConfig[]) => {
      await settleHeap(100);
      const closing: Promise<void>[] = [];
      try {
        return await measured(() => mapLimit(part, concurrency, (config) => rawDiscovery(config, expected, closing)));
      } finally {
        await Promise.allSettled(closing);
      }
    };

    context.log(`warm-up; then floors (first halves): ${half} bare spawns, ${half} raw SDK discoveries at concurrency ${concurrency}`);
    const warmUp: Promise<void>[] = [];
    await rawDiscovery(stdioFixtureConfig(['--tools', String(TOOLS)], { tag: context.tag }), expected, warmUp);
    await Promise.all(warmUp);
    const bare1 = await bare(half);
    const raw1 = await raw(flat.slice(0, half));

    context.log(`library: ${profiles} profiles × ${SERVERS} distinct servers (default discovery options, sessions.eager false)`);
    await settleHeap(100);
    const host = createHost({
      profiles: Object.fromEntries(configs.map((servers, profile) => [`p${profile}`, { mcpServers: Object.fromEntries(servers.map((config, server) => [`s${server}`, config])) }])),
      sessions: { eager: false },
    });
    let library: Awaited<ReturnType<typeof measured<string[]>>>;
    let peakThreads = 0;
    try {
      library = await measured(async () => {
        host.start();
        const views = await withDeadline('every profile to settle (library)', Promise.all(configs.map((_, profile) => host.ready(`p${profile}`))), LIBRARY_TIMEOUT_MS);
        // Anything not ready is reported with its reason (a profile view names each server's failure).
        return views.flatMap((view, profile) =>
          view.status === 'ready' ? [] : [`p${profile}: ${view.status} ${JSON.stringify(Object.entries(view.servers).filter(([, server]) => server.status !== 'ready'))}`.slice(0, 1500)],
        );
      });
      peakThreads = host.stats().discovery.peakWorkers;
    } finally {
      await host.close();
    }

    context.log(`floors (second halves): ${flat.length - half} raw SDK discoveries, ${flat.length - half} bare spawns`);
    const raw2 = await raw(flat.slice(half));
    const bare2 = await bare(flat.length - half);

    const rawWall = raw1.wallMs + raw2.wallMs;
    const bareWall = bare1.wallMs + bare2.wallMs;
    const rawPeak = Math.max(raw1.peakRssMb, raw2.peakRssMb);
    const rawFailures = [...raw1.result, ...raw2.result].filter((failure): failure is string => failure !== undefined);
    return {
      metrics: [
        { name: `discover ${profiles}×${SERVERS} distinct: wall`, unit: 'ms', value: round2(library.wallMs), baseline: { label: `raw SDK floor, ${flat.length} at concurrency ${concurrency}`, value: round2(rawWall) } },
        { name: `discover ${profiles}×${SERVERS} distinct: wall vs bare spawns`, unit: 'ms', value: round2(library.wallMs), baseline: { label: `${flat.length} bare node spawns, same concurrency`, value: round2(bareWall) } },
        { name: 'peak host RSS', unit: 'MB', value: round2(library.peakRssMb), baseline: { label: 'raw SDK floor peak RSS', value: round2(rawPeak) } },
        { name: 'peak worker threads', unit: 'count', value: peakThreads },
        { name: 'profiles not ready', unit: 'count', value: library.result.length, target: { of: 'value', op: '<=', limit: 0 } },
        { name: 'raw SDK floor: failed discoveries', unit: 'count', value: rawFailures.length },
      ],
      notes: [
        `scale: ${flat.length} distinct stdio servers (env-distinct fingerprints, ${expected} tools each), default discovery options (maxThreads ${defaults.maxThreads}, serverConcurrency ${defaults.serverConcurrency}), sessions.eager false.`,
        `  floors at the same concurrency (${concurrency}), each run as two halves (before and after the library): raw SDK spawn + initialize + tools/list (close in the background),`,
        '  and bare `node fixture --exit-at-start 0` spawns. Peak RSS: this process, sampled every 25 ms (worker threads included).',
        ...library.result.slice(0, 3).map((reason) => `  NOT READY ${reason}`),
        ...rawFailures.slice(0, 3).map((reason) => `  RAW FLOOR FAILURE ${reason}`),
      ],
      details: {
        concurrency,
        rssAtStartMb: round2(rssAtStartMb),
        library: { wallMs: round2(library.wallMs), peakRssMb: round2(library.peakRssMb), notReady: library.result, peakThreads },
        rawFloor: { failures: rawFailures.slice(0, 10), halvesMs: [round2(raw1.wallMs), round2(raw2.wallMs)], peakRssMb: [round2(raw1.peakRssMb), round2(raw2.peakRssMb)] },
        bareSpawns: { halvesMs: [round2(bare1.wallMs), round2(bare2.wallMs)], peakRssMb: [round2(bare1.peakRssMb), round2(bare2.peakRssMb)] },
      },
    };
  },
};
