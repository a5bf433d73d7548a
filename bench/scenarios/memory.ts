/**
 * Scenario `memory`: what the host process keeps per profile and per server, like for like with a
 * host that uses the raw SDK.
 *
 * Figures are deltas of retained JS heap + external memory of this process after forced full GCs
 * (run with --expose-gc), divided by how many things were added. RSS is not used: worker threads
 * and allocator slack move it by more than a profile costs. Server processes are not counted
 * (they are the same processes either way).
 *
 * Every server is the stdio fixture with 50 generated tools (67 in all) and is distinct (an env var
 * changes its fingerprint), so nothing is shared between profiles: per-server costs, not sharing.
 *
 *   - library, idle profile: P profiles × 2 servers discovered (`sessions.eager: false`, so no
 *     session), workers reaped → per profile. Baseline: what a raw host keeps for 2 servers it does
 *     not hold connections to — their `listTools()` results (2 × the per-server figure, measured
 *     by connecting, listing, keeping `tools`, closing);
 *   - library, live session: a call on server `a` of S profiles → per session. Baseline: a raw SDK
 *     client connected with one call made (no tool list kept);
 *   - per server, catalogue + live session (the headline like-for-like row): half the idle profile
 *     plus one session, against a raw SDK client that stays connected, keeps its `listTools()`
 *     result (the SDK also caches the tools' output validators) and made one call — what a peer
 *     host keeps per server.
 * A warm-up of each path runs first, so module-level state and JIT code are not charged to the
 * first measurement.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { createHost } from '../../src/index.js';
import { BASE_TOOL_NAMES } from '../../test/fixtures/tools.js';
import { stdioFixtureConfig, type StdioServerConfig } from '../../test/helpers/fixtures.js';
import { canForceGc } from '../lib/gc.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { sleep } from '../lib/wait.js';
import { connectRaw, listToolsSdk } from './sdk-baseline.js';

const TOOLS = 50;

async function retainedMb(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let index = 0; index < 3; index++) {
    gc?.();
    await sleep(20);
  }
  const usage = process.memoryUsage();
  return (usage.heapUsed + usage.external) / (1024 * 1024);
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

export const memoryScenario: Scenario = {
  name: 'memory',
  description: 'retained memory per idle profile, per live session and per server (catalogue + session) vs a raw SDK host keeping the same',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const profiles = context.samples(40, 8);
    const sessions = context.samples(20, 5);
    let serial = 0;
    const distinct = (): StdioServerConfig => stdioFixtureConfig(['--tools', String(TOOLS), '--no-extras'], { tag: context.tag, env: { BENCH_MEMORY_ID: String(++serial) } });

    // Warm-up: every path once.
    {
      const host = createHost({ profiles: { w: { mcpServers: { a: distinct() } } }, sessions: { eager: false } });
      try {
        await host.ready('w');
        await host.callTool('w', 'a', 'echo', { text: 'x' });
      } finally {
        await host.close();
      }
      const client = await connectRaw(distinct());
      await listToolsSdk(client);
      await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      await client.close();
    }

    let perProfile = 0;
    let perSession = 0;
    const host = createHost({
      profiles: Object.fromEntries(Array.from({ length: profiles }, (_, index) => [`p${index}`, { mcpServers: { a: distinct(), b: distinct() } }])),
      discovery: { idleTimeoutMs: 1 },
      sessions: { eager: false },
    });
    try {
      const before = await retainedMb();
      const views = await Promise.all(Array.from({ length: profiles }, (_, index) => host.ready(`p${index}`)));
      const notReady = views.filter((view) => view.status !== 'ready');
      if (notReady.length > 0) throw new Error(`${notReady.length} profile(s) not ready`);
      // Let the pool reap its idle workers, so only the profiles' own state remains.
      const deadline = Date.now() + 5000;
      while (host.stats().discovery.workers > 0 && Date.now() < deadline) await sleep(20);
      perProfile = ((await retainedMb()) - before) / profiles;
      const beforeSessions = await retainedMb();
      for (let index = 0; index < sessions; index++) await host.callTool(`p${index}`, 'a', 'echo', { text: 'x' });
      perSession = ((await retainedMb()) - beforeSessions) / sessions;
    } finally {
      await host.close();
    }

    // Raw: tool lists kept without connections.
    const lists: Tool[][] = [];
    const beforeLists = await retainedMb();
    for (let index = 0; index < sessions; index++) {
      const client = await connectRaw(distinct());
      try {
        lists.push(await listToolsSdk(client));
      } finally {
        await client.close();
      }
    }
    const perRawList = ((await retainedMb()) - beforeLists) / sessions;
    if (lists.some((tools) => tools.length === 0)) throw new Error('a raw tool list is empty');
    lists.length = 0;

    // Raw: a connected client with one call made.
    const clients: Client[] = [];
    let perRawSession = 0;
    let perRawSessionWithList = 0;
    const kept: Tool[][] = [];
    try {
      const beforeRaw = await retainedMb();
      for (let index = 0; index < sessions; index++) {
        const client = await connectRaw(distinct());
        clients.push(client);
        await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      }
      perRawSession = ((await retainedMb()) - beforeRaw) / sessions;
      // Raw: connected, its tool list kept, one call made (what a peer host keeps per server).
      const beforeRawList = await retainedMb();
      for (let index = 0; index < sessions; index++) {
        const client = await connectRaw(distinct());
        clients.push(client);
        kept.push(await listToolsSdk(client));
        await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      }
      perRawSessionWithList = ((await retainedMb()) - beforeRawList) / sessions;
    } finally {
      await Promise.allSettled(clients.map((client) => client.close()));
    }
    const perServer = perProfile / 2 + perSession;
    const gcNote = canForceGc() ? 'with forced GC' : 'WITHOUT forced GC (run node with --expose-gc for steadier figures)';
    return {
      metrics: [
        { name: 'per idle profile (2 servers, catalogue, no session)', unit: 'MB', value: round3(perProfile), samples: profiles, baseline: { label: 'raw: 2 kept tool lists', value: round3(2 * perRawList) } },
        { name: 'per live session', unit: 'MB', value: round3(perSession), samples: sessions, baseline: { label: 'raw SDK client, connected, 1 call', value: round3(perRawSession) } },
        { name: 'per server, catalogue + live session', unit: 'MB', value: round3(perServer), baseline: { label: 'raw client + its tool list + 1 call', value: round3(perRawSessionWithList) } },
      ],
      notes: [
        `memory: retained heap + external memory of the host process, ${gcNote}; server processes and worker threads not counted; ${TOOLS + BASE_TOOL_NAMES.length} tools per server, every server distinct.`,
        '  baselines: the raw SDK keeping the same things (tool lists alone; a connected client; a connected client with its listTools() result).',
      ],
      details: { perProfileMb: perProfile, perSessionMb: perSession, perServerMb: perServer, perRawListMb: perRawList, perRawSessionMb: perRawSession, perRawSessionWithListMb: perRawSessionWithList, kept: kept.length },
    };
  },
};
