/**
 * Scenario `first-turn`: latency of the very first turn of a profile with 1 healthy + 1 refused
 * (HTTP) + 1 exit-at-start server, against the healthy server's own connect + list time with the
 * raw SDK. Fail-fast failures must not add a connect timeout: the ratio should stay near 1 (plus
 * the cost of a cold worker when the pool is cold), and no server may be reported as a timeout.
 */
import { createHost } from '../../src/index.js';
import { refusedUrl, stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { round2, roundSummary, summarize } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { discoverRaw, since } from './sdk-baseline.js';

export const firstTurnScenario: Scenario = {
  name: 'first-turn',
  description: 'first turn with healthy + refused + exit-at-start servers vs the healthy server alone (raw SDK)',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const healthy = stdioFixtureConfig(['--tools', '10', '--no-extras'], { tag: context.tag });
    const crashing = stdioFixtureConfig(['--exit-at-start', '1'], { tag: context.tag });
    const coldMs: number[] = [];
    const warmMs: number[] = [];
    const baselineMs: number[] = [];
    let timeouts = 0;
    const rounds = context.samples(8, 2);
    for (let round = 0; round < rounds; round++) {
      const profile = { mcpServers: { healthy, refused: { url: await refusedUrl() }, crashing } };
      // 15 s connect timeout, as by default: any failure waiting for it would show at once.
      const host = createHost({ profiles: { cold: profile, warm: profile, warmup: { mcpServers: { healthy } } } });
      try {
        let start = performance.now();
        const cold = await host.beginTurn('cold');
        coldMs.push(since(start));
        await host.beginTurn('warmup');
        start = performance.now();
        const warm = await host.beginTurn('warm');
        warmMs.push(since(start));
        for (const turn of [cold, warm]) {
          timeouts += turn.failed.filter((failure) => failure.kind === 'timeout').length;
          if (!turn.tools.some((tool) => tool.server === 'healthy')) throw new Error('healthy server missing from the first turn');
        }
      } finally {
        await host.close();
      }
      const start = performance.now();
      await discoverRaw(healthy);
      baselineMs.push(since(start));
    }
    const cold = summarize(coldMs);
    const warm = summarize(warmMs);
    const baseline = summarize(baselineMs);
    return {
      metrics: [
        { name: 'first turn, warm pool p50', unit: 'ms', value: round2(warm.p50), samples: warm.n, baseline: { label: 'healthy alone, raw SDK p50', value: round2(baseline.p50) }, target: { of: 'ratio', op: '<=', limit: 2 } },
        { name: 'first turn, cold pool p50', unit: 'ms', value: round2(cold.p50), samples: cold.n, baseline: { label: 'healthy alone, raw SDK p50', value: round2(baseline.p50) } },
        { name: 'servers reported as timeout', unit: 'count', value: timeouts, target: { of: 'value', op: '<=', limit: 0 } },
      ],
      notes: ['first-turn: "cold pool" includes starting the first worker thread (≈ 0.3 s); "warm pool" is a host that already discovered another profile.'],
      details: { coldMs: roundSummary(cold), warmMs: roundSummary(warm), baselineMs: roundSummary(baseline) },
    };
  },
};
