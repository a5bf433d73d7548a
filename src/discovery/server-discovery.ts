/**
 * Discovery of one server: connect, `initialize`, list every page of tools (and prompts and
 * resources when offered), then let go of the connection. Runs inside a discovery body (a worker
 * thread); it owns the server's process or HTTP transport for the duration of the attempt.
 *
 * One deadline (`connectTimeoutMs`) covers the whole attempt, and it *cancels*: the transport is
 * closed and the stdio process group killed, so a timed-out attempt leaves nothing behind. The
 * caller's `signal` (retirement of the generation) does the same.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ListPromptsResultSchema,
  ListResourcesResultSchema,
  ListToolsResultSchema,
  type Prompt,
  type Resource,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { HttpServerConfig, ServerConfig } from '../config/types.js';
import { ProcessGroupStdioTransport } from '../process/stdio-transport.js';
import { classifyFailure } from './classify.js';
import type { SettledOutcome } from './types.js';

/** The client identity servers see during discovery. */
export const CLIENT_INFO = { name: 'mcp-supervisor', version: '0.1.0' } as const;

/** Where the attempt runs: its deadline, cancellation and pid bookkeeping. */
export interface ServerDiscoveryContext {
  connectTimeoutMs: number;
  /** Aborted when the generation is retired. */
  signal: AbortSignal;
  /** Re-checked before every side effect (spawn, connect). */
  isCurrent(): boolean;
  /** Records a spawned group leader; false means no slot: the child is killed at once. */
  recordPid(pid: number): boolean;
  /** Forgets a reaped leader. */
  clearPid(pid: number): void;
  /** Called after a spawn was recorded (test hook point). */
  afterSpawn?(pid: number): void;
  /**
   * Hands over a successful connection for release in the background: `close` is the graceful
   * ladder, `kill` the immediate teardown used if the generation is retired meanwhile.
   */
  adoptForClose(release: { close(): Promise<void>; kill(): Promise<void> }): void;
}

/** Safety cap on pagination, against a server that keeps returning cursors. */
const MAX_PAGES = 1000;

type Page<T> = { items: T[]; nextCursor?: string | undefined };

/** Collects every page of a paginated MCP list. */
export async function listAllPages<T>(what: string, fetchPage: (cursor: string | undefined) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await fetchPage(cursor);
    items.push(...result.items);
    if (result.nextCursor === undefined || result.nextCursor === '') return items;
    if (seen.has(result.nextCursor)) throw new Error(`${what} pagination repeated cursor ${JSON.stringify(result.nextCursor)}`);
    seen.add(result.nextCursor);
    cursor = result.nextCursor;
  }
  throw new Error(`${what} returned more than ${MAX_PAGES} pages`);
}

function httpTransport(server: HttpServerConfig): Transport {
  const requestInit: RequestInit = { headers: { ...server.headers } };
  const url = new URL(server.url);
  return server.transport === 'sse' ? new SSEClientTransport(url, { requestInit }) : new StreamableHTTPClientTransport(url, { requestInit });
}

function createTransport(server: ServerConfig, context: ServerDiscoveryContext): Transport {
  if (server.transport !== 'stdio') return httpTransport(server);
  return new ProcessGroupStdioTransport(
    { command: server.command, args: server.args, env: server.env, ...(server.cwd === undefined ? {} : { cwd: server.cwd }) },
    {
      onSpawn: (pid) => {
        if (!context.recordPid(pid)) {
          process.kill(-pid, 'SIGKILL');
          return;
        }
        context.afterSpawn?.(pid);
      },
      onExit: (pid) => context.clearPid(pid),
    },
  );
}

/** Waits a little for a stdio child's exit so a death racing the error is classified as `exited`. */
async function settleExit(transport: Transport): Promise<void> {
  if (!(transport instanceof ProcessGroupStdioTransport) || transport.exit || transport.pid === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([transport.exited(), new Promise<void>((resolve) => (timer = setTimeout(resolve, 150)))]);
  clearTimeout(timer);
}

/** Kills (stdio) or closes (HTTP) a transport after a failed or cancelled attempt. */
async function abandon(transport: Transport): Promise<void> {
  if (transport instanceof ProcessGroupStdioTransport) await transport.kill();
  else await transport.close().catch(() => undefined);
}

/**
 * Discovers one server. Never throws: every failure becomes a `failed` outcome with its kind.
 * On success the connection is released in the background (stdio: close ladder; HTTP: the session
 * is left open for the main thread to resume) through `adoptForClose`.
 */
export async function discoverServer(server: ServerConfig, context: ServerDiscoveryContext): Promise<SettledOutcome> {
  const startedAt = performance.now();
  const elapsed = (): number => Math.round((performance.now() - startedAt) * 100) / 100;
  const name = server.name;
  if (!context.isCurrent()) {
    return { status: 'failed', server: name, failure: { kind: 'cancelled', message: 'discovery was cancelled before the server was started' }, timings: { totalMs: 0 } };
  }
  const connectTimeoutMs = server.connectTimeoutMs ?? context.connectTimeoutMs;
  const attempt = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    attempt.abort(new Error(`connect timeout of ${connectTimeoutMs} ms`));
  }, connectTimeoutMs);
  const onRetired = (): void => attempt.abort(new Error('generation retired'));
  context.signal.addEventListener('abort', onRetired, { once: true });

  const transport = createTransport(server, context);
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  // The SDK reports transport-level noise (EPIPE after a death, SSE reconnects) here; the
  // outcome is decided by the request results and the exit status instead.
  client.onerror = () => undefined;
  const requestOptions = { signal: attempt.signal, timeout: connectTimeoutMs + 60_000, maxTotalTimeout: connectTimeoutMs + 60_000 };
  let connectMs: number | undefined;
  try {
    await client.connect(transport, requestOptions);
    connectMs = elapsed();
    const capabilities = client.getServerCapabilities() ?? {};
    const tools = await listAllPages<Tool>('tools/list', async (cursor) => {
      const result = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, requestOptions);
      return { items: result.tools, nextCursor: result.nextCursor };
    });
    // Prompts and resources are optional extras: a server whose tools work is not failed because
    // its prompt or resource listing is broken.
    const prompts = capabilities.prompts
      ? await listAllPages<Prompt>('prompts/list', async (cursor) => {
          const result = await client.request({ method: 'prompts/list', params: cursor === undefined ? {} : { cursor } }, ListPromptsResultSchema, requestOptions);
          return { items: result.prompts, nextCursor: result.nextCursor };
        }).catch((error: unknown) => (attempt.signal.aborted ? Promise.reject(error) : []))
      : [];
    const resources = capabilities.resources
      ? await listAllPages<Resource>('resources/list', async (cursor) => {
          const result = await client.request({ method: 'resources/list', params: cursor === undefined ? {} : { cursor } }, ListResourcesResultSchema, requestOptions);
          return { items: result.resources, nextCursor: result.nextCursor };
        }).catch((error: unknown) => (attempt.signal.aborted ? Promise.reject(error) : []))
      : [];
    const outcome: SettledOutcome = {
      status: 'ready',
      server: name,
      tools,
      prompts,
      resources,
      timings: { connectMs, listMs: Math.round((elapsed() - connectMs) * 100) / 100, totalMs: elapsed() },
    };
    const info = client.getServerVersion();
    if (info) outcome.serverInfo = { name: info.name, version: info.version };
    const instructions = client.getInstructions();
    if (instructions) outcome.instructions = instructions;
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId && transport.protocolVersion) {
      outcome.session = { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion };
      outcome.protocolVersion = transport.protocolVersion;
    }
    context.adoptForClose({
      close: () => (transport instanceof ProcessGroupStdioTransport ? transport.close({ stdinGraceMs: 500, termGraceMs: 500 }) : transport.close()),
      kill: () => abandon(transport),
    });
    return outcome;
  } catch (error) {
    // A death racing the error must read as `exited`; a retired or timed-out attempt is killed at once.
    if (!attempt.signal.aborted) await settleExit(transport);
    const stdio = transport instanceof ProcessGroupStdioTransport ? transport : undefined;
    const failure = classifyFailure(error, {
      ...(stdio?.exit ? { exit: stdio.exit } : {}),
      ...(stdio ? { stderrTail: stdio.stderrTail() } : {}),
      timedOut,
      timeoutMs: connectTimeoutMs,
      cancelled: context.signal.aborted && !timedOut,
    });
    await abandon(transport);
    const timings = connectMs === undefined ? { totalMs: elapsed() } : { connectMs, totalMs: elapsed() };
    return { status: 'failed', server: name, failure, timings };
  } finally {
    clearTimeout(timer);
    context.signal.removeEventListener('abort', onRetired);
  }
}
