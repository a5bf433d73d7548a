/**
 * Shared helpers of the session-layer tests: a host over real fixture processes, a per-start
 * plan for stdio servers (different flags per start, a start held at a barrier), and small
 * awaitable conditions on host events and supervisor stats.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createHost } from '../../src/host.js';
import type { Host, HostEvents, HostOptions } from '../../src/host.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import type { McpSupervisorError } from '../../src/errors.js';
import { ServerSupervisor } from '../../src/sessions/supervisor.js';
import type { SessionOptions, SupervisorEvents, SupervisorStats } from '../../src/sessions/supervisor.js';
import type { Clock } from '../../src/clock.js';
import { parseProfileConfig } from '../../src/config/parse.js';
import { TypedEmitter } from '../../src/events.js';
import { DEFAULT_CLIENT_INFO } from '../../src/client/info.js';
import type { ToolRoute } from '../../src/readiness/settlement.js';
import type { CallOptions } from '../../src/readiness/types.js';
import { FIXTURE_TAG_ENV, STDIO_FIXTURE } from '../helpers/fixtures.js';
import type { ManualClock } from '../helpers/clock.js';
import { pollUntil } from '../helpers/processes.js';

/** A private temporary directory, removed when the test ends. */
export async function tempDir(t: ExecutionContext, label = 'sess'): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `mcp-supervisor-${label}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Start-by-start control of a stdio fixture: a tiny `/bin/sh` launcher counts starts in a file,
 * waits while `hold-<n>` exists (a barrier between processes: the client's `initialize` waits in
 * the pipe), then `exec`s the fixture with the flags of `flags-<n>` or `flags-default`. After
 * the `exec` the fixture is the group leader's own process, exactly as if spawned directly.
 */
export class StartPlan {
  private constructor(readonly dir: string, readonly tag: string, private readonly env: Record<string, string>) {}

  static async create(t: ExecutionContext, tag: string, defaultFlags: readonly string[] = [], env: Record<string, string> = {}): Promise<StartPlan> {
    const plan = new StartPlan(await tempDir(t, 'plan'), tag, env);
    plan.set('default', defaultFlags);
    return plan;
  }

  /** The `mcpServers` entry. */
  config(): { command: string; args: string[]; env: Record<string, string> } {
    const script = [
      'd="$MCP_PLAN_DIR"',
      'n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))',
      'echo "$n" > "$d/count"',
      'while [ -e "$d/hold-$n" ]; do sleep 0.02; done',
      'f="$d/flags-$n"; [ -f "$f" ] || f="$d/flags-default"',
      'exec "$@" $(cat "$f")',
    ].join('\n');
    return {
      command: '/bin/sh',
      args: ['-c', script, 'plan', process.execPath, STDIO_FIXTURE],
      env: { ...this.env, MCP_PLAN_DIR: this.dir, [FIXTURE_TAG_ENV]: this.tag },
    };
  }

  /** Flags of start `n` (1-based), or of every start without its own. */
  set(start: number | 'default', flags: readonly string[]): void {
    writeFileSync(path.join(this.dir, `flags-${start}`), `${flags.join(' ')}\n`);
  }

  /** Start `n` waits (before the fixture loads) until {@link release}. */
  hold(start: number): void {
    writeFileSync(path.join(this.dir, `hold-${start}`), '');
  }

  release(start: number): void {
    rmSync(path.join(this.dir, `hold-${start}`), { force: true });
  }

  /** Starts so far. */
  starts(): number {
    const file = path.join(this.dir, 'count');
    return existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || 0 : 0;
  }

  /** Resolves once start `n` has begun (it counted itself). */
  async waitForStart(n: number, timeoutMs = 10_000): Promise<void> {
    if (!(await pollUntil(() => this.starts() >= n, { timeoutMs }))) throw new Error(`start ${n} never began (starts: ${this.starts()})`);
  }
}

/** Lines of a side-effect file (`increment` appends one per execution). */
export function sideEffects(file: string): string[] {
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

/** A host over `mcpServers` as profile `default`, closed when the test ends. */
export function newHost(t: ExecutionContext, mcpServers: Record<string, unknown>, options: Omit<HostOptions, 'profiles'> = {}): Host {
  const host = createHost({
    ...options,
    profiles: { default: { mcpServers } },
    discovery: { maxThreads: 1, connectTimeoutMs: 20_000, ...options.discovery },
  });
  t.teardown(() => host.close());
  return host;
}

/** One server's supervisor stats. */
export function sessionStats(host: Host, server: string): SupervisorStats {
  const stats = host.stats().sessions.find((entry) => entry.server === server);
  if (!stats) throw new Error(`no session supervisor for "${server}"`);
  return stats;
}

/** Resolves with the payload of the next `event` matching `filter`. */
export function nextEvent<Name extends keyof HostEvents>(host: Host, event: Name, filter: (payload: HostEvents[Name]) => boolean = () => true): Promise<HostEvents[Name]> {
  return new Promise((resolve) => {
    const off = host.on(event, (payload) => {
      if (!filter(payload)) return;
      off();
      resolve(payload);
    });
  });
}

/** Counts every emission of `event`. */
export function countEvents(host: Host, event: keyof HostEvents): () => number {
  let count = 0;
  host.on(event, () => count++);
  return () => count;
}

/** Awaits a call that must fail with an McpSupervisorError of `code`. */
export async function callError(t: ExecutionContext, call: Promise<unknown>, code: McpSupervisorError['code']): Promise<McpSupervisorError> {
  const error = await t.throwsAsync(call);
  if (!isMcpSupervisorError(error)) throw new Error(`expected McpSupervisorError ${code}, got ${String(error)}`);
  t.is(error.code, code, error.message);
  return error;
}

/** The text of a result's first content block. */
export function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

/** `structuredContent` of a result. */
export function structured<T>(result: CallToolResult): T {
  return result.structuredContent as T;
}

/** Session options for a supervisor built directly (tests of breaker and park timing). */
export const DIRECT_DEFAULTS: SessionOptions = {
  respawnWaitMs: 15_000,
  reconnectBudget: 100,
  backoffBaseMs: 1000,
  backoffMaxMs: 8000,
  parkProbeIntervalMs: 60_000,
  replay: 'idempotent',
  maxConcurrentCalls: 8,
  callTimeoutMs: 60_000,
  connectTimeoutMs: 20_000,
  eager: false,
  countToolErrors: false,
  listChangedDebounceMs: 0,
  breaker: { failureThreshold: 3, cooldownMs: 30_000 },
};

/** A supervisor over one server (named `fx`), without discovery, closed when the test ends. */
export interface Direct {
  supervisor: ServerSupervisor;
  events: TypedEmitter<SupervisorEvents>;
  /** Calls `tool` (hints as the fixture declares them). */
  call(tool: string, args?: Record<string, unknown>, options?: CallOptions): Promise<CallToolResult>;
  /** Resolves with the next `event`. */
  next<Name extends keyof SupervisorEvents>(event: Name): Promise<SupervisorEvents[Name]>;
}

const HINTS: Record<string, ToolRoute['annotations']> = {
  echo: { readOnlyHint: true },
  calls: { readOnlyHint: true },
  pid: { readOnlyHint: true },
  slow_read: { readOnlyHint: true },
  add: { idempotentHint: true },
};

export function directSupervisor(t: ExecutionContext, entry: unknown, clock: Clock, options: Partial<SessionOptions> = {}): Direct {
  const server = parseProfileConfig({ mcpServers: { fx: entry } }, { profile: 'direct' }).servers['fx'];
  if (!server) throw new Error('no server');
  const events = new TypedEmitter<SupervisorEvents>();
  const supervisor = new ServerSupervisor(server, {
    clock,
    options: { ...DIRECT_DEFAULTS, ...options },
    random: () => 0.5,
    profiles: () => ['direct'],
    emit: (event, payload) => events.emit(event, payload),
    exclusionChanged: () => undefined,
    listsChanged: () => undefined,
    side: () => ({ info: DEFAULT_CLIENT_INFO, capabilities: {} }),
  });
  t.teardown(() => supervisor.close());
  return {
    supervisor,
    events,
    call: (tool, args = {}, callOptions = {}) => {
      const annotations = HINTS[tool];
      return supervisor.call({ server: 'fx', tool, ...(annotations ? { annotations } : {}) }, args, callOptions);
    },
    next: (event) =>
      new Promise((resolve) => {
        const off = events.on(event, (payload) => {
          off();
          resolve(payload);
        });
      }),
  };
}

export { guardOpenHandles } from '../helpers/processes.js';

/**
 * Advances a manual clock by `ms`, one due timer at a time, waiting after each until `settled()`
 * holds (e.g. no connect attempt in progress), so the real work a timer starts finishes before
 * the next timer fires: the interleaving of injected time and real processes is fixed.
 */
export async function advanceSettled(clock: ManualClock, ms: number, settled: () => boolean): Promise<void> {
  const target = clock.now() + ms;
  const wait = async (): Promise<void> => {
    if (!(await pollUntil(settled, { timeoutMs: 10_000 }))) throw new Error('never settled');
  };
  await wait();
  for (let next = clock.nextAt(); next !== undefined && next <= target; next = clock.nextAt()) {
    await clock.advance(next - clock.now());
    await wait();
  }
  await clock.advance(target - clock.now());
  await wait();
}

/** Polls an async check every 10 ms until it holds or `timeoutMs` passed; resolves to whether it held. */
export async function pollUntilAsync(check: () => Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (performance.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
