/**
 * The quiescence ladder on a manual clock: each rung gives up exactly when the clock says, and not
 * a moment before. No worker and no process: the body is a promise the test settles, and the kill
 * rung's processes are a stand-in that dies when the test says.
 */
import test, { type ExecutionContext } from 'ava';
import { EventEmitter } from 'node:events';
import { MessageChannel, type Worker } from 'node:worker_threads';
import type { ProcessState } from '../../src/process/proc.js';
import { type Entry, type Owner, type ProcessControl, QuiesceHistory, QuiescenceLadder } from '../../src/discovery/quiesce.js';
import { EntrySlots } from '../../src/discovery/slots.js';
import type { BodyResult } from '../../src/discovery/types.js';
import { ManualClock, barrier, flush } from '../helpers/clock.js';

const GRACE_MS = 250;
const HARD_WAIT_MS = 2000;

/** An entry whose body has started (it owns the key) and runs until `finish` is called. */
function runningEntry(t: ExecutionContext): { entry: Entry; owner: Owner; finish(): void; end(): void } {
  const slots = new EntrySlots();
  const generation = slots.beginGeneration();
  slots.enterOwner(generation, 1);
  const done = barrier<BodyResult | undefined>();
  const channel = new MessageChannel();
  t.teardown(() => channel.port2.close());
  const owner: Owner = { generation, abort: new AbortController(), task: done.promise, taskSettled: false, port: channel.port1 };
  void done.promise.then(() => (owner.taskSettled = true));
  return {
    entry: { slots, owner, zombies: new Set() },
    owner,
    finish: () => {
      // A body that returns leaves its ownership itself.
      slots.leaveOwner(generation);
      done.resolve({ generation, cancelled: true });
    },
    // A terminated worker's task settles with nothing, and its body leaves nothing.
    end: () => done.resolve(undefined),
  };
}

function ladderOn(clock: ManualClock, processes?: ProcessControl): QuiescenceLadder {
  return new QuiescenceLadder({ clock, graceMs: GRACE_MS, hardWaitMs: HARD_WAIT_MS, workerOf: () => undefined, ...(processes ? { processes } : {}) });
}

/** Tracks whether a promise has settled yet. */
function watch<T>(promise: Promise<T>): { readonly settled: boolean; promise: Promise<T> } {
  let settled = false;
  void promise.finally(() => (settled = true));
  return {
    promise,
    get settled() {
      return settled;
    },
  };
}

/** Retires a running body on a fresh manual clock; with `endsOnAbort`, its worker ends once terminated. */
function retireRunning(t: ExecutionContext, endsOnAbort: boolean) {
  const clock = new ManualClock();
  const running = runningEntry(t);
  // Piscina ends the worker on the abort, and then its task settles.
  if (endsOnAbort) running.owner.abort.signal.addEventListener('abort', running.end);
  return { clock, ...running, retiring: watch(ladderOn(clock).retire('k', 'timeout', running.entry)) };
}

test('cooperative rung: a body that returns within the grace is never terminated, and no timer is left behind', async (t) => {
  const { clock, entry, owner, finish, retiring } = retireRunning(t, false);
  t.false(entry.slots.isCurrent(owner.generation), 'retired before the first await');
  await clock.advance(GRACE_MS - 1);
  t.false(retiring.settled);
  finish();
  t.like(await retiring.promise, { rung: 'cooperative', quiesced: true });
  t.false(owner.abort.signal.aborted);
  t.is(clock.pending(), 0, 'the grace timer was cleared');
  t.is(entry.owner, undefined, 'a settled owner is forgotten');
});

test('terminate rung: the task is aborted exactly when the clock passes the grace; ownership is left for the terminated body', async (t) => {
  const { clock, entry, owner, retiring } = retireRunning(t, true);
  await clock.advance(GRACE_MS - 1);
  t.false(owner.abort.signal.aborted, 'not a millisecond early');
  await clock.advance(1);
  t.true(owner.abort.signal.aborted);
  t.like(await retiring.promise, { rung: 'terminate', quiesced: true });
  t.is(entry.slots.liveOwners(), 0, 'the ladder left the ownership the dead body could not');
});

test('terminate rung: a worker that never exits is given up on after the hard wait, on the clock', async (t) => {
  const { clock, entry, retiring } = retireRunning(t, false);
  await clock.advance(GRACE_MS + HARD_WAIT_MS - 1);
  t.false(retiring.settled);
  await clock.advance(1);
  t.like(await retiring.promise, { rung: 'terminate', quiesced: false });
  t.is(entry.slots.liveOwners(), 1, 'a body that may still run keeps its ownership');
});

/**
 * A body that takes ownership only after the terminate rung looked for its thread: its generation
 * check passed before the retirement and its thread was kept off the CPU until after the look.
 * It enters in the worker the abort terminates (thread 7), and the task then settles.
 */
function lateEntry(t: ExecutionContext, worker: Worker | undefined) {
  const clock = new ManualClock();
  const slots = new EntrySlots();
  const generation = slots.beginGeneration();
  const done = barrier<BodyResult | undefined>();
  const channel = new MessageChannel();
  t.teardown(() => channel.port2.close());
  const owner: Owner = { generation, abort: new AbortController(), task: done.promise, taskSettled: false, port: channel.port1 };
  void done.promise.then(() => (owner.taskSettled = true));
  owner.abort.signal.addEventListener('abort', () => {
    slots.enterOwner(generation, 7);
    done.resolve(undefined);
  });
  const ladder = new QuiescenceLadder({ clock, graceMs: GRACE_MS, hardWaitMs: HARD_WAIT_MS, workerOf: (threadId) => (threadId === 7 ? worker : undefined) });
  const entry: Entry = { slots, owner, zombies: new Set() };
  return { clock, entry, retiring: watch(ladder.retire('k', 'reload', entry)) };
}

/** A stand-in for the terminated worker: alive until the test emits its exit. */
function dyingWorker(): Worker & EventEmitter {
  return Object.assign(new EventEmitter(), { threadId: 7 }) as unknown as Worker & EventEmitter;
}

test('terminate rung: a body that took ownership after the look is left for once the pool no longer lists its worker', async (t) => {
  const { clock, entry, retiring } = lateEntry(t, undefined);
  await clock.advance(GRACE_MS);
  t.like(await retiring.promise, { rung: 'terminate', quiesced: true });
  t.is(entry.slots.liveOwners(), 0, 'no ownership is left behind by a dead body');
});

test('terminate rung: a body that took ownership after the look is left for once its worker exits, not before; one that never exits keeps it', async (t) => {
  const worker = dyingWorker();
  const exits = lateEntry(t, worker);
  await exits.clock.advance(GRACE_MS);
  await flush();
  t.false(exits.retiring.settled, 'waits for the late owner\'s worker');
  t.is(exits.entry.slots.liveOwners(), 1);
  worker.emit('exit', 1);
  t.like(await exits.retiring.promise, { rung: 'terminate', quiesced: true });
  t.is(exits.entry.slots.liveOwners(), 0);

  const stuck = lateEntry(t, dyingWorker());
  await stuck.clock.advance(GRACE_MS + HARD_WAIT_MS - 1);
  t.false(stuck.retiring.settled);
  await stuck.clock.advance(1);
  t.like(await stuck.retiring.promise, { rung: 'terminate', quiesced: false });
  t.is(stuck.entry.slots.liveOwners(), 1, 'a body that may still run keeps its ownership');
});

test('kill rung: the poll runs on the clock; a group that dies is cleared (a zombie reported as such), one that never dies is a survivor', async (t) => {
  const clock = new ManualClock();
  const kills = new Map<number, number>();
  const processes: ProcessControl = {
    kill: (pid) => void kills.set(pid, (kills.get(pid) ?? 0) + 1),
    // 1001 goes after its third SIGKILL; 1002 never does.
    running: (pid) => pid === 1002 || (kills.get(pid) ?? 0) < 3,
    state: (pid): ProcessState => (pid === 1001 && (kills.get(pid) ?? 0) >= 3 ? 'zombie' : 'alive'),
    marked: () => [],
  };
  const entry: Entry = { slots: new EntrySlots(), owner: undefined, zombies: new Set() };
  entry.slots.beginGeneration();
  entry.slots.recordPid(1001);
  entry.slots.recordPid(1002);
  const retiring = watch(ladderOn(clock, processes).retire('k', 'close', entry));
  await flush();
  t.deepEqual([...kills], [[1001, 1], [1002, 1]], 'one SIGKILL each, then a poll is scheduled');
  await clock.advance(5);
  t.deepEqual([...kills], [[1001, 2], [1002, 2]], 'one poll per 5 ms of the clock');
  await clock.advance(5);
  t.is(kills.get(1001), 3);
  await clock.advance(HARD_WAIT_MS - 11);
  t.false(retiring.settled, 'still polling for the survivor');
  await clock.advance(1);
  const report = await retiring.promise;
  t.is(report.rung, 'kill');
  t.deepEqual(report.zombies, [1001]);
  t.deepEqual(report.survivors, [1002]);
  t.false(report.quiesced);
  t.deepEqual(entry.slots.pids(), [1002], 'only the dead one is cleared');
  t.deepEqual([...entry.zombies], [1001]);
});

test('a process spawned but never recorded (worker terminated in between) is found by the body\'s marker and killed; a body that returned is never scanned', async (t) => {
  const MARKER = 'MCP_SUPERVISOR_DISCOVERY=test.1';
  const scans: string[] = [];
  const killed = new Set<number>();
  const processes: ProcessControl = {
    kill: (pid) => void killed.add(pid),
    running: (pid) => !killed.has(pid),
    state: (pid): ProcessState => (killed.has(pid) ? 'zombie' : 'alive'),
    marked: (entry) => {
      scans.push(entry);
      // 3001 was recorded before the worker stopped; 3002 was spawned and never recorded.
      return entry === MARKER ? [3001, 3002] : [];
    },
  };
  for (const outcome of ['terminated', 'returned'] as const) {
    const clock = new ManualClock();
    const running = runningEntry(t);
    running.owner.marker = MARKER;
    running.entry.slots.recordPid(3001);
    if (outcome === 'terminated') running.owner.abort.signal.addEventListener('abort', running.end);
    const retiring = watch(new QuiescenceLadder({ clock, graceMs: GRACE_MS, hardWaitMs: HARD_WAIT_MS, workerOf: () => undefined, processes }).retire('k', 'reload', running.entry));
    if (outcome === 'returned') {
      // A body that returns killed and reaped what it spawned: its slot is empty by then.
      running.entry.slots.clearPid(3001);
      running.finish();
    } else await clock.advance(GRACE_MS);
    const report = await retiring.promise;
    if (outcome === 'terminated') {
      t.is(report.rung, 'kill');
      t.deepEqual(report.zombies.sort(), [3001, 3002], 'the recorded and the unrecorded process were both killed');
      t.true(report.quiesced);
      t.deepEqual(scans, [MARKER], 'one scan, for this body\'s marker');
    } else {
      t.is(report.rung, 'cooperative');
      t.deepEqual(scans, [MARKER], 'no scan after a body that returned');
    }
  }
});

test('an unknown key is an idle report; the history counts by rung and keeps cooperative totals', (t) => {
  const clock = new ManualClock();
  return ladderOn(clock)
    .retire('nobody', 'close', undefined)
    .then((idle) => {
      t.like(idle, { rung: 'idle', quiesced: true, generation: undefined, totalMs: 0 });
      const history = new QuiesceHistory();
      history.record({ ...idle, rung: 'cooperative', totalMs: 3 });
      history.record({ ...idle, rung: 'kill', terminateMs: 7, killMs: 2, totalMs: 12 });
      const snapshot = history.snapshot();
      t.deepEqual(snapshot, { total: 2, byRung: { idle: 0, cooperative: 1, terminate: 0, kill: 1 }, cooperativeMs: [3], terminateMs: [7], killMs: [2] });
      snapshot.cooperativeMs.push(99);
      t.deepEqual(history.snapshot().cooperativeMs, [3], 'a snapshot is a copy');
    });
});
