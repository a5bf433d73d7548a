/**
 * The SharedArrayBuffer slots of one readiness entry, shared by the main thread and the discovery
 * body running in a worker. Plain messages can be late, reordered or never sent (a terminated
 * worker sends nothing); these slots are read and written with `Atomics`, so both sides see the
 * same generation, cancel flag, owner count and child pids at every instant — even while the
 * body's thread is stuck in a synchronous loop.
 *
 * Layout (`Int32Array`):
 *   [0] generation      bumped by the main thread only (start, timeout, retry, reload, close)
 *   [1] cancel flag     1 = the current body must stop; the main thread `Atomics.notify`s it
 *   [2] live owners     bodies alive for this entry (incremented/decremented exactly once each)
 *   [3] owner token     generation of the live body, cleared (CAS) by whoever retires it
 *   [4] overlap count   times a body started while another was alive (must stay 0)
 *   [5] owner thread    threadId of the worker running the live body (to wait for its exit)
 *   [6…] child pids     process-group leaders spawned by the body, 0 = free slot
 */

/** Index of the generation counter. */
export const GENERATION = 0;
/** Index of the cancel flag. */
export const CANCEL = 1;
/** Index of the live-owner count. */
export const LIVE_OWNERS = 2;
/** Index of the owner token (generation of the live body). */
export const OWNER_TOKEN = 3;
/** Index of the overlap counter (an invariant violation if ever above 0). */
export const OVERLAPS = 4;
/** Index of the worker threadId of the live body. */
export const OWNER_THREAD = 5;
/** First child-pid slot. */
export const FIRST_PID = 6;
/** How many child pids one body may have alive at once (bounded by `serverConcurrency`). */
export const PID_SLOTS = 64;
/** Length of the Int32Array. */
export const SLOT_COUNT = FIRST_PID + PID_SLOTS;

/** Typed access to one entry's slots; used on both sides of the thread boundary. */
export class EntrySlots {
  readonly view: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(SLOT_COUNT * Int32Array.BYTES_PER_ELEMENT)) {
    this.view = new Int32Array(buffer);
  }

  /** The current generation. */
  generation(): number {
    return Atomics.load(this.view, GENERATION);
  }

  /** True while `generation` is current and not cancelled: the body's check before every side effect. */
  isCurrent(generation: number): boolean {
    return Atomics.load(this.view, GENERATION) === generation && Atomics.load(this.view, CANCEL) === 0;
  }

  /** Main thread: starts a new generation with a clear cancel flag. Returns it. */
  beginGeneration(): number {
    const next = Atomics.add(this.view, GENERATION, 1) + 1;
    Atomics.store(this.view, CANCEL, 0);
    return next;
  }

  /** Main thread: retires the current generation (bump + cancel flag) and wakes the body. */
  retire(): number {
    Atomics.store(this.view, CANCEL, 1);
    const retiredInto = Atomics.add(this.view, GENERATION, 1) + 1;
    Atomics.notify(this.view, CANCEL);
    return retiredInto;
  }

  /** Body: registers itself (and its worker's threadId) as the live owner of `generation`. */
  enterOwner(generation: number, threadId: number): void {
    const before = Atomics.add(this.view, LIVE_OWNERS, 1);
    if (before !== 0) Atomics.add(this.view, OVERLAPS, 1);
    Atomics.store(this.view, OWNER_THREAD, threadId);
    Atomics.store(this.view, OWNER_TOKEN, generation);
  }

  /** The worker threadId of the live body of `generation`, if that body has started. */
  ownerThread(generation: number): number | undefined {
    return Atomics.load(this.view, OWNER_TOKEN) === generation ? Atomics.load(this.view, OWNER_THREAD) : undefined;
  }

  /**
   * Either side: ends the ownership of `generation` exactly once. The body calls it when it
   * finishes; the main thread calls it after a terminated worker has exited. Returns whether this
   * call was the one that ended it.
   */
  leaveOwner(generation: number): boolean {
    if (Atomics.compareExchange(this.view, OWNER_TOKEN, generation, 0) !== generation) return false;
    Atomics.sub(this.view, LIVE_OWNERS, 1);
    return true;
  }

  /** Bodies alive for this entry right now. */
  liveOwners(): number {
    return Atomics.load(this.view, LIVE_OWNERS);
  }

  /** Times a body started while another was alive (an invariant violation if ever above 0). */
  overlaps(): number {
    return Atomics.load(this.view, OVERLAPS);
  }

  /** Body: records a child pid in a free slot. Returns false when every slot is taken. */
  recordPid(pid: number): boolean {
    for (let index = FIRST_PID; index < SLOT_COUNT; index++) {
      if (Atomics.compareExchange(this.view, index, 0, pid) === 0) return true;
    }
    return false;
  }

  /** Either side: clears a recorded pid (reaped, or killed and verified gone). */
  clearPid(pid: number): void {
    for (let index = FIRST_PID; index < SLOT_COUNT; index++) {
      if (Atomics.compareExchange(this.view, index, pid, 0) === pid) return;
    }
  }

  /** Every recorded child pid. */
  pids(): number[] {
    const pids: number[] = [];
    for (let index = FIRST_PID; index < SLOT_COUNT; index++) {
      const pid = Atomics.load(this.view, index);
      if (pid !== 0) pids.push(pid);
    }
    return pids;
  }

  /**
   * Body: resolves when the cancel flag is raised. Uses `Atomics.waitAsync`, so it needs no
   * polling and reacts to the main thread's `notify` within microseconds.
   */
  async waitForCancel(generation: number, isFinished: () => boolean): Promise<void> {
    while (!isFinished() && this.isCurrent(generation)) {
      const waiting = Atomics.waitAsync(this.view, CANCEL, 0);
      if (waiting.async) await waiting.value;
    }
  }

  /** Body: releases its own `waitForCancel` waiter when it finishes (only one body per entry waits). */
  releaseWaiters(): void {
    Atomics.notify(this.view, CANCEL);
  }
}
