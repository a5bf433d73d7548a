/**
 * The autogroup writer's queue (`src/process/priority.ts`), as pure logic: a scripted kernel that
 * accepts one write per slot (the rate limit unprivileged writers meet) and a manual scheduler.
 * The real kernel's limit is exercised in test/process/priority.test.ts.
 */
import test from 'ava';
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

test('a burst refused by the rate limit is written in order, one per slot, at the retry pace', (t) => {
  const kernel = scriptedKernel();
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler, retryMs: 110 });
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
  const kernel = scriptedKernel();
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler });
  writer.set(1, 19);
  writer.set(2, 19);
  writer.set(3, 19);
  clock.fire(); // the slot is still taken
  t.deepEqual(kernel.applied, [[1, 19]]);
  kernel.open();
  clock.fire();
  t.deepEqual(kernel.applied, [[1, 19], [2, 19]]);
});

test('a forgotten pid is never written (its process exited: the pid may belong to someone else next)', (t) => {
  const kernel = scriptedKernel();
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler });
  writer.set(1, 19);
  writer.set(2, 19);
  writer.set(3, 19);
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
  const kernel = scriptedKernel();
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler });
  writer.set(1, 19);
  t.is(writer.set(2, 19), 'rate-limited');
  t.is(writer.set(2, 0), 'rate-limited');
  kernel.open();
  clock.fire();
  t.deepEqual(kernel.applied, [[1, 19], [2, 0]]);
});

test('a write that cannot succeed is dropped at once; one refused for too long is given up', (t) => {
  const kernel = scriptedKernel(new Set([7]));
  const clock = manualScheduler();
  const writer = new AutogroupWriter({ write: kernel.write, scheduler: clock.scheduler, maxAttempts: 3 });
  writer.set(1, 19);
  writer.set(8, 19); // refused: queued
  writer.set(7, 19); // queued behind 8; impossible when tried (gone, or no autogroups)
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
