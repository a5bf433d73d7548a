/**
 * Readiness transitions, table-driven. Two tables, each enumerating every pair:
 *
 * 1. the pure transition function (`nextPhase`): every (phase, phase event) pair;
 * 2. the registry: every (phase, event) pair an entry meets in use — a wait, an outcome of the
 *    current or of a stale generation, the body ending, the cap, a retry, a reload, a refresh
 *    coming due, close — driven through the scripted discovery driver and a manual clock. No
 *    sleeps: a barrier on the driver's quiesce holds an entry in `starting`.
 *
 * Every scene has a profile with servers a, b and c, and leaves b as the server to watch:
 * - idle: settled degraded (a ready, b and c failed), its body still releasing its connections;
 *   cooldown (10 s) longer than the cap (1 s), so advancing by the cap fires nothing;
 * - running: the first generation, a ready, c failed, b pending, one waiter; cap (10 s) longer
 *   than the cooldown (1 s), so advancing by the cooldown fires nothing;
 * - starting: the running scene, then a retry whose quiesce of the old body is held.
 * The scripted driver delivers messages of retired bodies too, so the registry's own guard is
 * what drops them.
 */
import test, { type ExecutionContext } from 'ava';
import { type ProfileConfig, parseProfileConfig } from '../../src/index.js';
import type { SettledOutcome } from '../../src/discovery/types.js';
import { TypedEmitter } from '../../src/events.js';
import { Entry } from '../../src/readiness/entry.js';
import { type EntryPhase, type GenerationStamp, type PhaseEvent, nextPhase, shownGeneration } from '../../src/readiness/phase.js';
import { type ReadinessEvents, ReadinessRegistry } from '../../src/readiness/registry.js';
import { type Barrier, ManualClock, barrier, flush } from '../helpers/clock.js';
import { FakeSessions, ScriptedDriver } from '../helpers/scripted-driver.js';

type Kind = EntryPhase['kind'];

// ---------------------------------------------------------------- 1. the pure transition function

const stamp = (generation: number, startedAt: number): GenerationStamp => ({ generation, startedAt });

const PHASES: Record<Kind, EntryPhase> = {
  idle: { kind: 'idle', last: stamp(3, 1000) },
  starting: { kind: 'starting', last: stamp(3, 1000) },
  running: { kind: 'running', run: stamp(5, 2000), inflight: new Set(['a']), capTimer: {} },
};

const PHASE_EVENTS: Record<PhaseEvent['type'], PhaseEvent> = {
  demand: { type: 'demand' },
  retry: { type: 'retry' },
  started: { type: 'started', run: stamp(7, 3000), inflight: new Set(['b']), capTimer: {} },
  abandoned: { type: 'abandoned' },
  settled: { type: 'settled' },
  invalidated: { type: 'invalidated' },
};

/** Every (phase, event) pair: the phase it leads to, or `·` when the phase stays as it is. */
const NEXT: Record<Kind, Record<PhaseEvent['type'], Kind | '·'>> = {
  idle: { demand: 'starting', retry: 'starting', started: '·', abandoned: '·', settled: '·', invalidated: '·' },
  starting: { demand: '·', retry: '·', started: 'running', abandoned: 'idle', settled: 'idle', invalidated: '·' },
  running: { demand: '·', retry: 'starting', started: '·', abandoned: '·', settled: 'idle', invalidated: 'idle' },
};

for (const [from, row] of Object.entries(NEXT) as [Kind, Record<PhaseEvent['type'], Kind | '·'>][]) {
  for (const [type, to] of Object.entries(row) as [PhaseEvent['type'], Kind | '·'][]) {
    test(`nextPhase: ${from} + ${type} → ${to === '·' ? `${from} (unchanged)` : to}`, (t) => {
      const phase = PHASES[from];
      const event = PHASE_EVENTS[type];
      const next = nextPhase(phase, event);
      if (to === '·') {
        t.is(next, undefined);
        return;
      }
      t.is(next?.kind, to);
      // The generation views show is carried over, except by a start, which brings its own.
      t.deepEqual(next && shownGeneration(next), event.type === 'started' ? event.run : shownGeneration(phase));
      if (next?.kind === 'running' && event.type === 'started') t.is(next.inflight, event.inflight);
    });
  }
}

test('Entry.transition: leaving running stops the cap timer; other changes leave timers alone', (t) => {
  const clock = new ManualClock();
  const entry = new Entry('p', clock);
  const run = stamp(1, clock.now());
  t.false(entry.transition({ type: 'started', run, inflight: new Set(), capTimer: {} }), 'an idle entry has no owner being created');
  t.true(entry.transition({ type: 'demand' }));
  t.true(entry.transition({ type: 'started', run, inflight: new Set(['a']), capTimer: clock.setTimeout(() => undefined, 1000) }));
  t.is(clock.pending(), 1);
  t.true(entry.transition({ type: 'retry' }));
  t.is(clock.pending(), 0, 'the cap timer of the retired generation is stopped');
  t.deepEqual(entry.generation, run, 'views keep showing the last generation');
  t.true(entry.transition({ type: 'settled' }));
  t.is(entry.phase.kind, 'idle');
});

// ---------------------------------------------------------------- 2. the registry

const SERVERS = ['a', 'b', 'c'];

function profile(): ProfileConfig {
  return parseProfileConfig({ mcpServers: Object.fromEntries(SERVERS.map((name) => [name, { command: `/bin/${name}` }])) }, { profile: 'p' });
}

/** Tracks whether a promise has settled, and how, without awaiting it. */
interface Tracked {
  readonly state: 'pending' | 'resolved' | 'rejected';
}

function track(promise: Promise<unknown>): Tracked {
  const tracked = { state: 'pending' as Tracked['state'] };
  promise.then(
    () => (tracked.state = 'resolved'),
    () => (tracked.state = 'rejected'),
  );
  return tracked;
}

interface Timing {
  readinessCapMs: number;
  retryCooldownMs: number;
}

interface Scene {
  registry: ReadinessRegistry;
  driver: ScriptedDriver;
  clock: ManualClock;
  timing: Timing;
  /** A wait made while the entry was pending (none for the idle scene: its wait was answered). */
  waiter: Tracked | undefined;
  /** Barriers holding the scene in its phase; released once the event has run. */
  gates: Barrier[];
  /** Quiesce calls made while setting the scene up. */
  quiescesBefore: number;
}

async function scene(t: ExecutionContext, phase: Kind): Promise<Scene> {
  const timing: Timing = phase === 'idle' ? { readinessCapMs: 1000, retryCooldownMs: 10_000 } : { readinessCapMs: 10_000, retryCooldownMs: 1000 };
  const driver = new ScriptedDriver();
  driver.deliverStale = true;
  const clock = new ManualClock();
  const config = profile();
  const registry = new ReadinessRegistry(driver, new FakeSessions(), async () => config, clock, { ...timing, maxRetryCooldownMs: 600_000 }, new TypedEmitter<ReadinessEvents>());
  // Registered first, so it runs last: no row may ever have had two live bodies of the key.
  t.teardown(() => {
    if (driver.overlaps.length > 0) throw new Error(`owner overlap: ${JSON.stringify(driver.overlaps)}`);
  });
  t.teardown(() => registry.close());
  const waiter = track(registry.wait('p'));
  await flush();
  const first = driver.last('p');
  driver.ready(first, 'a');
  driver.fail(first, 'c');
  if (phase === 'idle') driver.fail(first, 'b');
  const gates: Barrier[] = [];
  if (phase === 'starting') {
    const gate = barrier();
    t.teardown(() => gate.resolve());
    driver.quiesceGate.set('p', gate);
    gates.push(gate);
    track(registry.retry('p'));
  }
  await flush();
  t.is(registry.phaseOf('p'), phase, 'the scene is in the phase it stands for');
  return { registry, driver, clock, timing, waiter: phase === 'idle' ? undefined : waiter, gates, quiescesBefore: driver.quiesceCalls.length };
}

function readyOutcome(server: string): SettledOutcome {
  return { status: 'ready', server, tools: [{ name: 'late', inputSchema: { type: 'object' } }], prompts: [], resources: [], resourceTemplates: [], timings: { totalMs: 1 } };
}

/** The events of the registry table. `awaited`: the event is a clock move, complete once its promise is. */
const EVENTS = {
  'first use/wait': { act: (s: Scene) => s.registry.wait('p') },
  'outcome of the current generation': { act: (s: Scene) => s.driver.ready(s.driver.last('p'), 'b') },
  'outcome of a stale generation': {
    act: (s: Scene) => {
      const run = s.driver.last('p');
      run.handlers.onOutcome(readyOutcome('b'), run.generation - 1);
    },
  },
  'body done': { act: (s: Scene) => s.driver.finish(s.driver.last('p')) },
  'cap fired': { act: (s: Scene) => s.clock.advance(s.timing.readinessCapMs), awaited: true },
  retry: { act: (s: Scene) => s.registry.retry('p') },
  'reload/invalidate': { act: (s: Scene) => s.registry.reload(['p']) },
  'refresh due': { act: (s: Scene) => s.clock.advance(s.timing.retryCooldownMs), awaited: true },
  close: { act: (s: Scene) => s.registry.close() },
} satisfies Record<string, { act(scene: Scene): unknown; awaited?: boolean }>;

type EventName = keyof typeof EVENTS;

/** What a row observes once the event has run. */
interface Observed {
  /** The entry's phase right after the event (barriers of the scene still held). */
  phase: Kind;
  /** Its phase once the scene's barriers are released (the held quiesce returns). */
  then: Kind;
  /** `status()` of the profile (the settlement's view, if it has one). */
  status: string;
  /** Server b as `status()` shows it (a failure with its kind). */
  b: string;
  /** The scene's waiter. */
  waiter: Tracked['state'] | 'none';
  /** Bodies started for the key so far. */
  runs: number;
  /** Reasons of the quiescences the event caused. */
  quiesced: string[];
  /** Whether the event's own promise (a wait, retry, reload, close) has settled. */
  answered: boolean;
}

type Row = Omit<Observed, 'then'> & { then?: Kind };

const IDLE_UNTOUCHED: Row = { phase: 'idle', status: 'degraded', b: 'failed:exited', waiter: 'none', runs: 1, quiesced: [], answered: true };
const RUNNING_UNTOUCHED: Row = { phase: 'running', status: 'pending', b: 'pending', waiter: 'pending', runs: 1, quiesced: [], answered: true };
/** The held retry goes on once its quiesce returns: the second generation runs, the waiter follows it. */
const STARTING_THEN_RUNNING: Row = { phase: 'starting', then: 'running', status: 'pending', b: 'pending', waiter: 'pending', runs: 2, quiesced: [], answered: true };

/** Every (phase, event) pair of the registry. */
const TABLE: Record<Kind, Record<EventName, Row>> = {
  idle: {
    // A settled entry answers at once and starts nothing (its failures are not due yet).
    'first use/wait': IDLE_UNTOUCHED,
    'outcome of the current generation': IDLE_UNTOUCHED,
    'outcome of a stale generation': IDLE_UNTOUCHED,
    'body done': IDLE_UNTOUCHED,
    'cap fired': IDLE_UNTOUCHED,
    // The releasing body is quiesced first; turns keep the last settlement while the retry runs.
    retry: { ...IDLE_UNTOUCHED, phase: 'running', runs: 2, quiesced: ['retry'], answered: false },
    'reload/invalidate': { ...IDLE_UNTOUCHED, phase: 'running', status: 'pending', b: 'pending', runs: 2, quiesced: ['reload'] },
    'refresh due': { ...IDLE_UNTOUCHED, phase: 'running', runs: 2, quiesced: ['cooldown refresh'] },
    close: { ...IDLE_UNTOUCHED, quiesced: ['close'] },
  },
  starting: {
    'first use/wait': { ...STARTING_THEN_RUNNING, answered: false },
    'outcome of the current generation': STARTING_THEN_RUNNING,
    'outcome of a stale generation': STARTING_THEN_RUNNING,
    'body done': STARTING_THEN_RUNNING,
    'cap fired': STARTING_THEN_RUNNING,
    // Queued behind the held retry: it quiesces the generation that retry starts, then starts a third.
    retry: { ...STARTING_THEN_RUNNING, runs: 3, quiesced: ['retry'], answered: false },
    // The reload quiesces the old body itself; the held retry then starts on the reloaded config.
    'reload/invalidate': { ...STARTING_THEN_RUNNING, quiesced: ['reload'] },
    'refresh due': STARTING_THEN_RUNNING,
    // The held retry finds the host closed: the start is abandoned, the waiter gets HOST_CLOSED.
    close: { ...STARTING_THEN_RUNNING, then: 'idle', waiter: 'rejected', runs: 1, quiesced: ['close'] },
  },
  running: {
    'first use/wait': { ...RUNNING_UNTOUCHED, answered: false },
    'outcome of the current generation': { ...RUNNING_UNTOUCHED, phase: 'idle', status: 'degraded', b: 'ready', waiter: 'resolved' },
    'outcome of a stale generation': RUNNING_UNTOUCHED,
    'body done': { ...RUNNING_UNTOUCHED, phase: 'idle', status: 'degraded', b: 'failed:cancelled', waiter: 'resolved' },
    // Settled at once; c's cooldown ran out during the generation, so its refresh starts right away.
    'cap fired': { ...RUNNING_UNTOUCHED, status: 'degraded', b: 'failed:timeout', waiter: 'resolved', runs: 2, quiesced: ['readiness cap'] },
    retry: { ...RUNNING_UNTOUCHED, runs: 2, quiesced: ['retry'], answered: false },
    'reload/invalidate': { ...RUNNING_UNTOUCHED, runs: 2, quiesced: ['reload'] },
    // c is due, but only a settled entry refreshes: no second owner.
    'refresh due': RUNNING_UNTOUCHED,
    // Close changes no phase; the waiter gets HOST_CLOSED and the body is quiesced by the driver's close.
    close: { ...RUNNING_UNTOUCHED, waiter: 'rejected', quiesced: ['close'] },
  },
};

async function observe(t: ExecutionContext, from: Kind, name: EventName): Promise<Observed> {
  const s = await scene(t, from);
  const event: { act(scene: Scene): unknown; awaited?: boolean } = EVENTS[name];
  const result = event.act(s);
  const answer = result instanceof Promise ? track(result) : undefined;
  if (event.awaited) await result;
  await flush();
  const phase = s.registry.phaseOf('p');
  for (const gate of s.gates) gate.resolve();
  await flush();
  t.is(s.driver.maxLiveOwners('p'), 1, 'one live body of the key at a time');
  const view = s.registry.status('p');
  const b = view.servers['b'];
  return {
    phase,
    then: s.registry.phaseOf('p'),
    status: view.status,
    b: b?.status === 'failed' ? `failed:${b.kind}` : String(b?.status),
    waiter: s.waiter?.state ?? 'none',
    runs: s.driver.runsOf('p').length,
    quiesced: s.driver.quiesceCalls.slice(s.quiescesBefore).map((call) => call.reason),
    answered: answer === undefined || answer.state !== 'pending',
  };
}

for (const [from, row] of Object.entries(TABLE) as [Kind, Record<EventName, Row>][]) {
  for (const [name, expected] of Object.entries(row) as [EventName, Row][]) {
    test(`registry: ${from} + ${name} → ${expected.then ?? expected.phase}`, async (t) => {
      const observed = await observe(t, from, name);
      t.deepEqual(observed, { ...expected, then: expected.then ?? expected.phase });
    });
  }
}

// ---------------------------------------------------------------- a reload overtaking a config load

test('a reload while a first use loads its config: the stale load is dropped, the held start discovers the reloaded config, the waiter follows it', async (t) => {
  const driver = new ScriptedDriver();
  const clock = new ManualClock();
  const before = parseProfileConfig({ mcpServers: { a: { command: '/bin/before' } } }, { profile: 'p' });
  const after = parseProfileConfig({ mcpServers: { a: { command: '/bin/after' } } }, { profile: 'p' });
  const firstLoad = barrier();
  let loads = 0;
  const loader = async (): Promise<ProfileConfig> => {
    loads++;
    if (loads > 1) return after;
    await firstLoad.promise;
    return before;
  };
  const registry = new ReadinessRegistry(driver, new FakeSessions(), loader, clock, { readinessCapMs: 10_000, retryCooldownMs: 1000, maxRetryCooldownMs: 600_000 }, new TypedEmitter<ReadinessEvents>());
  t.teardown(() => registry.close());
  const waiter = track(registry.wait('p'));
  await flush();
  t.is(registry.phaseOf('p'), 'starting');
  // The reload invalidates the starting entry; its kick-off finds it starting and starts nothing.
  await registry.reload(['p']);
  firstLoad.resolve();
  await flush();
  // The held start sees the new version and goes round again on the reloaded config.
  const server = registry.configOf('p')?.servers['a'];
  t.is(server?.transport === 'stdio' ? server.command : undefined, '/bin/after', 'the entry keeps the reloaded config');
  t.is(driver.runsOf('p').length, 1, 'the reloaded profile is discovered');
  t.is(waiter.state, 'pending', 'the waiter follows the entry to that discovery');
});

test('a cooldown refresh held while a reload empties the entry becomes the whole first discovery: no server is left pending in the settlement', async (t) => {
  const driver = new ScriptedDriver();
  const clock = new ManualClock();
  const config = parseProfileConfig({ mcpServers: { a: { command: '/bin/a' }, b: { command: '/bin/b' } } }, { profile: 'p' });
  const registry = new ReadinessRegistry(driver, new FakeSessions(), async () => config, clock, { readinessCapMs: 10_000, retryCooldownMs: 1000, maxRetryCooldownMs: 600_000 }, new TypedEmitter<ReadinessEvents>());
  t.teardown(() => registry.close());
  const first = track(registry.wait('p'));
  await flush();
  const run = driver.last('p');
  driver.ready(run, 'a');
  driver.fail(run, 'b');
  // Settled, but the body is still releasing its connections (not finished): the refresh that
  // comes due must quiesce it first, and holds there; a reload of p runs meanwhile.
  await flush();
  t.is(first.state, 'resolved');
  const held = barrier();
  driver.quiesceGate.set('p', held);
  await clock.advance(1000);
  await flush();
  t.deepEqual(driver.quiesceCalls.at(-1), { key: 'p', reason: 'cooldown refresh' });
  const reloading = registry.reload(['p']);
  held.resolve();
  await reloading;
  await flush();
  const after = driver.last('p');
  t.deepEqual(after.servers, ['a', 'b'], 'the held refresh started the whole discovery of the reloaded entry');
  const waiter = track(registry.wait('p'));
  driver.ready(after, 'a');
  driver.fail(after, 'b');
  driver.finish(after);
  await flush();
  t.is(waiter.state, 'resolved');
  t.is(registry.status('p').status, 'degraded');
  t.deepEqual(registry.status('p').pending, [], 'no server left pending');
});
