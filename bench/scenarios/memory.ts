/**
 * Scenario `memory`: the host process's retained memory per idle profile (discovered, no session)
 * and per live session, against one raw SDK client session (what a host keeps per server without
 * mcp-supervisor). Figures are deltas of JS heap + external memory after forced full GCs (run with
 * --expose-gc): RSS is dominated by worker threads and allocator slack and moves by more than a
 * profile costs, so it would measure noise.
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { connectRaw } from './sdk-baseline.js';

async function settledRss(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let index = 0; index < 3; index++) {
    gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const usage = process.memoryUsage();
  return (usage.heapUsed + usage.external) / (1024 * 1024);
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

export const memoryScenario: Scenario = {
  name: 'memory',
  description: 'retained memory per idle profile and per live session vs one raw SDK client session',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const profiles = context.samples(40, 8);
    const sessions = context.samples(20, 5);
    const config = stdioFixtureConfig(['--tools', '10', '--no-extras'], { tag: context.tag });
    const host = createHost({
      profiles: Object.fromEntries(Array.from({ length: profiles }, (_, index) => [`p${index}`, { mcpServers: { a: config, b: config } }])),
      discovery: { idleTimeoutMs: 1 },
    });
    let perProfile = 0;
    let perSession = 0;
    let perRawSession = 0;
    try {
      const before = await settledRss();
      await Promise.all(Array.from({ length: profiles }, (_, index) => host.ready(`p${index}`)));
      // Let the pool reap its idle workers, so only the profiles' own state remains.
      const deadline = Date.now() + 5000;
      while (host.stats().discovery.workers > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      perProfile = ((await settledRss()) - before) / profiles;
      const beforeSessions = await settledRss();
      for (let index = 0; index < sessions; index++) await host.callTool(`p${index}`, 'a', 'echo', { text: 'x' });
      perSession = ((await settledRss()) - beforeSessions) / sessions;
    } finally {
      await host.close();
    }
    const clients = [];
    try {
      const beforeRaw = await settledRss();
      for (let index = 0; index < sessions; index++) {
        const client = await connectRaw(config);
        await client.callTool({ name: 'echo', arguments: { text: 'x' } });
        clients.push(client);
      }
      perRawSession = ((await settledRss()) - beforeRaw) / sessions;
    } finally {
      await Promise.all(clients.map((client) => client.close()));
    }
    const gcNote = (globalThis as { gc?: unknown }).gc ? 'with forced GC' : 'WITHOUT forced GC (run node with --expose-gc for steadier figures)';
    return {
      metrics: [
        { name: 'per idle profile (2 servers)', unit: 'MB', value: round3(perProfile), samples: profiles, baseline: { label: 'raw SDK session', value: round3(perRawSession) } },
        { name: 'per live session', unit: 'MB', value: round3(perSession), samples: sessions, baseline: { label: 'raw SDK session', value: round3(perRawSession) } },
      ],
      notes: [`memory: retained heap + external memory of the host process, ${gcNote}; server processes and worker threads are not counted.`],
      details: { perProfileMb: perProfile, perSessionMb: perSession, perRawSessionMb: perRawSession },
    };
  },
};
