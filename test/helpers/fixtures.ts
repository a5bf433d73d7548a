/**
 * Starting the fixture MCP servers from tests, and the leak guard that proves a test ended
 * every process it started.
 *
 * Every fixture process gets `MCP_FIXTURE_TAG=<tag>` in its environment; its descendants
 * inherit it, so `pidsWithTag(tag)` finds the whole tree, wrapper grandchildren included, even
 * after they were orphaned. `useFixtureTag(t)` hands a test a fresh tag and fails the test if
 * anything carrying it is still alive when the test is over.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ClientOptions } from '@modelcontextprotocol/sdk/client/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { ChildStdioTransport } from './child-transport.js';
import { cmdline, killTree, pidsWithTag, pollUntil, signal, waitGone } from './processes.js';

/** Absolute path of the built stdio fixture (`dist/test/fixtures/stdio-server.js`). */
export const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/stdio-server.js', import.meta.url));
/** Absolute path of the built hostile raw stdio fixture (`dist/test/fixtures/raw-server.js`). */
export const RAW_FIXTURE = fileURLToPath(new URL('../fixtures/raw-server.js', import.meta.url));

/** The `mcpServers` entry that runs the raw (SDK-less, hostile) stdio fixture with `flags`. */
export function rawFixtureConfig(flags: readonly string[] = [], opts: FixtureOptions = {}): StdioServerConfig {
  return scriptConfig(RAW_FIXTURE, flags, opts);
}

/** Absolute path of the built fixture on the v2 server SDK (`dist/test/fixtures/era-server.js`). */
export const ERA_FIXTURE = fileURLToPath(new URL('../fixtures/era-server.js', import.meta.url));

/** The `mcpServers` entry that runs the v2-SDK era fixture over stdio with `flags`. */
export function eraFixtureConfig(flags: readonly string[] = [], opts: FixtureOptions = {}): StdioServerConfig {
  return scriptConfig(ERA_FIXTURE, flags, opts);
}

/** `node <script> …flags` with the fixture tag (and `opts.env`) in its environment. */
function scriptConfig(script: string, flags: readonly string[], opts: FixtureOptions): StdioServerConfig {
  return { command: process.execPath, args: [script, ...flags], env: { ...opts.env, [FIXTURE_TAG_ENV]: opts.tag ?? DEFAULT_FIXTURE_TAG } };
}

/** Absolute path of the built Streamable HTTP fixture (`dist/test/fixtures/http-server.js`). */
export const HTTP_FIXTURE = fileURLToPath(new URL('../fixtures/http-server.js', import.meta.url));
/** The env var that marks fixture processes and their descendants. */
export const FIXTURE_TAG_ENV = 'MCP_FIXTURE_TAG';

let tagCounter = 0;

/** A tag no other test (in this or any other process) uses. */
export function newFixtureTag(label = 'fx'): string {
  return `mcpfx-${label}-${process.pid}-${++tagCounter}-${randomBytes(4).toString('hex')}`;
}

/** Shared tag for fixtures started without one: every fixture of this test process. */
export const DEFAULT_FIXTURE_TAG = `mcpfx-default-${process.pid}`;

/** Options common to the fixture starters. */
export interface FixtureOptions {
  /** Value of `MCP_FIXTURE_TAG`; defaults to {@link DEFAULT_FIXTURE_TAG}. */
  tag?: string;
  /** Extra environment variables (e.g. `MCP_FIXTURE_SIDE_EFFECT_FILE`). */
  env?: Record<string, string>;
}

/** A stdio server entry as users write it under `mcpServers`. */
export interface StdioServerConfig {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * The `mcpServers` entry that runs the stdio fixture with `flags`, for handing to the library
 * under test (or the SDK's `StdioClientTransport`), which then spawns it. `env` holds only the
 * tag and `opts.env`: the spawner adds its own defaults (PATH, HOME, …).
 */
export function stdioFixtureConfig(flags: readonly string[] = [], opts: FixtureOptions = {}): StdioServerConfig {
  return scriptConfig(STDIO_FIXTURE, flags, opts);
}

/** How a fixture process ended. */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Milliseconds from just before `spawn()` to the `exit` event. */
  elapsedMs: number;
}

/** A fixture process spawned by the helpers, in its own process group. */
export interface FixtureProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Process group id (= `pid`: spawned detached, so it leads a new group). */
  readonly pgid: number;
  /** Resolves on the `exit` event (not `close`, which waits for every stdio holder). */
  readonly exited: Promise<ExitInfo>;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Resolves with the stderr text once it matches `pattern`; rejects at `timeoutMs`. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Kills the whole process group (SIGTERM, then SIGKILL) and waits until it is gone. */
  stop(): Promise<void>;
}

/** A stdio fixture spawned by {@link startStdioFixture}. */
export interface StdioFixture extends FixtureProcess {
  /**
   * Connects an SDK `Client` over this process's stdio (initialize included; `request` bounds
   * it, e.g. `{ timeout }`). On failure the transport is closed (stdin ended), the process is
   * left running: `stop()` it.
   */
  connect(options?: ClientOptions, request?: RequestOptions): Promise<Client>;
}

export function spawnFixture(script: string, args: readonly string[], opts: FixtureOptions): Promise<FixtureProcess> {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [script, ...args], {
    // Own process group, like the library spawns servers: kill(-pgid) ends the whole tree
    // without touching the test runner.
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env, [FIXTURE_TAG_ENV]: opts.tag ?? DEFAULT_FIXTURE_TAG },
  });
  // A write to a dead child's stdin raises EPIPE on the stream; unhandled, it would crash the
  // test runner. The exit is observed through `exited` instead.
  child.stdin?.on('error', () => {});
  child.stdout?.on('error', () => {});
  let stderrText = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderrText += chunk;
  });
  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('exit', (code, sig) => resolve({ code, signal: sig, elapsedMs: performance.now() - spawnedAt }));
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('spawn', () => {
      const pid = child.pid;
      if (pid === undefined) return reject(new Error('spawned without a pid'));
      resolve({
        child,
        pid,
        pgid: pid,
        exited,
        stderr: () => stderrText,
        waitForStderr: (pattern, timeoutMs = 10_000) => waitForStderr(child, () => stderrText, pattern, timeoutMs),
        stop: async () => {
          const { survivors } = await killTree(pid);
          if (survivors.length > 0) throw new Error(`fixture group ${pid} survived SIGKILL: ${survivors.join(', ')}`);
          // The group is dead; wait for Node to reap the direct child so `exited` has settled.
          await exited;
        },
      });
    });
  });
}

function waitForStderr(child: ChildProcess, text: () => string, pattern: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!pattern.test(text())) return false;
      cleanup();
      resolve(text());
      return true;
    };
    const onExit = () => {
      // The stderr pipe may still hold the last lines: decide on `close`, not `exit`.
      child.stderr?.once('close', () => {
        if (!check()) {
          cleanup();
          reject(new Error(`fixture exited without writing ${pattern} to stderr; stderr: ${text()}`));
        }
      });
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no ${pattern} on stderr within ${timeoutMs} ms; stderr: ${text()}`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      child.stderr?.off('data', check);
      child.off('exit', onExit);
    };
    if (check()) return;
    child.stderr?.on('data', check);
    child.once('exit', onExit);
  });
}

/**
 * Spawns the stdio fixture directly, detached in its own process group, with stdin/stdout/stderr
 * piped. Resolves once the process has spawned (not once it is ready: use `connect()`).
 */
export async function startStdioFixture(flags: readonly string[] = [], opts: FixtureOptions = {}): Promise<StdioFixture> {
  const proc = await spawnFixture(STDIO_FIXTURE, flags, opts);
  return {
    ...proc,
    connect: async (options, request) => {
      const client = new Client({ name: 'fixture-test', version: '0.0.0' }, options);
      try {
        await client.connect(new ChildStdioTransport(proc.child), request);
      } catch (error) {
        await client.close();
        throw error;
      }
      return client;
    },
  };
}

/** Counters the HTTP fixture reports on `GET /control/stats`. */
export interface HttpFixtureStats {
  /** `initialize` requests received (Streamable HTTP, stateful or stateless, and legacy SSE). */
  initializes: number;
  /** `server/discover` requests received (era probes of 2026-07-28 clients). */
  discovers: number;
  /** `tools/call` requests received, whatever the tool and outcome. */
  toolCalls: number;
  /** Open Streamable HTTP sessions (always 0 with `--stateless`). */
  sessions: number;
  /** Open legacy SSE sessions. */
  sseSessions: number;
  /** GET requests on `/mcp`, whatever the answer. */
  gets: number;
  /** Connections `--drop-in-tool` destroyed instead of answering. */
  dropped: number;
  /**
   * Tool bodies entered, per tool name (absent: never ran), whether or not the answer was
   * delivered. Counted when the body starts.
   */
  executions: Record<string, number>;
  /** DELETEs held unanswered (`hangDelete`). */
  deletesHeld: number;
}

/** A running HTTP fixture. */
export interface HttpFixture extends FixtureProcess {
  /** `http://127.0.0.1:<port>/mcp` (Streamable HTTP). */
  readonly url: string;
  /** `http://127.0.0.1:<port>/sse` (legacy HTTP+SSE). */
  readonly sseUrl: string;
  readonly port: number;
  /** Drops every session; resolves to how many there were. */
  forgetSessions(): Promise<number>;
  /** While true, every MCP request gets 401 with `WWW-Authenticate`. */
  setAuthRequired(required: boolean): Promise<void>;
  /** While true, every MCP POST gets 200 with an HTML sign-in page (an auth proxy in front). */
  setLoginPage(on: boolean): Promise<void>;
  /** While true, DELETE on /mcp is never answered. */
  setHangDelete(on: boolean): Promise<void>;
  /**
   * While on, a call of `tool` is counted in `executions` and then waits, before its body runs,
   * until the hold is turned off: a call seen in `executions` is provably still in flight.
   */
  setHold(tool: string, on: boolean): Promise<void>;
  /** Closes the listener and waits until the process has exited (the port then refuses). */
  stopListening(): Promise<ExitInfo>;
  stats(): Promise<HttpFixtureStats>;
}

/** A fixture that printed its port, and the client of its `/control/*` endpoints. */
export interface ListeningFixture {
  proc: FixtureProcess;
  port: number;
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** Calls `/control/<path>`; a non-2xx answer throws with its status and body. */
  control(path: string, init?: RequestInit): Promise<unknown>;
}

/** Spawns a fixture `script` and resolves once it printed its `{"port","pid"}` line (stopping it if it never does). */
export async function startListeningFixture(script: string, flags: readonly string[], opts: FixtureOptions & { readyTimeoutMs?: number }): Promise<ListeningFixture> {
  const proc = await spawnFixture(script, flags, opts);
  let port: number;
  try {
    port = await readPortLine(proc, opts.readyTimeoutMs ?? 15_000);
  } catch (error) {
    await proc.stop();
    throw error;
  }
  const base = `http://127.0.0.1:${port}`;
  const control = async (path: string, init?: RequestInit): Promise<unknown> => {
    const response = await fetch(`${base}/control/${path}`, init);
    if (!response.ok) throw new Error(`control ${path}: HTTP ${response.status} ${await response.text()}`);
    return response.json();
  };
  return { proc, port, base, control };
}

/**
 * Spawns the HTTP fixture (detached, own group) and resolves once it printed its
 * `{"port","pid"}` line. Its stdin is a pipe from this process and `--exit-with-stdin` is
 * added, so the server exits by itself if the test runner dies without cleaning up.
 */
export async function startHttpFixture(flags: readonly string[] = [], opts: FixtureOptions & { readyTimeoutMs?: number } = {}): Promise<HttpFixture> {
  const { proc, port, base, control } = await startListeningFixture(HTTP_FIXTURE, [...flags, '--exit-with-stdin'], opts);
  const post = (body?: unknown): RequestInit => ({
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? '' : JSON.stringify(body),
  });
  return {
    ...proc,
    url: `${base}/mcp`,
    sseUrl: `${base}/sse`,
    port,
    forgetSessions: async () => ((await control('forget-sessions', post())) as { forgotten: number }).forgotten,
    setAuthRequired: async (required) => {
      await control('auth', post({ required }));
    },
    setLoginPage: async (on) => {
      await control('login-page', post({ on }));
    },
    setHangDelete: async (on) => {
      await control('hang-delete', post({ on }));
    },
    setHold: async (tool, on) => {
      await control('hold', post({ tool, on }));
    },
    stopListening: async () => {
      await control('stop-listening', post());
      return proc.exited;
    },
    stats: async () => (await control('stats')) as HttpFixtureStats,
  };
}

export function readPortLine(proc: FixtureProcess, timeoutMs: number): Promise<number> {
  const stdout = proc.child.stdout;
  if (stdout === null) return Promise.reject(new Error('HTTP fixture without stdout'));
  return new Promise((resolve, reject) => {
    let text = '';
    const done = (error: Error | undefined, port?: number) => {
      clearTimeout(timer);
      stdout.off('data', onData);
      proc.child.off('exit', onExit);
      if (error !== undefined) reject(error);
      else resolve(port ?? 0);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const newline = text.indexOf('\n');
      if (newline < 0) return;
      try {
        const { port } = JSON.parse(text.slice(0, newline)) as { port: number };
        done(undefined, port);
      } catch {
        done(new Error(`HTTP fixture printed ${JSON.stringify(text.slice(0, newline))}, expected {"port","pid"}`));
      }
    };
    const onExit = (code: number | null, sig: NodeJS.Signals | null) =>
      done(new Error(`HTTP fixture exited (code ${code}, signal ${sig}) before listening; stderr: ${proc.stderr()}`));
    const timer = setTimeout(() => done(new Error(`HTTP fixture not listening within ${timeoutMs} ms`)), timeoutMs);
    stdout.on('data', onData);
    proc.child.once('exit', onExit);
  });
}

/**
 * An `http://127.0.0.1:<port>/mcp` URL on which nothing listens: binds an ephemeral port and
 * closes it again. (Another process could grab the port in between; on a test machine that
 * is vanishingly rare.)
 */
export async function refusedUrl(): Promise<string> {
  return `http://127.0.0.1:${await freeLoopbackPort()}/mcp`;
}

/** A 127.0.0.1 port free a moment ago: bound to port 0, read, closed again. */
export async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * Opens a fresh TCP connection to the host and port of `url` (nothing pooled, unlike `fetch`,
 * which may reuse a keep-alive socket the server already closed) and reports whether it was
 * accepted or refused. Other errors reject.
 */
export function probePort(url: string | URL): Promise<'open' | 'refused'> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      resolve('open');
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') resolve('refused');
      else reject(error);
    });
  });
}

/** One tagged process that outlived its test. */
export interface LeakedProcess {
  pid: number;
  cmdline: string;
}

/** What {@link reapTag} found. */
export interface LeakReport {
  /** Processes still alive after the grace period; they have been sent SIGKILL. */
  leaked: LeakedProcess[];
  /** Of those, the ones still alive even after SIGKILL (should never happen). */
  survivors: number[];
}

/**
 * Ends everything carrying `tag`: waits up to `graceMs` for tagged processes to finish exiting
 * by themselves (a test may have just signalled them), SIGKILLs every one still alive — by pid,
 * never by group, since a tagged process may share the test runner's group — and waits until
 * they are gone.
 */
export async function reapTag(tag: string, { graceMs = 300, killWaitMs = 3000 } = {}): Promise<LeakReport> {
  await pollUntil(() => pidsWithTag(tag).length === 0, { timeoutMs: graceMs });
  const pids = pidsWithTag(tag);
  if (pids.length === 0) return { leaked: [], survivors: [] };
  const leaked = pids.map((pid) => ({ pid, cmdline: cmdline(pid) }));
  for (const pid of pids) signal(pid, 'SIGKILL');
  const survivors = await waitGone(pids, killWaitMs);
  // Anything the leaked processes spawned after the scan carries the tag too.
  const late = pidsWithTag(tag);
  for (const pid of late) signal(pid, 'SIGKILL');
  survivors.push(...(await waitGone(late, killWaitMs)));
  leaked.push(...late.map((pid) => ({ pid, cmdline: cmdline(pid) })));
  return { leaked, survivors };
}

/**
 * The leak guard. Returns a fresh tag for the test's fixtures and registers a teardown that
 * reaps the tag and fails the test if any tagged process was still alive once the test (and
 * the teardowns registered after this call, which run first) finished.
 *
 * Call it first in the test, so the test's own cleanup teardowns run before the check.
 * (Only `t.teardown` is used: the guard's own test drives it with a recording stand-in.)
 */
export function useFixtureTag(t: Pick<ExecutionContext, 'teardown'>, label = 'fx'): string {
  const tag = newFixtureTag(label);
  t.teardown(async () => {
    const { leaked, survivors } = await reapTag(tag);
    if (leaked.length === 0) return;
    const list = leaked.map(({ pid, cmdline: cmd }) => `  pid ${pid}: ${cmd || '(no cmdline)'}`).join('\n');
    const unkillable = survivors.length > 0 ? ` ${survivors.length} survived SIGKILL: ${survivors.join(', ')}.` : '';
    throw new Error(`leak guard: ${leaked.length} process(es) tagged ${tag} outlived the test and had to be killed:\n${list}${unkillable}`);
  });
  return tag;
}
