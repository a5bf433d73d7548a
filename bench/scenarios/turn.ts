/**
 * Scenario `turn`: the cost of `beginTurn` on a ready profile — what a host pays on every chat
 * turn — against the per-turn discovery hosts did before (connect + `tools/list` + close of every
 * server of the profile, on each turn), measured in the same run.
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { round2, roundSummary, summarize } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { discoverRaw, since } from './sdk-baseline.js';

const SERVERS = 3;
const P99_TARGET_US = 200;

export const turnScenario: Scenario = {
  name: 'turn',
  description: 'beginTurn on a ready profile (µs) vs per-turn discovery (connect + tools/list + close per server)',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const configs = Array.from({ length: SERVERS }, () => stdioFixtureConfig(['--tools', '20', '--no-extras'], { tag: context.tag }));
    const host = createHost({ profiles: { bench: { mcpServers: Object.fromEntries(configs.map((config, index) => [`s${index}`, config])) } } });
    const turnsUs: number[] = [];
    let toolCount = 0;
    try {
      const first = await host.beginTurn('bench');
      if (first.status !== 'ready') throw new Error(`profile not ready: ${JSON.stringify(first.failed)}`);
      toolCount = first.tools.length;
      const rounds = context.samples(5000, 500);
      for (let index = 0; index < rounds / 10; index++) await host.beginTurn('bench'); // warm-up
      for (let index = 0; index < rounds; index++) {
        const start = performance.now();
        const turn = await host.beginTurn('bench');
        turnsUs.push(since(start) * 1000);
        if (turn.tools.length !== toolCount) throw new Error('turn lost tools');
      }
    } finally {
      await host.close();
    }
    const baselineMs: number[] = [];
    for (let index = 0; index < context.samples(10, 3); index++) {
      const start = performance.now();
      const counts = await Promise.all(configs.map((config) => discoverRaw(config)));
      baselineMs.push(since(start));
      if (counts.reduce((sum, count) => sum + count, 0) !== toolCount) throw new Error(`baseline listed ${counts.join('+')} tools, expected ${toolCount}`);
    }
    const turns = summarize(turnsUs);
    const baseline = summarize(baselineMs.map((ms) => ms * 1000));
    return {
      metrics: [
        { name: 'beginTurn p50', unit: 'µs', value: round2(turns.p50), samples: turns.n, baseline: { label: 'per-turn discovery p50', value: round2(baseline.p50) }, ratio: 'baseline/value' },
        { name: 'beginTurn p99', unit: 'µs', value: round2(turns.p99), samples: turns.n, target: { of: 'value', op: '<=', limit: P99_TARGET_US } },
      ],
      notes: [`turn: ${SERVERS} stdio servers × ${toolCount / SERVERS} tools; the baseline connects, lists and closes all of them concurrently with the raw SDK on every turn.`],
      details: { beginTurnUs: roundSummary(turns), perTurnDiscoveryUs: roundSummary(baseline) },
    };
  },
};
