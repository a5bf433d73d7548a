/**
 * Scripted seams for unit tests of readiness's coordination logic (pure logic: no processes).
 *
 * `ScriptedDriver` stands in for the discovery coordinator: the test decides when each body
 * publishes, finishes or survives quiescence, and can hold `quiesce` on a barrier to force an
 * interleaving.
 *
 * It observes the one-owner invariant instead of enforcing it: a start while a body of the same
 * key is still alive (not finished, retired or not) is *accepted* and recorded in
 * {@link ScriptedDriver.overlaps}, and the new run counts as live next to the old one, so
 * {@link ScriptedDriver.maxLiveOwners} reports 2 and `stats().ownerOverlaps` counts it. (The real
 * coordinator refuses such a start with QUIESCE_FAILED; a driver that refused before counting
 * would hide exactly the registry bug these tests exist to catch.)
 * `FakeSessions` records what readiness asks of the session layer.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ProfileConfig, ServerConfig } from '../../src/config/types.js';
import type { DiscoveryStats, QuiesceReport, RunHandlers } from '../../src/discovery/coordinator.js';
import type { SettledOutcome } from '../../src/discovery/types.js';
import { McpSupervisorError } from '../../src/errors.js';
import type { DiscoveryDriver, SessionLayer, ToolCallRequest } from '../../src/readiness/driver.js';
import type { ServerOutcome } from '../../src/discovery/types.js';
import { type Barrier, barrier } from './clock.js';

/** One scripted body. */
export interface ScriptedRun {
  key: string;
  generation: number;
  servers: string[];
  handlers: RunHandlers;
  /** Retired by quiesce (its outcomes are dropped, like the coordinator does). */
  retired: boolean;
  /** The body has finished (it no longer owns the key). */
  finished: boolean;
}

/** A start that happened while another body of the same key was alive. */
export interface OwnerOverlap {
  key: string;
  /** Generation of the run that was started. */
  generation: number;
  /** Generations of the runs of the key that were still alive at that start. */
  alive: number[];
}

/** A scripted {@link DiscoveryDriver}. */
export class ScriptedDriver implements DiscoveryDriver {
  readonly runs: ScriptedRun[] = [];
  /** Every start that overlapped a live body of its key (the registry broke its invariant). */
  readonly overlaps: OwnerOverlap[] = [];
  readonly quiesceCalls: { key: string; reason: string }[] = [];
  private readonly generations = new Map<string, number>();
  private readonly maxLive = new Map<string, number>();
  /** When set, the next quiesce of this key waits for it. */
  quiesceGate = new Map<string, Barrier>();
  /** Keys whose bodies survive quiescence (the ladder fails). */
  survivors = new Set<string>();
  /** Deliver outcomes of retired runs anyway (to test readiness's own guard). */
  deliverStale = false;

  private live(key: string): ScriptedRun[] {
    return this.runs.filter((run) => run.key === key && !run.finished);
  }

  start(key: string, servers: readonly ServerConfig[], handlers: RunHandlers): { generation: number } {
    const alive = this.live(key);
    const generation = (this.generations.get(key) ?? 0) + 1;
    this.generations.set(key, generation + 1);
    // Recorded, then accepted: the overlapping run is live alongside the old one(s).
    if (alive.length > 0) this.overlaps.push({ key, generation, alive: alive.map((run) => run.generation) });
    const run: ScriptedRun = { key, generation, servers: servers.map((server) => server.name), handlers, retired: false, finished: false };
    this.runs.push(run);
    this.maxLive.set(key, Math.max(this.maxLive.get(key) ?? 0, this.live(key).length));
    return { generation };
  }

  /** Runs of a key, in start order. */
  runsOf(key: string): ScriptedRun[] {
    return this.runs.filter((run) => run.key === key);
  }

  /** The newest run of a key. */
  last(key: string): ScriptedRun {
    const runs = this.runsOf(key);
    const run = runs[runs.length - 1];
    if (!run) throw new Error(`no run for ${key}`);
    return run;
  }

  /** The highest number of simultaneously live bodies of a key so far (2 or more: an overlap happened). */
  maxLiveOwners(key: string): number {
    return this.maxLive.get(key) ?? 0;
  }

  /** The body publishes one outcome. */
  publish(run: ScriptedRun, outcome: SettledOutcome): void {
    if (run.retired && !this.deliverStale) return;
    run.handlers.onOutcome(outcome, run.generation);
  }

  /** The body publishes a ready outcome with tools named `tools`. */
  ready(run: ScriptedRun, server: string, tools: string[] = ['t']): void {
    this.publish(run, {
      status: 'ready',
      server,
      tools: tools.map((name) => ({ name, inputSchema: { type: 'object' } })),
      prompts: [],
      resources: [],
      resourceTemplates: [],
      timings: { totalMs: 1 },
    });
  }

  /** The body publishes a failure. */
  fail(run: ScriptedRun, server: string, kind: 'exited' | 'refused' | 'timeout' | 'spawn' = 'exited'): void {
    this.publish(run, { status: 'failed', server, failure: { kind, message: `${server} ${kind}` }, timings: { totalMs: 1 } });
  }

  /** The body ends (after publishing, or crashing when `error` is given). */
  finish(run: ScriptedRun, error?: McpSupervisorError): void {
    if (run.finished) return;
    run.finished = true;
    if (!run.retired || this.deliverStale) run.handlers.onDone(error === undefined ? { generation: run.generation } : { generation: run.generation, error });
  }

  async quiesce(key: string, reason: string): Promise<QuiesceReport> {
    this.quiesceCalls.push({ key, reason });
    const live = this.live(key);
    // Retirement is synchronous, as in the coordinator.
    for (const run of live) run.retired = true;
    const gate = this.quiesceGate.get(key);
    if (gate) {
      this.quiesceGate.delete(key);
      await gate.promise;
    }
    const survived = this.survivors.has(key);
    if (!survived) for (const run of live) run.finished = true;
    return {
      key,
      generation: live[0]?.generation,
      reason,
      rung: live.length > 0 ? 'cooperative' : 'idle',
      totalMs: 1,
      quiesced: !survived,
      survivors: survived ? [4242] : [],
      zombies: [],
    };
  }

  hasOwner(key: string): boolean {
    return this.live(key).length > 0;
  }

  liveOwners(key: string): number {
    return this.live(key).length;
  }

  stats(): DiscoveryStats {
    return {
      liveOwners: this.runs.filter((run) => !run.finished).length,
      ownerOverlaps: this.overlaps.length,
      workers: 0,
      peakWorkers: 0,
      recordedChildren: 0,
      zombies: 0,
      poolErrors: 0,
      droppedStaleMessages: 0,
      quiesces: { total: 0, byRung: { idle: 0, cooperative: 0, terminate: 0, kill: 0 }, cooperativeMs: [], terminateMs: [], killMs: [] },
    };
  }

  async close(): Promise<QuiesceReport[]> {
    const keys = [...new Set(this.runs.map((run) => run.key))];
    return Promise.all(keys.map((key) => this.quiesce(key, 'close')));
  }
}

/** A recording {@link SessionLayer}. */
export class FakeSessions implements SessionLayer {
  readonly publishedFor: { key: string; servers: string[] }[] = [];
  readonly shutdowns: string[] = [];
  readonly revived: string[] = [];
  /** Keys whose shutdown throws. */
  throwOnShutdown = new Set<string>();
  closed = false;

  callTool(_request: ToolCallRequest): Promise<CallToolResult> {
    return Promise.resolve({ content: [{ type: 'text', text: 'ok' }] });
  }

  read(): Promise<never> {
    return Promise.reject(new Error('FakeSessions does not read resources or prompts'));
  }

  isExcluded(): boolean {
    return false;
  }

  exclusionVersion(): number {
    return 0;
  }

  published(key: string, _config: ProfileConfig, outcomes: ReadonlyMap<string, ServerOutcome>): void {
    this.publishedFor.push({ key, servers: [...outcomes.keys()] });
  }

  revive(key: string): void {
    this.revived.push(key);
  }

  async shutdownProfile(key: string): Promise<void> {
    this.shutdowns.push(key);
    if (this.throwOnShutdown.has(key)) throw new Error(`shutdown of ${key} exploded`);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

export { barrier };
