/**
 * Fault-injection soak of the public API (`npm run soak`).
 *
 * 20 profiles over real fixture processes (stdio servers, a wrapper tree `node → sh → node + sleep`,
 * one server shared by four profiles with `share: true`, and two Streamable HTTP fixtures each
 * reached by three profiles through the same URL) take concurrent turns with random tools while
 * two fault injectors SIGKILL stdio server processes (idle, 100–500 ms into a slow call, any
 * tagged process including discovery children, or every process of one server for 2–5 s: a
 * "storm" that opens the breaker and parks it), make the HTTP fixtures forget their sessions (idle
 * and mid-call), and call `host.reload(profile)` (idle and mid-call), `host.retry(profile)` (also
 * with a kill of its discovery children) and, at most twice, `host.reload()`. Then the faults stop
 * and every server of every profile must become usable again: a fresh turn that offers its `echo`
 * and a successful call, retrying only `retryable` errors after 250 ms.
 *
 * Every call is judged against the faults around it (the table is in `classify.ts`). The run
 * FAILs (exit 1) on a wrong error code or result, an owner overlap, a refused retry or aborted
 * reload, a server still unusable after the recovery phase, an orphan process after recovery, a
 * process alive after `close()` resolved, HTTP sessions left open on a server, growing memory
 * (last third vs middle third of the fault phase: RSS +25% and +64 MB, or heap after a full GC
 * +25% and +16 MB), or a handle left open (the process must exit by itself). Decisions come from
 * a seeded generator: `--seed N` replays the same plan, not the same interleavings.
 *
 *   node dist/test/soak/soak.js [--duration-ms 120000] [--seed N] [--recovery-ms 60000] [--faults kind,…] [--verbose]
 *
 * `--duration-ms` is the fault phase; warm-up (first discovery), recovery and close come on top.
 */
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createHost, isMcpSupervisorError } from '../../src/index.js';
import type { CallOptions, Host, HostEvents, Turn, TurnTool } from '../../src/index.js';
import { newFixtureTag, startHttpFixture, stdioFixtureConfig } from '../helpers/fixtures.js';
import type { HttpFixture } from '../helpers/fixtures.js';
import { cmdline, pidsInGroup, pidsWithTag, procState, signal, waitGone } from '../helpers/processes.js';
import { type CallOutcome, type CallRecord, type FaultLog, type Transport, judge } from './classify.js';
import { Examples, Tally, growthVerdict, mb, median, percentile } from './report.js';
import { Rng } from './rng.js';

// ------------------------------------------------------------------------------------------ options

interface SoakOptions {
  /** Only these fault kinds (`--faults a,b`); default all. */
  faults: FaultKind[] | undefined;
  durationMs: number;
  seed: number;
  recoveryMs: number;
  verbose: boolean;
}

function parseArgs(argv: readonly string[]): SoakOptions {
  const options: SoakOptions = { faults: undefined, durationMs: 120_000, seed: Math.floor(Math.random() * 2 ** 31), recoveryMs: 60_000, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    if (name === '--verbose') {
      options.verbose = true;
      continue;
    }
    if (name === '--faults') {
      const list = (eq > 0 ? arg.slice(eq + 1) : (argv[++i] ?? '')).split(',').filter(Boolean);
      const unknown = list.filter((kind) => !(kind in FAULT_WEIGHTS));
      if (list.length === 0 || unknown.length > 0) throw new Error(`--faults expects a comma-separated list of ${Object.keys(FAULT_WEIGHTS).join(', ')}; got ${JSON.stringify(list.join(','))}`);
      options.faults = list as FaultKind[];
      continue;
    }
    const numeric: Record<string, keyof SoakOptions> = { '--duration-ms': 'durationMs', '--seed': 'seed', '--recovery-ms': 'recoveryMs' };
    const key = numeric[name];
    if (key === undefined) throw new Error(`unknown argument ${JSON.stringify(arg)} (expected --duration-ms N, --seed N, --recovery-ms N, --faults a,b, --verbose)`);
    const raw = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (raw === undefined || !/^\d+$/.test(raw)) throw new Error(`${name} expects a non-negative integer, got ${JSON.stringify(raw)}`);
    (options as unknown as Record<string, number>)[key] = Number(raw);
  }
  return options;
}

// ------------------------------------------------------------------------------------------ constants

const PROFILE_COUNT = 20;
/** Env var naming which slot (or shared group) a fixture process serves; inherited by its whole tree. */
const SLOT_ENV = 'MCP_SOAK_SLOT';
/** Tools the traffic uses (never `add_tool`: it would grow tool lists for the rest of the run). */
const TRAFFIC_TOOLS = ['echo', 'add', 'increment', 'slow', 'slow_read', 'calls', 'pid', 'fail'] as const;
const CALL_TIMEOUT_MS = 10_000;
const TURN_WAIT_MS = 10_000;
const EXTRA_TURN_LOOPS = 6;
/** Hard bound on calls of the fault phase, whatever the duration. */
const MAX_CALLS = 400_000;
/** A fault operation (reload, retry, forget, probe) that takes longer than this is a failure. */
const FAULT_OP_LIMIT_MS = 60_000;
const SAMPLE_INTERVAL_MS = 1000;
/** Every this many samples, a full GC first: the retained heap is the leak signal, RSS the symptom. */
const GC_EVERY_SAMPLES = 5;
const RETRY_WAIT_MS = 250;
const MAX_RELOAD_ALL = 2;

const HOST_OPTIONS = {
  discovery: { maxThreads: 2, connectTimeoutMs: 15_000, readinessCapMs: 30_000, retryCooldownMs: 1_000, maxRetryCooldownMs: 5_000 },
  sessions: { respawnWaitMs: 5_000, reconnectBudget: 5, parkProbeIntervalMs: 3_000, callTimeoutMs: CALL_TIMEOUT_MS, backoffBaseMs: 100, backoffMaxMs: 2_000 },
  breaker: { failureThreshold: 5, cooldownMs: 2_000 },
} as const;

type FaultKind = 'kill-session' | 'kill-mid-call' | 'kill-scan' | 'kill-storm' | 'forget' | 'forget-mid-call' | 'reload' | 'reload-mid-call' | 'retry' | 'retry-kill-discovery' | 'reload-all';

const FAULT_WEIGHTS: Record<FaultKind, number> = {
  'kill-session': 28,
  'kill-mid-call': 20,
  'kill-scan': 10,
  'kill-storm': 4,
  forget: 10,
  'forget-mid-call': 8,
  reload: 5,
  'reload-mid-call': 5,
  retry: 8,
  'retry-kill-discovery': 6,
  'reload-all': 1,
};

// ------------------------------------------------------------------------------------------ small utils

// A full GC on demand without a command-line flag (`npm run soak` passes none).
setFlagsFromString('--expose-gc');
const fullGc = runInNewContext('gc') as () => void;

const now = (): number => performance.now();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const t0 = now();
const stamp = (t = now()): string => `${((t - t0) / 1000).toFixed(1)}s`;
function log(line: string): void {
  process.stdout.write(`[${stamp()}] ${line}\n`);
}

function describe(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  return String(value);
}

/** The slot group a process serves, from its initial environment; undefined if gone or untagged. */
function slotGroupOf(pid: number): string | undefined {
  try {
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    const entry = environ.find((line) => line.startsWith(`${SLOT_ENV}=`));
    return entry?.slice(SLOT_ENV.length + 1);
  } catch {
    return undefined;
  }
}

/** Resolves with the promise's value, or 'overran' after `ms` (the promise keeps running). */
async function bounded<T>(promise: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | 'overran'> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<'overran'>((resolve) => {
    timer = setTimeout(() => resolve('overran'), ms);
  });
  try {
    return await Promise.race([promise.then((value) => ({ value }), (error: unknown) => ({ error })), limit]);
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------------------------------ the world

interface Slot {
  /** `<profile>/<server>`. */
  id: string;
  profile: string;
  server: string;
  transport: Transport;
  /** Value of MCP_SOAK_SLOT for its processes (`shared/s` for the shared server). */
  group: string;
  wrapper: boolean;
  http?: HttpFixture;
}

interface World {
  tag: string;
  profiles: Record<string, unknown>;
  slots: Slot[];
  /** Slot group → slots it serves. */
  groups: Map<string, Slot[]>;
  http: HttpFixture[];
}

async function buildWorld(tag: string): Promise<World> {
  const http = await Promise.all([startHttpFixture([], { tag }), startHttpFixture(['--json-response'], { tag })]);
  const profiles: Record<string, unknown> = {};
  const slots: Slot[] = [];
  const groups = new Map<string, Slot[]>();
  const add = (slot: Slot): void => {
    slots.push(slot);
    groups.set(slot.group, [...(groups.get(slot.group) ?? []), slot]);
  };
  let httpIndex = 0;
  for (let i = 0; i < PROFILE_COUNT; i++) {
    const profile = `p${String(i).padStart(2, '0')}`;
    const servers: Record<string, unknown> = {};
    const stdio = (server: string, flags: string[], group = `${profile}/${server}`): void => {
      servers[server] = stdioFixtureConfig(flags, { tag, env: { [SLOT_ENV]: group } });
      add({ id: `${profile}/${server}`, profile, server, transport: 'stdio', group, wrapper: flags.includes('--wrapper') });
    };
    stdio('a', []);
    if (i % 2 === 0) stdio('b', []);
    if (i === 1 || i === 5) stdio('w', ['--wrapper']);
    if (i < 4) {
      stdio('s', [], 'shared/s');
      servers.s = { ...(servers.s as object), share: true };
    }
    if (i % 4 === 2 || i === 3) {
      const fixture = http[httpIndex++ % http.length] as HttpFixture;
      servers.h = { type: 'http', url: fixture.url };
      add({ id: `${profile}/h`, profile, server: 'h', transport: 'http', group: `http:${fixture.url}`, wrapper: false, http: fixture });
    }
    profiles[profile] = { mcpServers: servers };
  }
  return { tag, profiles, slots, groups, http };
}

// ------------------------------------------------------------------------------------------ bookkeeping

class Faults implements FaultLog {
  private readonly kills = new Map<string, number[]>();
  private readonly forgets = new Map<string, number[]>();
  private readonly reloads = new Map<string, [number, number][]>();
  closeStartedAt: number | undefined;
  readonly injected = new Tally();
  readonly skipped = new Tally();
  readonly opErrors = new Examples();

  killsOf(slot: string): readonly number[] {
    return this.kills.get(slot) ?? [];
  }
  forgetsOf(slot: string): readonly number[] {
    return this.forgets.get(slot) ?? [];
  }
  reloadsOf(profile: string): readonly (readonly [number, number])[] {
    return this.reloads.get(profile) ?? [];
  }

  killed(slots: readonly Slot[], at = now()): void {
    for (const slot of slots) this.kills.set(slot.id, [...this.killsOf(slot.id), at]);
  }
  forgot(slots: readonly Slot[], at = now()): void {
    for (const slot of slots) this.forgets.set(slot.id, [...this.forgetsOf(slot.id), at]);
  }
  /** Opens a reload window (end = ∞ until `end()` is called). */
  reloading(profiles: readonly string[]): { end(): void } {
    const windows = profiles.map((profile) => {
      const window: [number, number] = [now(), Number.POSITIVE_INFINITY];
      this.reloads.set(profile, [...(this.reloads.get(profile) ?? []), window]);
      return window;
    });
    return {
      end: () => {
        const at = now();
        for (const window of windows) window[1] = at;
      },
    };
  }
}

interface Sample {
  at: number;
  phase: Phase;
  rss: number;
  heapUsed: number;
  /** heapUsed right after a full GC (every GC_EVERY_SAMPLES samples). */
  retainedHeap?: number;
  liveOwners: number;
  ownerOverlaps: number;
  tagged: number;
}

type Phase = 'warm-up' | 'faults' | 'drain' | 'recovery' | 'close';

class Soak {
  readonly rng: Rng;
  readonly faults = new Faults();
  readonly attempted = new Tally();
  readonly outcomes = new Tally();
  readonly failures = new Examples();
  readonly warnings = new Examples();
  readonly otherFailures = new Examples();
  readonly events = new Tally();
  readonly turnFailedKinds = new Tally();
  readonly samples: Sample[] = [];
  readonly latencies: number[] = [];
  phase: Phase = 'warm-up';
  faultPhaseStart = 0;
  stopLoad = false;
  stopFaults = false;
  callCount = 0;
  turns = 0;
  turnsWaitTimedOut = 0;
  emptyTurns = 0;
  maxLiveOwners = 0;
  maxTagged = 0;
  reloadAllCount = 0;
  /** Fault operations that overran their limit and have not settled yet. */
  readonly overruns = new Set<string>();
  /** Lines about the host's own counters, taken before close(). */
  readonly finalLines: string[] = [];
  private readonly weights: Record<string, number>;

  constructor(
    readonly options: SoakOptions,
    readonly world: World,
    readonly host: Host,
  ) {
    this.rng = new Rng(options.seed);
    const only = options.faults;
    this.weights = Object.fromEntries(Object.entries(FAULT_WEIGHTS).filter(([kind]) => only === undefined || only.includes(kind as FaultKind)));
  }

  // ---------------------------------------------------------------- calls

  private argsFor(tool: string, rng: Rng, slowMs?: number): Record<string, unknown> {
    switch (tool) {
      case 'echo':
        return { text: `soak-${rng.int(0, 1e9)}` };
      case 'add':
        return { a: rng.int(-1000, 1000), b: rng.int(-1000, 1000) };
      case 'slow':
      case 'slow_read':
        return { ms: slowMs ?? rng.int(20, 600) };
      default:
        return {};
    }
  }

  /** Checks a successful result against its request. */
  private verify(slot: Slot, tool: string, args: Record<string, unknown>, result: CallToolResult): CallOutcome {
    const text = result.content?.map((part) => (part.type === 'text' ? part.text : `[${part.type}]`)).join(' ') ?? '';
    if (result.isError) return { kind: 'tool-error', text: text.slice(0, 200) };
    const structured = result.structuredContent as Record<string, unknown> | undefined;
    const bad = (message: string): CallOutcome => ({ kind: 'bad-result', message });
    switch (tool) {
      case 'fail':
        return bad('fail answered without isError');
      case 'echo':
        return text === args.text ? { kind: 'ok' } : bad(`echo ${JSON.stringify(args.text)} answered ${JSON.stringify(text.slice(0, 100))}`);
      case 'add':
        return structured?.sum === (args.a as number) + (args.b as number) ? { kind: 'ok' } : bad(`add ${String(args.a)}+${String(args.b)} answered ${JSON.stringify(structured)}`);
      case 'pid': {
        const pid = structured?.pid;
        if (typeof pid !== 'number') return bad(`pid answered ${JSON.stringify(structured)}`);
        if (slot.http) return pid === slot.http.pid ? { kind: 'ok' } : bad(`pid of ${slot.id} is ${pid}, the HTTP fixture is ${slot.http.pid}`);
        const group = slotGroupOf(pid);
        // Gone already (killed meanwhile): nothing to compare.
        if (group === undefined) return { kind: 'ok' };
        return group === slot.group ? { kind: 'ok' } : bad(`call to ${slot.id} was answered by pid ${pid}, which serves ${group}`);
      }
      case 'increment':
      case 'calls': {
        const value = structured?.[tool === 'increment' ? 'value' : 'calls'];
        return typeof value === 'number' && value >= 1 ? { kind: 'ok' } : bad(`${tool} answered ${JSON.stringify(structured)}`);
      }
      default:
        return { kind: 'ok' };
    }
  }

  /** Runs one call, judges it and counts it. Never throws. */
  async call(
    slot: Slot,
    tool: string,
    replayable: boolean,
    origin: CallRecord['origin'],
    invoke: (args: Record<string, unknown>, options: CallOptions) => Promise<CallToolResult>,
    rng: Rng,
    extra: { slowMs?: number; cancelAfterMs?: number } = {},
  ): Promise<CallRecord> {
    this.callCount++;
    this.attempted.add(origin);
    const args = this.argsFor(tool, rng, extra.slowMs);
    const options: CallOptions = { timeoutMs: CALL_TIMEOUT_MS };
    let cancelFired = false;
    let cancelTimer: NodeJS.Timeout | undefined;
    if (extra.cancelAfterMs !== undefined) {
      const controller = new AbortController();
      options.signal = controller.signal;
      cancelTimer = setTimeout(() => {
        cancelFired = true;
        controller.abort(new Error('soak cancel'));
      }, extra.cancelAfterMs);
    }
    const start = now();
    let outcome: CallOutcome;
    try {
      outcome = this.verify(slot, tool, args, await invoke(args, options));
    } catch (error) {
      outcome = isMcpSupervisorError(error)
        ? { kind: 'error', code: error.code, retryable: error.retryable, server: error.server, message: error.message }
        : { kind: 'foreign', message: describe(error) };
    } finally {
      clearTimeout(cancelTimer);
    }
    const end = now();
    this.latencies.push(end - start);
    if (this.latencies.length > 50_000) this.latencies.splice(0, 25_000);
    const record: CallRecord = { slot: slot.id, profile: slot.profile, server: slot.server, tool, transport: slot.transport, replayable, origin, start, end, cancelFired, outcome };
    const verdict = judge(record, this.faults);
    const outcomeLabel = outcome.kind === 'error' ? outcome.code : outcome.kind;
    this.outcomes.add(outcomeLabel);
    const detail = outcome.kind === 'ok' ? 'ok' : outcome.kind === 'tool-error' ? `isError: ${outcome.text}` : outcome.message.slice(0, 240);
    const example = `${stamp(start)}→${stamp(end)} ${origin} ${slot.id} ${tool}: ${detail}`;
    if (!verdict.ok) {
      this.failures.add(verdict.label, this.failures.wants(verdict.label) && outcome.kind === 'error' ? `${example} ${this.supervisorState(slot)}` : example);
      if (this.options.verbose) log(`FAILED CALL ${verdict.label}: ${example}`);
    } else if (verdict.warning) this.warnings.add(verdict.label, example);
    return record;
  }

  /** The public stats of a slot's supervisor, as a short string for failure examples. */
  supervisorState(slot: Slot): string {
    const stats = this.host.stats().sessions.find((session) => session.server === slot.server && session.profiles.includes(slot.profile));
    if (!stats) return '[no supervisor]';
    return `[supervisor now: ${stats.state}, breaker ${JSON.stringify(stats.breaker)}, attemptsSinceProven ${stats.attemptsSinceProven}, calls ${stats.calls}, connects ${stats.connects}]`;
  }

  /** Supervisors that are not simply ready with a closed breaker. */
  unusualSupervisors(): string {
    const odd = this.host
      .stats()
      .sessions.filter((session) => session.state !== 'ready' || session.breaker.kind !== 'closed')
      .map((session) => `${session.profiles.join('+')}/${session.server}: ${session.state}, breaker ${session.breaker.kind}${session.breaker.kind === 'half-open' ? ` probeInFlight=${String(session.breaker.probeInFlight)}` : ''}`);
    return odd.length === 0 ? 'every supervisor ready with a closed breaker' : odd.join('; ');
  }

  private toolSlot(turn: Turn, tool: TurnTool): Slot | undefined {
    return this.world.slots.find((slot) => slot.profile === turn.key && slot.server === tool.server);
  }

  private callOnTurn(turn: Turn, tool: TurnTool, rng: Rng, origin: CallRecord['origin'], cancel: boolean): Promise<CallRecord> | undefined {
    const slot = this.toolSlot(turn, tool);
    if (!slot) {
      this.otherFailures.add('turn offered a tool of an unknown server', `${turn.key} ${tool.name}`);
      return undefined;
    }
    const replayable = tool.annotations?.readOnlyHint === true || tool.annotations?.idempotentHint === true;
    return this.call(slot, tool.tool, replayable, origin, (args, options) => turn.callTool(tool.name, args, options), rng, cancel ? { cancelAfterMs: rng.int(5, 400) } : {});
  }

  private noteTurn(turn: Turn): void {
    this.turns++;
    if (turn.waitTimedOut) this.turnsWaitTimedOut++;
    for (const failed of turn.failed) this.turnFailedKinds.add(failed.kind);
  }

  // ---------------------------------------------------------------- load

  async turnLoop(rng: Rng, chooseProfile: () => string, deadline: number): Promise<void> {
    while (!this.stopLoad && now() < deadline && this.callCount < MAX_CALLS) {
      const profile = chooseProfile();
      let turn: Turn;
      try {
        turn = await this.host.beginTurn(profile, { maxWaitMs: TURN_WAIT_MS });
      } catch (error) {
        this.otherFailures.add(`beginTurn threw ${isMcpSupervisorError(error) ? error.code : 'a non-McpSupervisorError'}`, `${stamp()} ${profile}: ${describe(error).slice(0, 200)}`);
        await sleep(200);
        continue;
      }
      this.noteTurn(turn);
      const usable = turn.tools.filter((tool) => (TRAFFIC_TOOLS as readonly string[]).includes(tool.tool));
      if (usable.length === 0) {
        this.emptyTurns++;
        await sleep(100);
        continue;
      }
      const calls: Promise<CallRecord>[] = [];
      for (let i = rng.int(1, 3); i > 0; i--) {
        const call = this.callOnTurn(turn, rng.pick(usable), rng, 'turn', rng.chance(0.04));
        if (call) calls.push(call);
      }
      await Promise.all(calls);
      await sleep(rng.int(0, 250));
    }
  }

  // ---------------------------------------------------------------- faults

  private stdioSlots(): Slot[] {
    return this.world.slots.filter((slot) => slot.transport === 'stdio');
  }

  private httpSlots(): Slot[] {
    return this.world.slots.filter((slot) => slot.transport === 'http');
  }

  /** Current session leader pids by slot group (from the public stats). */
  private sessionLeaders(): Map<number, string> {
    const leaders = new Map<number, string>();
    for (const session of this.host.stats().sessions) {
      if (session.pid === undefined) continue;
      const group = slotGroupOf(session.pid);
      if (group !== undefined) leaders.set(session.pid, group);
    }
    return leaders;
  }

  /** SIGKILLs `pid` after logging the kill against every slot its group serves. */
  private kill(pid: number, kind: FaultKind, count = true): boolean {
    const group = slotGroupOf(pid);
    const slots = group === undefined ? undefined : this.world.groups.get(group);
    if (!slots || procState(pid) !== 'alive') {
      this.faults.skipped.add(`${kind}: target gone`);
      return false;
    }
    const what = this.options.verbose ? cmdline(pid).slice(-60) : '';
    this.faults.killed(slots);
    if (!signal(pid, 'SIGKILL')) {
      this.faults.skipped.add(`${kind}: target gone`);
      return false;
    }
    this.faults.injected.add(count ? kind : `${kind} (SIGKILLs)`);
    if (count && this.options.verbose) log(`fault ${kind}: SIGKILL ${pid} (${group}) ${what}`);
    return true;
  }

  /** A process of the slot's live session: the leader, or for a wrapper any member of its tree. */
  private sessionProcess(slot: Slot, rng: Rng, innerServer = false): number | undefined {
    const session = this.host.stats().sessions.find((stats) => stats.server === slot.server && stats.profiles.includes(slot.profile) && stats.pid !== undefined);
    const leader = session?.pid;
    if (leader === undefined) return undefined;
    if (!slot.wrapper) return leader;
    const members = pidsInGroup(leader);
    if (innerServer) return members.find((pid) => pid !== leader && cmdline(pid).includes('stdio-server.js')) ?? leader;
    return members.length > 0 ? rng.pick(members) : leader;
  }

  /**
   * A fault that lands while a call is running on the server: an `echo` first (so a session is
   * live and the probe is not queued behind a reconnect), then a `slow`/`slow_read` call of
   * 0.8–2 s, and `strike()` 100–500 ms into it.
   */
  private async midCallProbe(slot: Slot, rng: Rng, kind: FaultKind, origin: CallRecord['origin'], strike: () => Promise<void> | void): Promise<void> {
    const invoke = (tool: string) => (args: Record<string, unknown>, options: CallOptions) => this.host.callTool(slot.profile, slot.server, tool, args, options);
    const warm = await this.call(slot, 'echo', true, 'probe-warm-up', invoke('echo'), rng);
    if (warm.outcome.kind !== 'ok') {
      this.faults.skipped.add(`${kind}: warm-up echo failed`);
      return;
    }
    const tool = rng.pick(['slow', 'slow_read', 'slow'] as const);
    const probe = this.call(slot, tool, tool === 'slow_read', origin, invoke(tool), rng, { slowMs: rng.int(800, 2000) });
    await sleep(rng.int(100, 500));
    await strike();
    await probe;
  }

  private async forget(fixture: HttpFixture, kind: FaultKind): Promise<void> {
    this.faults.forgot(this.httpSlots().filter((slot) => slot.http === fixture));
    const outcome = await bounded(fixture.forgetSessions(), 10_000);
    if (outcome === 'overran' || 'error' in outcome) {
      this.faults.opErrors.add(`${kind}: forgetSessions failed`, `${stamp()} ${outcome === 'overran' ? 'overran 10 s' : describe(outcome.error)}`);
      return;
    }
    this.faults.injected.add(kind);
    if (this.options.verbose) log(`fault ${kind}: ${fixture.url} forgot ${outcome.value} sessions`);
  }

  private async injectOne(rng: Rng): Promise<void> {
    let kind = rng.weighted(this.weights) as FaultKind;
    if (kind === 'reload-all' && this.reloadAllCount >= MAX_RELOAD_ALL) kind = 'reload';
    switch (kind) {
      case 'kill-session': {
        const leaders = [...this.sessionLeaders().keys()];
        if (leaders.length === 0) return this.faults.skipped.add(`${kind}: no live session`);
        const leader = rng.pick(leaders);
        const group = slotGroupOf(leader);
        const slot = group === undefined ? undefined : this.world.groups.get(group)?.[0];
        const target = slot?.wrapper ? rng.pick(pidsInGroup(leader).length > 0 ? pidsInGroup(leader) : [leader]) : leader;
        this.kill(target, kind);
        return;
      }
      case 'kill-mid-call': {
        const slot = rng.pick(this.stdioSlots());
        return this.midCallProbe(slot, rng, kind, 'kill-probe', () => {
          const pid = this.sessionProcess(slot, rng, true);
          if (pid === undefined) this.faults.skipped.add(`${kind}: no live session`);
          else this.kill(pid, kind);
        });
      }
      case 'kill-scan': {
        const http = new Set(this.world.http.map((fixture) => fixture.pid));
        const candidates = pidsWithTag(this.world.tag).filter((pid) => !http.has(pid) && slotGroupOf(pid) !== undefined);
        if (candidates.length === 0) return this.faults.skipped.add(`${kind}: nothing to kill`);
        this.kill(rng.pick(candidates), kind);
        return;
      }
      case 'kill-storm': {
        // Every process of one slot dies as soon as it is seen, for 2–5 s: respawns fail, the
        // breaker opens, the reconnect budget runs out and the server parks; it must come back.
        const slot = rng.pick(this.stdioSlots());
        const until = now() + rng.int(2000, 5000);
        let kills = 0;
        while (now() < until && !this.stopFaults) {
          for (const pid of pidsWithTag(this.world.tag)) {
            if (slotGroupOf(pid) === slot.group && this.kill(pid, kind, false)) kills++;
          }
          await sleep(40);
        }
        if (kills > 0) this.faults.injected.add(kind);
        else this.faults.skipped.add(`${kind}: nothing to kill`);
        if (this.options.verbose) log(`fault ${kind}: ${slot.group} ${kills} kills`);
        return;
      }
      case 'forget':
        return this.forget(rng.pick(this.world.http), kind);
      case 'forget-mid-call': {
        const slot = rng.pick(this.httpSlots());
        return this.midCallProbe(slot, rng, kind, 'forget-probe', () => this.forget(slot.http as HttpFixture, kind));
      }
      case 'reload':
      case 'reload-all': {
        const all = kind === 'reload-all';
        if (all) this.reloadAllCount++;
        return this.reload(kind, all ? Object.keys(this.world.profiles) : [rng.pick(Object.keys(this.world.profiles))], all);
      }
      case 'reload-mid-call': {
        const slot = rng.pick(this.world.slots);
        return this.midCallProbe(slot, rng, kind, 'reload-probe', () => this.reload(kind, [slot.profile], false));
      }
      case 'retry': {
        const profile = rng.pick(Object.keys(this.world.profiles));
        const started = now();
        const operation = this.host.retry(profile, { maxWaitMs: 15_000 });
        const outcome = await bounded(operation, FAULT_OP_LIMIT_MS);
        if (outcome === 'overran') this.followOverrun(`retry ${profile}`, started, operation);
        this.faultOpOutcome(kind, profile, started, outcome);
        return;
      }
      case 'retry-kill-discovery': {
        const profile = rng.pick(Object.keys(this.world.profiles));
        const started = now();
        const operation = this.host.retry(profile, { maxWaitMs: 15_000 });
        const retrying = bounded(operation, FAULT_OP_LIMIT_MS).then((outcome) => {
          if (outcome === 'overran') this.followOverrun(`retry ${profile}`, started, operation);
          return outcome;
        });
        await sleep(rng.int(30, 400));
        // Processes of this profile's servers that are not a live session: discovery children
        // (or a session being respawned right now).
        const sessionPids = new Set([...this.sessionLeaders().keys()].flatMap((leader) => [leader, ...pidsInGroup(leader)]));
        const groups = new Set(this.world.slots.filter((slot) => slot.profile === profile && slot.transport === 'stdio').map((slot) => slot.group));
        const candidates = pidsWithTag(this.world.tag).filter((pid) => !sessionPids.has(pid) && groups.has(slotGroupOf(pid) ?? ''));
        if (candidates.length === 0) this.faults.skipped.add(`${kind}: no discovery process seen`);
        else this.kill(rng.pick(candidates), kind);
        this.faultOpOutcome('retry', profile, started, await retrying, undefined, false);
        return;
      }
    }
  }

  private async reload(kind: FaultKind, profiles: string[], all: boolean): Promise<void> {
    const window = this.faults.reloading(profiles);
    const started = now();
    const operation = this.host.reload(all ? undefined : profiles[0]);
    const outcome = await bounded(operation, FAULT_OP_LIMIT_MS);
    if (outcome === 'overran') this.followOverrun(`${kind} ${all ? 'all' : (profiles[0] as string)}`, started, operation, () => window.end());
    else window.end();
    this.faultOpOutcome(kind, all ? 'all' : (profiles[0] as string), started, outcome, (value) => {
      const errors = (value as { teardownErrors?: unknown[] }).teardownErrors ?? [];
      if (errors.length > 0) this.faults.opErrors.add(`${kind}: teardownErrors`, `${stamp()} ${JSON.stringify(errors).slice(0, 240)}`);
    });
  }

  /**
   * A fault operation overran its limit: note what the supervisors look like now, and when (if
   * ever) the operation settles; `onSettled` runs then.
   */
  private followOverrun(what: string, started: number, operation: Promise<unknown>, onSettled?: () => void): void {
    this.otherFailures.add(`${what.split(' ')[0] ?? what} overran: supervisors at the overrun`, `${stamp()} ${what}: ${this.unusualSupervisors().slice(0, 600)}`);
    this.overruns.add(what);
    const settled = (how: string): void => {
      this.overruns.delete(what);
      onSettled?.();
      this.otherFailures.add(`${what.split(' ')[0] ?? what} overran: settled late`, `${what} started ${stamp(started)}, ${how} after ${((now() - started) / 1000).toFixed(1)} s`);
    };
    operation.then(
      () => settled('resolved'),
      (error: unknown) => settled(`rejected (${describe(error).slice(0, 120)})`),
    );
  }

  /** Judges a fault operation (reload, retry); `count` adds it to the injected faults. */
  private faultOpOutcome(kind: string, subject: string, started: number, outcome: { value: unknown } | { error: unknown } | 'overran', onValue?: (value: unknown) => void, count = true): void {
    if (outcome === 'overran') {
      this.otherFailures.add(`${kind} did not settle within ${FAULT_OP_LIMIT_MS / 1000} s`, `${stamp(started)} ${subject}`);
      return;
    }
    if ('error' in outcome) {
      const error = outcome.error;
      const code = isMcpSupervisorError(error) ? error.code : 'non-McpSupervisorError';
      // With killable fixtures a quiescence can always finish: a refused retry or aborted reload
      // means a discovery body or one of its processes survived the ladder.
      this.otherFailures.add(`${kind} threw ${code}`, `${stamp(started)} ${subject}: ${describe(error).slice(0, 240)}`);
      return;
    }
    if (count) this.faults.injected.add(kind);
    onValue?.(outcome.value);
  }

  async faultLoop(rng: Rng, deadline: number): Promise<void> {
    while (!this.stopFaults && now() < deadline) {
      await sleep(rng.int(200, 1500));
      if (this.stopFaults || now() >= deadline) break;
      try {
        await this.injectOne(rng);
      } catch (error) {
        this.otherFailures.add('fault injector threw', `${stamp()} ${describe(error)}`);
      }
    }
  }

  // ---------------------------------------------------------------- sampling

  sample(): void {
    let retainedHeap: number | undefined;
    if (this.samples.length % GC_EVERY_SAMPLES === 0) {
      fullGc();
      retainedHeap = process.memoryUsage().heapUsed;
    }
    const memory = process.memoryUsage();
    const discovery = this.host.stats().discovery;
    const tagged = pidsWithTag(this.world.tag).length;
    this.maxLiveOwners = Math.max(this.maxLiveOwners, discovery.liveOwners);
    this.maxTagged = Math.max(this.maxTagged, tagged);
    this.samples.push({ at: now(), phase: this.phase, rss: memory.rss, heapUsed: memory.heapUsed, ...(retainedHeap === undefined ? {} : { retainedHeap }), liveOwners: discovery.liveOwners, ownerOverlaps: discovery.ownerOverlaps, tagged });
    // One body per worker thread and one owner per key: never more live owners than threads.
    if (discovery.liveOwners > HOST_OPTIONS.discovery.maxThreads) {
      this.otherFailures.add(`liveOwners above maxThreads (${HOST_OPTIONS.discovery.maxThreads})`, `${stamp()} liveOwners=${discovery.liveOwners}`);
    }
  }

  // ---------------------------------------------------------------- recovery

  /** One slot: a fresh turn offering its `echo`, and a successful call, retrying retryable errors. */
  async recoverSlot(slot: Slot, deadline: number, rng: Rng): Promise<{ ok: boolean; ms: number; attempts: number; last: string }> {
    const started = now();
    let attempts = 0;
    let last = 'never tried';
    while (now() < deadline) {
      let turn: Turn;
      try {
        turn = await this.host.beginTurn(slot.profile, { maxWaitMs: Math.max(1, Math.min(5_000, deadline - now())) });
      } catch (error) {
        last = `beginTurn threw ${describe(error)}`;
        await sleep(RETRY_WAIT_MS);
        continue;
      }
      this.noteTurn(turn);
      const tool = turn.tools.find((candidate) => candidate.server === slot.server && candidate.tool === 'echo');
      if (!tool) {
        const failed = turn.failed.find((entry) => entry.server === slot.server);
        last = failed ? `absent from the turn (${failed.kind}: ${failed.message.slice(0, 160)})` : `absent from the turn (status ${turn.status}, pending ${turn.pending.join(',') || '-'})`;
        await sleep(RETRY_WAIT_MS);
        continue;
      }
      attempts++;
      const record = await this.callOnTurn(turn, tool, rng, 'recovery', false);
      if (!record) return { ok: false, ms: now() - started, attempts, last: 'no slot' };
      const outcome = record.outcome;
      if (outcome.kind === 'ok') return { ok: true, ms: now() - started, attempts, last: 'ok' };
      last = outcome.kind === 'error' ? `${outcome.code}: ${outcome.message.slice(0, 160)}` : `${outcome.kind}`;
      if (outcome.kind === 'error' && !outcome.retryable) {
        this.otherFailures.add(`recovery: non-retryable ${outcome.code} after the faults stopped`, `${stamp()} ${slot.id}: ${outcome.message.slice(0, 200)}`);
      }
      await sleep(RETRY_WAIT_MS);
    }
    return { ok: false, ms: now() - started, attempts, last };
  }
}

// ------------------------------------------------------------------------------------------ main

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  const tag = newFixtureTag('soak');
  const verdicts: { name: string; ok: boolean; text: string }[] = [];
  const check = (name: string, ok: boolean, text: string): void => {
    verdicts.push({ name, ok, text });
  };
  process.stdout.write(
    `mcp-supervisor soak: seed=${options.seed} duration-ms=${options.durationMs} recovery-ms=${options.recoveryMs} faults=${options.faults?.join(',') ?? 'all'} tag=${tag}\n` +
      `replay with: node dist/test/soak/soak.js --seed ${options.seed} --duration-ms ${options.durationMs}${options.faults ? ` --faults ${options.faults.join(',')}` : ''}\n`,
  );

  // A hard bound on the whole run: whatever hangs, the soak ends, reaps its processes and fails.
  const hardLimitMs = options.durationMs + options.recoveryMs + 180_000;
  const hardLimit = setTimeout(() => {
    process.stdout.write(`\nFAIL: the soak overran its hard limit of ${hardLimitMs} ms; active resources: ${process.getActiveResourcesInfo().join(', ')}\n`);
    for (const pid of pidsWithTag(tag)) signal(pid, 'SIGKILL');
    process.exit(2);
  }, hardLimitMs);
  hardLimit.unref();

  const world = await buildWorld(tag);
  const jitter = new Rng(options.seed ^ 0x5eed);
  const host = createHost({ profiles: world.profiles, ...HOST_OPTIONS, random: () => jitter.next() });
  const soak = new Soak(options, world, host);
  const eventNames: (keyof HostEvents)[] = [
    'discovery:start', 'discovery:settled', 'discovery:retired', 'reload:done', 'tools:changed',
    'server:connected', 'server:exited', 'server:respawned', 'server:parked', 'server:revived',
    'breaker:open', 'breaker:half-open', 'breaker:closed',
  ];
  for (const name of eventNames) host.on(name, () => soak.events.add(name));
  host.on('discovery:retired', (event) => {
    soak.events.add(`retired:${event.rung}`);
    if (!event.quiesced) soak.otherFailures.add('discovery retired but not quiesced', `${stamp()} ${event.key} gen ${String(event.generation)} (${event.reason}, rung ${event.rung})`);
  });
  host.on('reload:done', (event) => {
    if (!event.ok) soak.events.add('reload:done(not ok)');
  });
  const sampler = setInterval(() => soak.sample(), SAMPLE_INTERVAL_MS);
  const phaseAt: Partial<Record<Phase | 'end', number>> = { 'warm-up': now() };

  let closed = false;
  try {
    // ---- warm-up: every profile discovered once
    host.start();
    const views = await Promise.all(Object.keys(world.profiles).map((profile) => host.ready(profile, { maxWaitMs: 60_000 })));
    const notReady = views.filter((view) => view.status !== 'ready');
    log(`warm-up: ${views.length} profiles, ${world.slots.length} server slots (${world.slots.filter((s) => s.transport === 'http').length} HTTP), not ready: ${notReady.map((v) => `${v.key}=${v.status}`).join(', ') || 'none'}`);
    check('warm-up', notReady.length === 0, notReady.length === 0 ? 'every profile ready before the faults' : `not ready before the faults: ${notReady.map((v) => `${v.key}=${v.status}`).join(', ')}`);

    // ---- fault phase
    soak.phase = 'faults';
    soak.faultPhaseStart = phaseAt.faults = now();
    const deadline = now() + options.durationMs;
    const profiles = Object.keys(world.profiles);
    const loops: Promise<void>[] = [];
    for (const profile of profiles) loops.push(soak.turnLoop(soak.rng.fork(), () => profile, deadline));
    for (let i = 0; i < EXTRA_TURN_LOOPS; i++) {
      const rng = soak.rng.fork();
      loops.push(soak.turnLoop(rng, () => rng.pick(profiles), deadline));
    }
    const injectors = [soak.faultLoop(soak.rng.fork(), deadline), soak.faultLoop(soak.rng.fork(), deadline)];
    const progress = setInterval(() => {
      const last = soak.samples[soak.samples.length - 1];
      log(`progress: calls=${soak.callCount} failures=${soak.failures.total() + soak.otherFailures.total()} faults=${soak.faults.injected.total()} rss=${last ? mb(last.rss) : '?'} tagged=${last?.tagged ?? '?'}`);
    }, 15_000);
    await Promise.all(injectors);
    soak.stopFaults = true;

    // ---- drain: traffic ends, every call and fault operation settles
    soak.phase = 'drain';
    phaseAt.drain = now();
    soak.stopLoad = true;
    await Promise.all(loops);
    clearInterval(progress);
    log(`faults stopped: ${soak.callCount} calls, faults ${soak.faults.injected.line()}`);

    // ---- recovery: every server of every profile usable again
    soak.phase = 'recovery';
    phaseAt.recovery = now();
    const recoveryDeadline = now() + options.recoveryMs;
    const results = await Promise.all(world.slots.map(async (slot) => ({ slot, result: await soak.recoverSlot(slot, recoveryDeadline, soak.rng.fork()) })));
    const unusable = results.filter(({ result }) => !result.ok);
    const recoveryTimes = results.filter(({ result }) => result.ok).map(({ result }) => result.ms);
    log(`recovery: ${results.length - unusable.length}/${results.length} servers usable; time to usable p50=${median(recoveryTimes).toFixed(0)} ms max=${Math.max(0, ...recoveryTimes).toFixed(0)} ms`);
    check(
      'recovery',
      unusable.length === 0,
      unusable.length === 0
        ? `every server of every profile answered within ${options.recoveryMs} ms after the faults stopped (max ${Math.max(0, ...recoveryTimes).toFixed(0)} ms)`
        : `still unusable after ${options.recoveryMs} ms: ${unusable.map(({ slot, result }) => `${slot.id} [${result.attempts} calls; last: ${result.last}]`).join('; ')}`,
    );

    if (soak.overruns.size > 0) {
      soak.otherFailures.add('operations still unsettled after recovery', `${[...soak.overruns].join(', ')}; supervisors: ${soak.unusualSupervisors().slice(0, 600)}`);
    }
    const stats = host.stats();
    const sum = (field: 'connects' | 'respawns' | 'calls' | 'replays' | 'reinitialisations'): number => stats.sessions.reduce((total, session) => total + session[field], 0);
    const states = new Tally();
    for (const session of stats.sessions) states.add(`${session.state}/${session.breaker.kind}`);
    soak.finalLines.push(
      `discovery stats: quiesces ${stats.discovery.quiesces.total} by rung ${JSON.stringify(stats.discovery.quiesces.byRung)}, peakWorkers ${stats.discovery.peakWorkers}, droppedStaleMessages ${stats.discovery.droppedStaleMessages}, zombies ${stats.discovery.zombies}, recordedChildren ${stats.discovery.recordedChildren}, liveOwners ${stats.discovery.liveOwners}`,
      `session supervisors now: ${stats.sessions.length} (state/breaker: ${states.line()}); counters since their last reload: connects ${sum('connects')}, respawns ${sum('respawns')}, calls ${sum('calls')}, replays ${sum('replays')}, reinitialisations ${sum('reinitialisations')}`,
    );
    const fixtureStats = await Promise.all(world.http.map((fixture) => fixture.stats().catch(() => undefined)));
    soak.finalLines.push(`HTTP fixtures after recovery: ${fixtureStats.map((fs, i) => (fs ? `#${i} initializes=${fs.initializes} toolCalls=${fs.toolCalls} open sessions=${fs.sessions}` : `#${i} stats failed`)).join('; ')}`);
    // Each HTTP slot holds one live session; a session the host no longer uses must be ended
    // (DELETE), or servers accumulate them. A forget clears them, so this only sees leaks since.
    const lastForget = (fixture: HttpFixture): string => {
      const times = soak.faults.forgetsOf(world.slots.find((slot) => slot.http === fixture)?.id ?? '');
      return times.length === 0 ? 'never' : stamp(Math.max(...times));
    };
    const sessionLeaks = world.http.flatMap((fixture, i) => {
      const open = fixtureStats[i]?.sessions;
      const slots = world.slots.filter((slot) => slot.http === fixture).length;
      return open === undefined || open <= slots ? [] : [`fixture #${i}: ${open} open sessions for ${slots} slots (last forget of it: ${lastForget(fixture)})`];
    });
    check('HTTP sessions', sessionLeaks.length === 0, sessionLeaks.length === 0 ? 'no HTTP fixture holds more sessions than the slots using it' : `sessions left open on the servers: ${sessionLeaks.join('; ')}`);

    // Processes after recovery: each live session's tree and the HTTP fixtures, nothing else.
    const settled = await waitForTaggedCount(soak, host, world);
    check('no orphans', settled.ok, settled.text);
    soak.sample();
  } finally {
    // ---- close
    soak.phase = 'close';
    phaseAt.close = now();
    soak.faults.closeStartedAt = now();
    clearInterval(sampler);
    const closing = await bounded(host.close(), 30_000);
    const closeMs = now() - (phaseAt.close ?? 0);
    closed = closing !== 'overran' && !('error' in closing);
    check('close', closed, closed ? `host.close() took ${closeMs.toFixed(0)} ms` : `host.close() ${closing === 'overran' ? 'did not settle within 30 s' : `threw ${describe((closing as { error: unknown }).error)}`}`);
    const httpPids = new Set(world.http.map((fixture) => fixture.pid));
    const rightAfter = pidsWithTag(tag).filter((pid) => !httpPids.has(pid));
    const survivors = rightAfter.length === 0 ? [] : await waitGone(rightAfter, 2000);
    check(
      'no leak after close',
      rightAfter.length === 0,
      rightAfter.length === 0
        ? 'no server process carries the tag once close() resolved'
        : `${rightAfter.length} tagged process(es) alive right after close(): ${rightAfter.map((pid) => `${pid} ${cmdline(pid).slice(-80)}`).join('; ')}${survivors.length > 0 ? ` — ${survivors.length} still alive 2 s later` : ' (gone within 2 s)'}`,
    );
    await Promise.all(world.http.map((fixture) => fixture.stop().catch(() => undefined)));
    const leftovers = pidsWithTag(tag);
    if (leftovers.length > 0) {
      check('no leak at the end', false, `tagged processes left at the end: ${leftovers.map((pid) => `${pid} ${cmdline(pid).slice(-80)}`).join('; ')} (SIGKILLed now)`);
      for (const pid of leftovers) signal(pid, 'SIGKILL');
    }
    phaseAt.end = now();
  }

  printReport(soak, world, options, phaseAt, check);
  const failed = verdicts.filter((verdict) => !verdict.ok);
  process.stdout.write('\nverdicts:\n');
  for (const verdict of verdicts) process.stdout.write(`  ${verdict.ok ? 'ok  ' : 'FAIL'} ${verdict.name}: ${verdict.text}\n`);
  process.stdout.write(`\n${failed.length === 0 ? 'PASS' : `FAIL (${failed.map((v) => v.name).join(', ')})`} — seed ${options.seed}, ${((now() - t0) / 1000).toFixed(1)} s\n`);
  process.exitCode = failed.length === 0 ? 0 : 1;

  // The process must now exit by itself. If something still holds the event loop, say what, and fail.
  setTimeout(() => {
    process.stdout.write(`FAIL: still running 15 s after the end; active resources: ${process.getActiveResourcesInfo().join(', ')}\n`);
    process.exit(1);
  }, 15_000).unref();
}

/** After recovery: waits (≤ 5 s) until the tagged processes are exactly the live sessions' trees and the HTTP fixtures. */
async function waitForTaggedCount(soak: Soak, host: Host, world: World): Promise<{ ok: boolean; text: string }> {
  const expected = (): { count: number; groups: Map<string, number> } => {
    const groups = new Map<string, number>();
    let count = world.http.length;
    for (const session of host.stats().sessions) {
      if (session.pid === undefined || procState(session.pid) !== 'alive') continue;
      const members = pidsInGroup(session.pid).length;
      count += members;
      const group = slotGroupOf(session.pid);
      if (group !== undefined) groups.set(group, members);
    }
    return { count, groups };
  };
  const deadline = now() + 5000;
  let tagged = pidsWithTag(world.tag);
  let want = expected();
  while (tagged.length > want.count && now() < deadline) {
    await sleep(100);
    tagged = pidsWithTag(world.tag);
    want = expected();
  }
  if (tagged.length <= want.count) {
    return { ok: true, text: `${tagged.length} tagged processes after recovery = live session trees + HTTP fixtures (max during the run: ${soak.maxTagged})` };
  }
  const extra = tagged.filter((pid) => {
    const group = slotGroupOf(pid);
    return group === undefined || !world.http.some((fixture) => fixture.pid === pid);
  });
  return {
    ok: false,
    text: `${tagged.length} tagged processes after recovery, expected ${want.count}: ${extra
      .slice(0, 12)
      .map((pid) => `${pid}(${slotGroupOf(pid) ?? '?'}) ${cmdline(pid).slice(-50)}`)
      .join('; ')}`,
  };
}

function printReport(soak: Soak, world: World, options: SoakOptions, phaseAt: Partial<Record<Phase | 'end', number>>, check: (name: string, ok: boolean, text: string) => void): void {
  const out: string[] = [];
  const seconds = (from?: number, to?: number): string => (from === undefined || to === undefined ? '?' : `${((to - from) / 1000).toFixed(1)} s`);
  out.push('', '==== soak report ====');
  out.push(`seed ${options.seed}; ${Object.keys(world.profiles).length} profiles, ${world.slots.length} server slots (${world.slots.filter((s) => s.transport === 'stdio').length} stdio incl. 2 wrappers and 4 sharing one process, ${world.slots.filter((s) => s.transport === 'http').length} HTTP on ${world.http.length} fixtures)`);
  out.push(
    `phases: warm-up ${seconds(phaseAt['warm-up'], phaseAt.faults)}, faults ${seconds(phaseAt.faults, phaseAt.drain)}, drain ${seconds(phaseAt.drain, phaseAt.recovery)}, recovery ${seconds(phaseAt.recovery, phaseAt.close)}, close+leak check ${seconds(phaseAt.close, phaseAt.end)}`,
  );
  out.push('', `calls attempted: ${soak.attempted.total()} (${soak.attempted.line()})`);
  const ok = soak.outcomes.get('ok') + soak.outcomes.get('tool-error');
  out.push(`  succeeded: ${ok} (ok=${soak.outcomes.get('ok')}, tool isError from "fail"=${soak.outcomes.get('tool-error')})`);
  const failedCodes = new Tally();
  for (const [label, count] of soak.outcomes.entries()) if (label !== 'ok' && label !== 'tool-error') failedCodes.add(label, count);
  out.push(`  failed: ${failedCodes.total()} by code: ${failedCodes.line()}`);
  out.push(`  latency ms: p50=${median(soak.latencies).toFixed(0)} p99=${percentile(soak.latencies, 99).toFixed(0)} max=${Math.max(0, ...soak.latencies).toFixed(0)}`);
  out.push(`turns: ${soak.turns} (waitTimedOut ${soak.turnsWaitTimedOut}, without usable tools ${soak.emptyTurns}); servers missing from turns by kind: ${soak.turnFailedKinds.line()}`);
  out.push('', `faults injected: ${soak.faults.injected.total()} (${soak.faults.injected.line()})`);
  out.push(`  skipped: ${soak.faults.skipped.line()}`);
  if (soak.faults.opErrors.size > 0) out.push('  fault operation problems (not library failures by themselves):', ...soak.faults.opErrors.lines('    '));
  out.push(`host events: ${soak.events.line()}`);

  const faultSamples = soak.samples.filter((sample) => sample.phase === 'faults');
  const overlaps = Math.max(0, ...soak.samples.map((sample) => sample.ownerOverlaps));
  out.push('', `discovery owners: max liveOwners at a sample ${soak.maxLiveOwners} (maxThreads ${HOST_OPTIONS.discovery.maxThreads}), ownerOverlaps max ${overlaps}, samples ${soak.samples.length}`);
  check('owners', overlaps === 0, `ownerOverlaps stayed ${overlaps} over ${soak.samples.length} samples; max liveOwners ${soak.maxLiveOwners}`);

  // Memory: fault-phase samples after a warm-up; last third vs middle third.
  const policy = { warmUpMs: Math.min(20_000, options.durationMs / 5), maxRatio: 1.25, minGrowthBytes: 64 * 1024 * 1024, minSamples: 15 };
  const judged = faultSamples.filter((sample) => sample.at - soak.faultPhaseStart >= policy.warmUpMs);
  const rss = growthVerdict(judged.map((sample) => sample.rss), policy, 'RSS');
  const heapPolicy = { ...policy, minGrowthBytes: 16 * 1024 * 1024, minSamples: 6 };
  const retained = growthVerdict(judged.flatMap((sample) => (sample.retainedHeap === undefined ? [] : [sample.retainedHeap])), heapPolicy, 'heap after full GC');
  const rssSeries = soak.samples.filter((_, index) => index % Math.max(1, Math.floor(soak.samples.length / 16)) === 0);
  out.push(`RSS samples (every ${SAMPLE_INTERVAL_MS} ms; ~16 shown, phase:MB): ${rssSeries.map((sample) => `${sample.phase[0]}:${(sample.rss / 1048576).toFixed(0)}`).join(' ')}`);
  out.push(`  ${rss.text}`, `  ${retained.text}`);
  out.push(
    `  policy: samples of the fault phase after ${policy.warmUpMs / 1000} s of warm-up (a full GC before every ${GC_EVERY_SAMPLES}th sample); FAIL if the last third's median exceeds the middle third's by > ${((policy.maxRatio - 1) * 100).toFixed(0)}% and by > ${mb(policy.minGrowthBytes)} (RSS) or > ${mb(heapPolicy.minGrowthBytes)} (heap after GC)`,
  );
  check('memory', !rss.grew && !retained.grew, `${rss.text}; ${retained.text}`);
  out.push(`tagged processes: max ${soak.maxTagged} at a sample`, ...soak.finalLines);

  if (soak.warnings.size > 0) out.push('', 'legitimate but noteworthy outcomes:', ...soak.warnings.lines());
  if (soak.failures.size > 0) out.push('', 'WRONG CALL OUTCOMES:', ...soak.failures.lines());
  if (soak.otherFailures.size > 0) out.push('', 'OTHER FAILURES:', ...soak.otherFailures.lines());
  check('call outcomes', soak.failures.total() === 0, soak.failures.total() === 0 ? `every outcome of ${soak.attempted.total()} calls was legitimate for the faults around it` : `${soak.failures.total()} calls ended with a wrong outcome (${soak.failures.size} kinds, listed above)`);
  check('operations', soak.otherFailures.total() === 0, soak.otherFailures.total() === 0 ? 'turns, reloads, retries and quiescence behaved' : `${soak.otherFailures.total()} problems (listed above)`);
  process.stdout.write(`${out.join('\n')}\n`);
}

await main();
