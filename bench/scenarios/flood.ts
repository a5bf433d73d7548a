/**
 * Scenario `flood`: a hostile server sends 10 000 `notifications/tools/list_changed` per second
 * to a host. Measured on the host process: main-thread event-loop max and p99, RSS growth over
 * the run, and the p99 latency of calls to a quiet neighbour server of the same profile — each
 * against the same host in the same run with the noisy server quiet (the baseline).
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { watchMainThread } from '../lib/loop-watch.js';
import { percentile, round2 } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';

interface Run {
  loopMax: number;
  loopP99: number;
  rssGrowthMb: number;
  neighbourP99Ms: number;
  calls: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function measure(context: ScenarioContext, flood: boolean, seconds: number): Promise<Run> {
  const noisyFlags = flood ? ['--flood-list-changed', '10000'] : [];
  const host = createHost({
    profiles: { default: { mcpServers: { noisy: stdioFixtureConfig(noisyFlags, { tag: context.tag }), neighbour: stdioFixtureConfig([], { tag: context.tag }) } } },
    discovery: { maxThreads: 1 },
  });
  try {
    const turn = await host.beginTurn();
    // A live session on the noisy server: its flood starts once it is initialised.
    await turn.callTool('mcp__noisy__echo', { text: 'start' });
    await sleep(500);
    const rssBefore = process.memoryUsage().rss;
    let rssMax = rssBefore;
    const latencies: number[] = [];
    const { watch } = await watchMainThread(async () => {
      const until = performance.now() + seconds * 1000;
      while (performance.now() < until) {
        const started = performance.now();
        await turn.callTool('mcp__neighbour__echo', { text: 'ping' });
        latencies.push(performance.now() - started);
        rssMax = Math.max(rssMax, process.memoryUsage().rss);
        await sleep(20);
      }
    });
    latencies.sort((a, b) => a - b);
    return {
      loopMax: watch.max,
      loopP99: watch.p99,
      rssGrowthMb: round2((rssMax - rssBefore) / (1024 * 1024)),
      neighbourP99Ms: round2(percentile(latencies, 99)),
      calls: latencies.length,
    };
  } finally {
    await host.close();
  }
}

export const floodScenario: Scenario = {
  name: 'flood',
  description: 'a server flooding 10 000 tools/list_changed per second: host event loop, RSS and a neighbour\'s calls vs the same host with the server quiet',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const seconds = context.quick ? 2 : 8;
    context.log(`flood: quiet baseline, ${seconds} s`);
    const quiet = await measure(context, false, seconds);
    context.log(`flood: 10 000 notifications/s, ${seconds} s`);
    const noisy = await measure(context, true, seconds);
    return {
      metrics: [
        { name: 'event-loop max', unit: 'ms', value: noisy.loopMax, baseline: { label: 'quiet server', value: quiet.loopMax } },
        { name: 'event-loop p99', unit: 'ms', value: noisy.loopP99, baseline: { label: 'quiet server', value: quiet.loopP99 } },
        { name: 'RSS growth over the run', unit: 'MB', value: noisy.rssGrowthMb, baseline: { label: 'quiet server', value: quiet.rssGrowthMb } },
        { name: 'neighbour call p99', unit: 'ms', value: noisy.neighbourP99Ms, samples: noisy.calls, baseline: { label: 'quiet server', value: quiet.neighbourP99Ms } },
      ],
      notes: [
        'flood: one stdio server sends tools/list_changed at 10 000/s (bursts every 10 ms) to a live session; the host debounces refreshes (one tools/list per 200 ms at most). Baseline: the same host, same servers, the noisy one silent.',
      ],
      details: { quiet, noisy, seconds },
    };
  },
};
