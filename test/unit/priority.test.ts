/**
 * Discovery's priority logic, as pure logic:
 * - the autogroup writer's queue (`src/process/priority.ts`), with a scripted kernel that accepts
 *   one write per slot (the rate limit unprivileged writers meet) and a manual scheduler;
 * - the starvation watch (`src/discovery/starvation.ts`), with scripted run-queue waits and clock.
 * The real kernel is exercised in test/process/priority.test.ts.
 */
import test from 'ava';
import { MAX_STARVATION_WINDOW_MS, StarvationWatch, starvationWindowMs } from '../../src/discovery/starvation.js';
import { AutogroupWriter, type AutogroupWriteResult, type RetryScheduler } from '../../src/process/priority.js';

/** A kernel that accepts one write per slot; `open()` starts the next slot. */
function scriptedKernel(impossible: ReadonlySet<number> = new Set()) {
  const applied: [number, number][] = [];
  let slotFree = true;
  return {
    applied,
    open: () => (slotFree = true),
    write: (pid: number, nice: number): AutogroupWriteResult => {
      if (impossible.has(pid)) return 'impossible';
      if (!slotFree) return 'rate-limited';
      slotFree = false;
      applied.push([pid, nice]);
      return 'applied';
    },
  };
}

/** A scheduler whose pending retry runs only when the test says so. */
function manualScheduler() {
  const waiting: { callback: () => void; ms: number; cancelled: boolean }[] = [];
  const scheduler: RetryScheduler = {
    schedule(callback, ms) {
      const entry = { callback, ms, cancelled: false };
      waiting.push(entry);
      return { cancel: () => (entry.cancelled = true) };
    },
  };
  return {
    scheduler,
    armed: () => waiting.filter((entry) => !entry.cancelled).length,
    /** Runs the pending retries; returns their delays. */
    fire: (): number[] => {
      const due = waiting.splice(0).filter((entry) => !entry.cancelled);
      for (const entry of due) entry.callback();
      return due.map((entry) => entry.ms);
    },
  };
}

/** A writer over a scripted kernel and a manual scheduler. */
function scriptedWriter(options: { impossible?: ReadonlySet<number>; maxAttempts?: number; retryMs?: number } = {}) {
  const kernel = scriptedKernel(options.impossible);
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler, ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }), ...(options.retryMs === undefined ? {} : { retryMs: options.retryMs }) });
  return { kernel, clock, writer };
}

/** Asks for nice 19 on each pid, in order. */
function lowerAll(writer: AutogroupWriter, pids: readonly number[]): void {
  for (const pid of pids) writer.set(pid, 19);
}

test('a burst refused by the rate limit is written in order, one per slot, at the retry pace', (t) => {
  const { kernel, clock, writer } = scriptedWriter({ retryMs: 110 });
  t.deepEqual([1, 2, 3, 4].map((pid) => writer.set(pid, 19)), ['applied', 'rate-limited', 'rate-limited', 'rate-limited']);
  t.is(clock.armed(), 1, 'one retry is armed for the whole queue');
  for (const expected of [[1, 2], [1, 2, 3], [1, 2, 3, 4]]) {
    kernel.open();
    t.deepEqual(clock.fire(), [110]);
    t.deepEqual(kernel.applied.map(([pid]) => pid), expected);
  }
  t.is(clock.armed(), 0, 'nothing left to retry');
  t.like(writer.stats(), { queued: 0, applied: 4 });
});

test('a retry with no free slot writes nothing and keeps the order', (t) => {
  const { kernel, clock, writer } = scriptedWriter();
  lowerAll(writer, [1, 2, 3]);
  clock.fire(); // the slot is still taken
  t.deepEqual(kernel.applied, [[1, 19]]);
  kernel.open();
  clock.fire();
  t.deepEqual(kernel.applied, [[1, 19], [2, 19]]);
});

test('a forgotten pid is never written (its process exited: the pid may belong to someone else next)', (t) => {
  const { kernel, clock, writer } = scriptedWriter();
  lowerAll(writer, [1, 2, 3]);
  writer.forget(2);
  kernel.open();
  clock.fire();
  kernel.open();
  clock.fire();
  t.deepEqual(kernel.applied, [[1, 19], [3, 19]]);
  writer.set(4, 19);
  writer.forget(4);
  t.is(clock.armed(), 0, 'an empty queue arms no retry');
});

test('the latest value asked for a queued pid is the one written (a restore overtakes the lowering)', (t) => {
  const { kernel, clock, writer } = scriptedWriter();
  writer.set(1, 19);
  t.is(writer.set(2, 19), 'rate-limited');
  t.is(writer.set(2, 0), 'rate-limited');
  kernel.open();
  clock.fire();
  t.deepEqual(kernel.applied, [[1, 19], [2, 0]]);
});

test('a write that cannot succeed is dropped at once; one refused for too long is given up', (t) => {
  const { kernel, clock, writer } = scriptedWriter({ impossible: new Set([7]), maxAttempts: 3 });
  // 8 is refused and queued; 7 waits behind it and is impossible when tried (gone, or no autogroups).
  lowerAll(writer, [1, 8, 7]);
  kernel.open();
  clock.fire(); // 8 takes the slot, 7 is dropped
  t.deepEqual(kernel.applied, [[1, 19], [8, 19]]);
  t.is(writer.stats().queued, 0);
  t.is(writer.set(7, 19), 'impossible');
  writer.set(9, 19); // the slot is taken: refused, attempt 1
  clock.fire(); // attempt 2
  clock.fire(); // attempt 3: given up
  t.like(writer.stats(), { queued: 0, abandoned: 1 });
  t.is(clock.armed(), 0);
});

/** A probe whose clock and run-queue waits the test sets; it records restores. */
function scriptedProbe() {
  const state = { now: 0, waits: new Map<number, number[]>(), restored: [] as number[] };
  const watch = new StarvationWatch({
    waits: (pid) => state.waits.get(pid) ?? [],
    restore: (pid) => void state.restored.push(pid),
    now: () => state.now,
  });
  return { state, watch };
}

test('the starvation window is half the connect timeout, at most 5 s', (t) => {
  t.is(starvationWindowMs(2000), 1000);
  t.is(starvationWindowMs(10_000), 5000);
  t.is(starvationWindowMs(600_000), MAX_STARVATION_WINDOW_MS);
});

test('starved means waiting for a CPU for half of a window; the longest wait of the group counts', (t) => {
  const { state, watch } = scriptedProbe();
  state.now = 1000;
  state.waits.set(10, [100, 499]); // a wrapper that waited little, its child 499 ms of 1000
  t.is(watch.check(10), undefined);
  state.now = 2000;
  state.waits.set(10, [120, 1000]); // 501 ms more in this window
  t.is(watch.check(10), 1000);
  t.deepEqual(state.restored, [10]);
});

test('a wait from an earlier window does not make a later, calm window starved', (t) => {
  const { state, watch } = scriptedProbe();
  state.now = 1000;
  state.waits.set(10, [400]);
  t.is(watch.check(10), undefined, '40 % of the first window');
  state.now = 2000;
  state.waits.set(10, [800]);
  t.is(watch.check(10), undefined, '40 % of the second: 800 ms in total is not 50 % of any window');
  t.deepEqual(state.restored, []);
});

test('a respawned server (a new pid) is judged on its own waits', (t) => {
  const { state, watch } = scriptedProbe();
  state.now = 1000;
  state.waits.set(10, [400]);
  t.is(watch.check(10), undefined);
  // The first process exited (an old server refusing the probe); its successor waited 600 ms of the next window.
  state.now = 2000;
  state.waits.set(11, [600]);
  t.is(watch.check(11), 600);
  t.deepEqual(state.restored, [11]);
});

test('a server whose processes are gone or unreadable is never starved', (t) => {
  const { state, watch } = scriptedProbe();
  state.now = 5000;
  t.is(watch.check(10), undefined);
  t.deepEqual(state.restored, []);
});
