/**
 * Scenario `scale`: discovery of 100 profiles × 5 stdio servers through one host — wall time, peak
 * RSS of the host process, peak worker threads — against 100 × the time of one profile alone
 * measured first in the same run (the ratio < 1 is the speed-up the pool gives).
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { round2 } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { since } from './sdk-baseline.js';

const SERVERS = 5;

export const scaleScenario: Scenario = {
  name: 'scale',
  description: 'discovery of 100 profiles × 5 servers: time, peak RSS, peak threads vs 100 × one profile',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const profiles = context.samples(100, 10);
    const config = stdioFixtureConfig(['--tools', '5', '--no-extras'], { tag: context.tag });
    const document = { mcpServers: Object.fromEntries(Array.from({ length: SERVERS }, (_, index) => [`s${index}`, config])) };
    const single = createHost({ profiles: { one: document } });
    let singleMs = 0;
    try {
      await single.ready('one'); // warm the pool and the file cache
      await single.retry('one');
      const start = performance.now();
      const view = await single.retry('one');
      singleMs = since(start);
      if (view.status !== 'ready') throw new Error(`single profile: ${view.status}`);
    } finally {
      await single.close();
    }
    const host = createHost({ profiles: Object.fromEntries(Array.from({ length: profiles }, (_, index) => [`p${index}`, document])) });
    let peakRss = process.memoryUsage().rss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 25);
    let wallMs = 0;
    let notReady = 0;
    let peakThreads = 0;
    try {
      const start = performance.now();
      host.start();
      const views = await Promise.all(Array.from({ length: profiles }, (_, index) => host.ready(`p${index}`)));
      wallMs = since(start);
      notReady = views.filter((view) => view.status !== 'ready').length;
      peakThreads = host.stats().discovery.peakWorkers;
    } finally {
      clearInterval(sampler);
      await host.close();
    }
    return {
      metrics: [
        { name: `discover ${profiles}×${SERVERS} wall`, unit: 'ms', value: round2(wallMs), baseline: { label: `${profiles} × one profile`, value: round2(singleMs * profiles) } },
        { name: 'peak host RSS', unit: 'MB', value: round2(peakRss / (1024 * 1024)) },
        { name: 'peak worker threads', unit: 'count', value: peakThreads },
        { name: 'profiles not ready', unit: 'count', value: notReady, target: { of: 'value', op: '<=', limit: 0 } },
      ],
      notes: [`scale: ${profiles * SERVERS} server processes started and stopped; at most maxThreads × serverConcurrency run at once.`],
      details: { singleProfileMs: singleMs, wallMs, peakRssMb: peakRss / (1024 * 1024), peakThreads },
    };
  },
};
