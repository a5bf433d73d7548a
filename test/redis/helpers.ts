/**
 * Shared pieces of the in-process Redis tests: a manual clock with timers (to freeze a
 * coordinator, as if its process were paused, while Redis's clock runs on), a raw node-redis
 * client to look at what the fleet stored, and fleet-unique prefixes.
 */
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import type { Clock, TimerHandle } from '../../src/clock.js';

/** A clock whose time and timers move only when the test says so. */
export class ManualTimers implements Clock {
  #now: number;
  #next = 1;
  readonly #timers = new Map<number, { at: number; callback: () => void }>();

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const id = this.#next++;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), callback });
    return { id };
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) this.#timers.delete((handle as { id: number }).id);
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      const due = [...this.#timers.entries()].filter(([, timer]) => timer.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) break;
      this.#timers.delete(due[0]);
      this.#now = Math.max(this.#now, due[1].at);
      due[1].callback();
    }
    this.#now = until;
  }
}

/** A prefix no other test uses. */
export function uniquePrefix(label: string): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

/** A plain node-redis client for inspecting (or sabotaging) what the fleet stored. Close it. */
export async function rawClient(url: string) {
  const client = createClient({ url });
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** Resolves once the microtask queue and pending I/O callbacks of this turn have run. */
export function tick(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
