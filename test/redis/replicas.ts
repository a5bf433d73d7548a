/**
 * Drives replica processes (`test/programs/redis-replica.ts`) from a test or the bench: spawn
 * with the caller's fixture tag, request/response over stdin/stdout, every event kept with the
 * time this process received it, and bounded waits for events and conditions (never a sleep).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FIXTURE_TAG_ENV } from '../helpers/fixtures.js';
import { procState, waitGone } from '../helpers/processes.js';
import type { ReplicaConfig } from '../programs/redis-replica.js';

export type { ReplicaConfig } from '../programs/redis-replica.js';

const PROGRAM = fileURLToPath(new URL('../programs/redis-replica.js', import.meta.url));

/** An event line of a replica, with when this process received it (`performance.now()`). */
export interface ReplicaEvent {
  readonly event: string;
  readonly receivedAt: number;
  readonly [key: string]: unknown;
}

/** Polls `check` every `intervalMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000, intervalMs = 20): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** One replica process. */
export class Replica {
  readonly id: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Every event so far, oldest first. */
  readonly events: ReplicaEvent[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #stderr = '';
  #nextId = 1;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();

  private constructor(id: string, child: ChildProcess) {
    this.id = id;
    this.child = child;
    this.pid = child.pid!;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    let buffered = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buffered += chunk;
      for (let cut = buffered.indexOf('\n'); cut >= 0; cut = buffered.indexOf('\n')) {
        const line = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 1);
        this.#onLine(line);
      }
    });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.#stderr += chunk;
    });
    child.stdin?.on('error', () => {});
    void this.exited.then(({ code, signal }) => {
      for (const { reject } of this.#pending.values()) reject(new Error(`replica ${id} exited (code ${code}, signal ${signal}); stderr: ${this.#stderr}`));
      this.#pending.clear();
    });
  }

  /** Spawns a replica and waits until it is ready (connected, epoch known, watchdog started). */
  static async start(config: ReplicaConfig, tag: string, readyTimeoutMs = 40_000): Promise<Replica> {
    const child = spawn(process.execPath, [PROGRAM, JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, [FIXTURE_TAG_ENV]: tag },
    });
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    const replica = new Replica(config.replicaId, child);
    let exited = false;
    void replica.exited.then(() => {
      exited = true;
    });
    try {
      await eventually(`replica ${config.replicaId} ready`, () => {
        if (exited) throw new Error(`replica ${config.replicaId} exited before it was ready; stderr: ${replica.stderr()}`);
        return replica.events.some((event) => event.event === 'ready');
      }, readyTimeoutMs, 5);
    } catch (error) {
      await replica.kill();
      throw error;
    }
    return replica;
  }

  /** Sends a command; resolves with its result, rejects with its error or after `timeoutMs`. */
  request<T = unknown>(cmd: string, args: Record<string, unknown> = {}, timeoutMs = 10_000): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`replica ${this.id}: no answer to ${cmd} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value as T);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.child.stdin?.write(`${JSON.stringify({ id, cmd, ...args })}\n`);
    });
  }

  /** Events named `name` (optionally matching `where`). */
  eventsNamed(name: string, where: (event: ReplicaEvent) => boolean = () => true): ReplicaEvent[] {
    return this.events.filter((event) => event.event === name && where(event));
  }

  /** Resolves with the first event named `name` matching `where` (past or future); throws after `timeoutMs`. */
  waitEvent(name: string, where: (event: ReplicaEvent) => boolean = () => true, timeoutMs = 10_000): Promise<ReplicaEvent> {
    return eventually(`event ${name} from replica ${this.id}`, () => this.events.find((event) => event.event === name && where(event)), timeoutMs, 5);
  }

  /** Sends a signal by pid. */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Whether the process is still running. */
  get alive(): boolean {
    return procState(this.pid) === 'alive';
  }

  /**
   * Asks the replica to leave the fleet and waits for the process to end by itself; if it does
   * not within `timeoutMs` (a handle left open), SIGKILLs it and throws.
   */
  async exit(timeoutMs = 10_000): Promise<void> {
    if (!this.alive) return;
    try {
      await this.request('exit', {}, timeoutMs);
      this.child.stdin?.end();
      const ended = await Promise.race([this.exited.then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), timeoutMs))]);
      if (!ended) throw new Error(`replica ${this.id} did not end by itself within ${timeoutMs} ms after exit`);
    } finally {
      await this.kill();
    }
  }

  /** SIGKILLs the process (SIGCONT first, in case it is stopped) and waits until it is gone. */
  async kill(): Promise<void> {
    if (this.alive) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
    await waitGone([this.pid], 5000);
    await this.exited;
  }

  /** Everything the replica wrote to stderr. */
  stderr(): string {
    return this.#stderr;
  }

  #onLine(line: string): void {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (typeof message['event'] === 'string') {
      this.events.push({ ...message, event: message['event'], receivedAt: performance.now() });
      return;
    }
    const pending = this.#pending.get(Number(message['id']));
    if (pending === undefined) return;
    this.#pending.delete(Number(message['id']));
    if (message['ok'] === true) pending.resolve(message['result']);
    else pending.reject(new Error(`replica ${this.id}: ${String(message['error'])}`));
  }
}
