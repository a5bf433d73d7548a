/**
 * Scenario `shared-discovery`: 50 profiles that list the same 3 stdio servers — a multi-tenant
 * host whose tenants use the same tools. How many times are the servers started and discovered,
 * and how long until all 50 first turns are complete?
 *
 * Every server is the stdio fixture with `--pid-file`: each process appends one line when it
 * starts (one file per server, shared by every profile: same args, same fingerprint). Counted:
 *
 *   - shared, warm sessions off (`sessions.eager: false`), the figure: every process start before
 *     the last of the 50 turns returned is a discovery start (no call was made, so no session can
 *     exist). Target: ≤ 3 (one discovery per distinct server) and all 50 turns complete;
 *   - shared, default options (warm sessions on, if that is the default): total process starts
 *     until the host is idle (every session up and the pid files unchanged for 1 s), the session
 *     supervisors and their connects from `host.stats().sessions`, and discovery starts derived as
 *     total − session connects (exact as long as each session connect spawns its own process);
 *   - baseline, not shared: the same 50 × 3 servers with the per-server opt-out
 *     `shareDiscovery: false` (same command, args and env: the same fingerprint), so every profile
 *     discovers them itself — the cost of 150 independent discoveries, with the same options as
 *     the figure (`sessions.eager: false`).
 *
 * Wall time: `host.start()` → every profile's `beginTurn()` returned a ready turn with all 3
 * servers' tools. After a 2-profile warm-up, the three runs go figure, baseline, defaults (one
 * each; they are long).
 */
import { join } from 'node:path';
import { createHost, type HostOptions } from '../../src/index.js';
import { BASE_TOOL_NAMES } from '../../test/fixtures/tools.js';
import { stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { settleHeap } from '../lib/gc.js';
import { round2 } from '../lib/stats.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { readPidFile, sleep, withDeadline } from '../lib/wait.js';
import { since } from './sdk-baseline.js';

const SERVERS = 3;
const TOOLS = 20;
const TURNS_TIMEOUT_MS = 200_000;
const IDLE_STABLE_MS = 1000;
const IDLE_CAP_MS = 60_000;

interface Run {
  wallMs: number;
  completeTurns: number;
  /** Process starts (pid-file lines) when the last turn returned. */
  startsAtTurns: number;
  /** After the host went idle (defaults run only). */
  idle?: { starts: number; supervisors: number; readySessions: number; sessionConnects: number; waitedMs: number };
  peakWorkers: number;
}

async function runHost(context: ScenarioContext, label: string, profiles: number, optOut: boolean, options: Pick<HostOptions, 'sessions'>, waitIdle: boolean): Promise<Run> {
  const pidFiles = Array.from({ length: SERVERS }, (_, server) => join(context.tmpDir, `${label}-s${server}.pids`));
  const configFor = (server: number) => ({
    ...stdioFixtureConfig(['--tools', String(TOOLS), '--pid-file', pidFiles[server] as string], { tag: context.tag }),
    ...(optOut ? { shareDiscovery: false } : {}),
  });
  const documents = Object.fromEntries(
    Array.from({ length: profiles }, (_, profile) => [`t${profile}`, { mcpServers: Object.fromEntries(Array.from({ length: SERVERS }, (_, server) => [`s${server}`, configFor(server)])) }]),
  );
  const starts = (): number => pidFiles.reduce((sum, file) => sum + readPidFile(file).length, 0);
  const expected = SERVERS * (TOOLS + BASE_TOOL_NAMES.length);
  const host = createHost({ profiles: documents, ...options });
  try {
    await settleHeap(100);
    const start = performance.now();
    host.start();
    const turns = await withDeadline(`${label}: ${profiles} first turns`, Promise.all(Object.keys(documents).map((key) => host.beginTurn(key))), TURNS_TIMEOUT_MS);
    const wallMs = since(start);
    const startsAtTurns = starts();
    const completeTurns = turns.filter((turn) => turn.status === 'ready' && turn.tools.length === expected).length;
    const run: Run = { wallMs: round2(wallMs), completeTurns, startsAtTurns, peakWorkers: host.stats().discovery.peakWorkers };
    if (waitIdle) {
      const idleStart = performance.now();
      let last = starts();
      let stableSince = performance.now();
      for (;;) {
        await sleep(100);
        const now = starts();
        if (now !== last) {
          last = now;
          stableSince = performance.now();
        }
        const sessions = host.stats().sessions;
        const busy = sessions.some((session) => session.state === 'connecting' || session.state === 'backoff');
        if ((!busy && performance.now() - stableSince >= IDLE_STABLE_MS) || since(idleStart) >= IDLE_CAP_MS) break;
      }
      const sessions = host.stats().sessions;
      run.idle = {
        starts: starts(),
        supervisors: sessions.length,
        readySessions: sessions.filter((session) => session.state === 'ready').length,
        sessionConnects: sessions.reduce((sum, session) => sum + session.connects, 0),
        waitedMs: round2(since(idleStart)),
      };
    }
    return run;
  } finally {
    await host.close();
  }
}

export const sharedDiscoveryScenario: Scenario = {
  name: 'shared-discovery',
  description: '50 profiles listing the same 3 stdio servers: process starts (discoveries) and wall time until all 50 first turns, vs 50 × 3 unshared discoveries',
  timeoutMs: 400_000,
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const profiles = context.samples(50, 5);
    // Warm-up (JIT, file cache, the sharing paths), so the first measured run pays no first-time costs.
    await runHost(context, 'warm-up', 2, false, { sessions: { eager: false } }, false);
    context.log(`shared, sessions.eager false: ${profiles} profiles × the same ${SERVERS} servers`);
    const shared = await runHost(context, 'shared-lazy', profiles, false, { sessions: { eager: false } }, false);
    context.log(`baseline, not shared (shareDiscovery: false), sessions.eager false: ${profiles} × ${SERVERS} servers`);
    const unshared = await runHost(context, 'unshared-lazy', profiles, true, { sessions: { eager: false } }, false);
    context.log(`shared, default options: ${profiles} profiles × the same ${SERVERS} servers (then waits until the host is idle)`);
    const defaults = await runHost(context, 'shared-defaults', profiles, false, {}, true);
    const idle = defaults.idle;
    const derivedDiscovery = idle === undefined ? Number.NaN : idle.starts - idle.sessionConnects;
    return {
      metrics: [
        {
          name: `discovery process starts, ${profiles} profiles × same ${SERVERS} (eager off)`,
          unit: 'count',
          value: shared.startsAtTurns,
          baseline: { label: 'not shared', value: unshared.startsAtTurns },
          ratio: 'baseline/value',
          target: { of: 'value', op: '<=', limit: SERVERS },
        },
        { name: `complete first turns (of ${profiles}), shared`, unit: 'count', value: shared.completeTurns, target: { of: 'value', op: '>=', limit: profiles } },
        { name: `wall to all ${profiles} first turns, shared (eager off)`, unit: 'ms', value: shared.wallMs, baseline: { label: 'not shared', value: unshared.wallMs } },
        { name: `process starts by the last turn, default options`, unit: 'count', value: defaults.startsAtTurns, baseline: { label: 'not shared, eager off', value: unshared.startsAtTurns }, ratio: 'baseline/value' },
        { name: `wall to all ${profiles} first turns, default options`, unit: 'ms', value: defaults.wallMs, baseline: { label: 'not shared, eager off', value: unshared.wallMs } },
        { name: `complete first turns (of ${profiles}), default options`, unit: 'count', value: defaults.completeTurns, target: { of: 'value', op: '>=', limit: profiles } },
        { name: 'default options, idle: total process starts', unit: 'count', value: idle?.starts ?? Number.NaN },
        { name: 'default options, idle: session spawns (Σ connects)', unit: 'count', value: idle?.sessionConnects ?? Number.NaN },
        { name: 'default options, idle: discovery starts (total − session)', unit: 'count', value: derivedDiscovery, target: { of: 'value', op: '<=', limit: SERVERS } },
      ],
      notes: [
        `shared-discovery: ${profiles} profiles × the same ${SERVERS} stdio servers (${TOOLS} + ${BASE_TOOL_NAMES.length} tools each). Process starts = lines in the servers' --pid-files.`,
        '  eager off: every start before the last first turn is a discovery (no call, no session). Baseline: the same servers with the per-server opt-out',
        '  shareDiscovery: false (same fingerprint, every profile discovers them itself), same options.',
        '  default options: counted again once the host is idle (sessions up, pid files still for 1 s); session spawns = Σ host.stats().sessions[].connects.',
      ],
      details: { profiles, shared, unshared, defaults },
    };
  },
};
