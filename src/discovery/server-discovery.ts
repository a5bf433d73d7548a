/**
 * Discovery of one server: connect, `initialize`, list every page of tools (and prompts and
 * resources when offered), then let go of the connection. Runs inside a discovery body (a worker
 * thread); it owns the server's process or HTTP transport for the duration of the attempt.
 *
 * One deadline (`connectTimeoutMs`) covers the whole attempt, and it *cancels*: the transport is
 * closed and the stdio process group killed, so a timed-out attempt leaves nothing behind. The
 * caller's `signal` (retirement of the generation) does the same.
 */
import {
  ListPromptsResultSchema,
  ListResourceTemplatesResultSchema,
  ListResourcesResultSchema,
  type Prompt,
  type Resource,
  type ResourceTemplate,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { ServerConfig } from '../config/types.js';
import { classifyFailure } from '../connection/classify.js';
import type { ClientSide } from '../connection/client-side.js';
import { ConnectError, type Connection, openConnection } from '../connection/connect.js';
import type { EraVerdict } from '../connection/era.js';
import { listAllPages, listTools } from '../connection/lists.js';
import { CatalogLimitError, DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_SCHEMA_DEPTH, nestsDeeperThan } from '../connection/limits.js';
import { starvationWindowMs } from './starvation.js';
import type { SettledOutcome } from './types.js';

/** Where the attempt runs: its deadline, cancellation and pid bookkeeping. */
export interface ServerDiscoveryContext {
  connectTimeoutMs: number;
  /** The largest message accepted from a server (bytes). */
  maxMessageBytes?: number;
  /** Most tools (prompts, resources) one server may list. */
  maxCatalogItems?: number;
  /** Deepest nesting of a tool's input or output schema. */
  maxSchemaDepth?: number;
  /** The host's lifeline marker for spawned servers' environment. */
  markerEnv?: Readonly<Record<string, string>>;
  /** The cached era verdict of a server, if any (adopted instead of probing). */
  eraOf?(server: string): EraVerdict | undefined;
  /**
   * Set when the servers run at a lowered priority: a watch for the attempt, checked once per
   * {@link starvationWindowMs} with the pid of the server process; it returns how long the
   * server had waited for a CPU when it found it starved and gave it normal priority back.
   */
  watchStarvation?(): { check(pid: number): number | undefined };
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


/**
 * A catalogue the host can hold and hand to models: not more items than the limit, no schema
 * nested absurdly deep (it would overflow every recursive walk downstream, from cloning to JSON).
 * @throws CatalogLimitError naming the item and the limit
 */
function checkCatalog(catalog: Catalog, maxItems: number, maxDepth: number): void {
  for (const [what, items] of [['tools', catalog.tools], ['prompts', catalog.prompts], ['resources', catalog.resources], ['resource templates', catalog.resourceTemplates]] as const) {
    if (items.length > maxItems) throw new CatalogLimitError(`the server lists ${items.length} ${what}, more than limits.maxCatalogItems (${maxItems})`);
  }
  for (const tool of catalog.tools) {
    for (const [field, schema] of [['inputSchema', tool.inputSchema], ['outputSchema', tool.outputSchema]] as const) {
      if (nestsDeeperThan(schema, maxDepth)) throw new CatalogLimitError(`the ${field} of tool "${String(tool.name).slice(0, 64)}" nests deeper than limits.maxSchemaDepth (${maxDepth})`);
    }
  }
}

interface Catalog {
  tools: Tool[];
  prompts: Prompt[];
  resources: Resource[];
  resourceTemplates: ResourceTemplate[];
  /** The server's `ttlMs` on its tool list (2026-07-28), when positive. */
  freshForMs?: number;
}

/** Lists tools (every page), and prompts, resources and resource templates when the server offers them. */
async function listCatalog(connection: Connection, requestOptions: { signal: AbortSignal; timeout: number; maxTotalTimeout: number }): Promise<Catalog> {
  const { client } = connection;
  const capabilities = client.getServerCapabilities() ?? {};
  const { tools, freshForMs } = await listTools(client, requestOptions);
  // Prompts and resources are optional extras: a server whose tools work is not failed because
  // its prompt or resource listing is broken.
  const optional = <T>(list: Promise<T[]>): Promise<T[]> => list.catch((error: unknown) => (requestOptions.signal.aborted ? Promise.reject(error) : []));
  const prompts = capabilities.prompts
    ? await optional(
        listAllPages<Prompt>('prompts/list', async (cursor) => {
          const result = await client.request({ method: 'prompts/list', params: cursor === undefined ? {} : { cursor } }, ListPromptsResultSchema, requestOptions);
          return { items: result.prompts, nextCursor: result.nextCursor };
        }),
      )
    : [];
  const resources = capabilities.resources
    ? await optional(
        listAllPages<Resource>('resources/list', async (cursor) => {
          const result = await client.request({ method: 'resources/list', params: cursor === undefined ? {} : { cursor } }, ListResourcesResultSchema, requestOptions);
          return { items: result.resources, nextCursor: result.nextCursor };
        }),
      )
    : [];
  const resourceTemplates = capabilities.resources
    ? await optional(
        listAllPages<ResourceTemplate>('resources/templates/list', async (cursor) => {
          const result = await client.request({ method: 'resources/templates/list', params: cursor === undefined ? {} : { cursor } }, ListResourceTemplatesResultSchema, requestOptions);
          return { items: result.resourceTemplates, nextCursor: result.nextCursor };
        }),
      )
    : [];
  return { tools, prompts, resources, resourceTemplates, ...(freshForMs === undefined ? {} : { freshForMs }) };
}

/**
 * Discovers one server as `side` declares the client. Never throws: every failure becomes a
 * `failed` outcome with its kind. On success the connection is released in the background
 * (stdio: close ladder; HTTP: the session is left open for the main thread to resume) through
 * `adoptForClose`. One function on purpose: connect, list and hand over are one story under one
 * deadline and one abort, and every exit from it must produce exactly one outcome.
 */
export async function discoverServer(server: ServerConfig, side: ClientSide, context: ServerDiscoveryContext): Promise<SettledOutcome> {
  const startedAt = performance.now();
  const elapsed = (): number => Math.round((performance.now() - startedAt) * 100) / 100;
  const cpuWait = (): { cpuWaitMs?: number } => (cpuWaitMs === undefined ? {} : { cpuWaitMs: Math.round(cpuWaitMs) });
  const name = server.name;
  if (!context.isCurrent()) {
    return { status: 'failed', server: name, failure: { kind: 'cancelled', message: 'discovery was cancelled before the server was started' }, timings: { totalMs: 0 } };
  }
  if (side.authError !== undefined) {
    return { status: 'failed', server: name, failure: { kind: 'auth', message: side.authError }, timings: { totalMs: 0 } };
  }
  const connectTimeoutMs = server.connectTimeoutMs ?? context.connectTimeoutMs;
  const attempt = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    attempt.abort(new Error(`connect timeout of ${connectTimeoutMs} ms`));
  }, connectTimeoutMs);
  let serverPid: number | undefined;
  let cpuWaitMs: number | undefined;
  const watch = context.watchStarvation?.();
  const starvationChecks = watch
    ? setInterval(() => {
        if (serverPid !== undefined && cpuWaitMs === undefined) cpuWaitMs = watch.check(serverPid);
      }, starvationWindowMs(connectTimeoutMs))
    : undefined;
  const onRetired = (): void => attempt.abort(new Error('generation retired'));
  context.signal.addEventListener('abort', onRetired, { once: true });
  // The attempt's own deadline bounds every request; the SDK's per-request timeout stays out of its way.
  const requestOptions = { signal: attempt.signal, timeout: connectTimeoutMs + 60_000, maxTotalTimeout: connectTimeoutMs + 60_000 };
  let connection: Connection | undefined;
  let connectMs: number | undefined;
  const cachedEra = context.eraOf?.(name);
  let eraStale = false;
  try {
    connection = await openConnection(server, side, {
      connectTimeoutMs: requestOptions.timeout,
      signal: attempt.signal,
      ...(cachedEra === undefined ? {} : { era: cachedEra }),
      onStaleEra: () => (eraStale = true),
      ...(context.maxMessageBytes === undefined ? {} : { maxMessageBytes: context.maxMessageBytes }),
      ...(context.markerEnv === undefined ? {} : { markerEnv: context.markerEnv }),
      onSpawn: (pid) => {
        if (!context.recordPid(pid)) {
          process.kill(-pid, 'SIGKILL');
          return;
        }
        serverPid = pid;
        context.afterSpawn?.(pid);
      },
      onExit: (pid) => {
        if (serverPid === pid) serverPid = undefined;
        context.clearPid(pid);
      },
    });
    connectMs = elapsed();
    const { freshForMs, ...catalog } = await listCatalog(connection, requestOptions);
    checkCatalog(catalog, context.maxCatalogItems ?? DEFAULT_MAX_CATALOG_ITEMS, context.maxSchemaDepth ?? DEFAULT_MAX_SCHEMA_DEPTH);
    const outcome: SettledOutcome = {
      status: 'ready',
      server: name,
      ...catalog,
      ...(freshForMs === undefined ? {} : { freshForMs }),
      timings: { connectMs, listMs: Math.round((elapsed() - connectMs) * 100) / 100, totalMs: elapsed(), ...cpuWait() },
    };
    const capabilities = connection.client.getServerCapabilities();
    if (capabilities) outcome.capabilities = capabilities;
    const info = connection.client.getServerVersion();
    if (info) outcome.serverInfo = { name: info.name, version: info.version };
    const instructions = connection.client.getInstructions();
    if (instructions) outcome.instructions = instructions;
    const { sessionId, protocolVersion } = connection;
    const negotiated = connection.negotiatedVersion;
    if (negotiated) outcome.protocolVersion = negotiated;
    const verdict = connection.verdict;
    if (verdict) outcome.era = verdict;
    if (eraStale) outcome.eraStale = true;
    if (sessionId && protocolVersion) outcome.session = { sessionId, protocolVersion };
    const adopted = connection;
    context.adoptForClose({ close: () => adopted.release({ stdinGraceMs: 500, termGraceMs: 500 }), kill: () => adopted.kill() });
    return outcome;
  } catch (error) {
    // A death racing the error must read as `exited`; a retired or timed-out attempt is killed at once.
    const cause = error instanceof ConnectError ? error.cause : error;
    if (connection && !attempt.signal.aborted) await connection.settleExit(cause);
    const exit = error instanceof ConnectError ? error.exit : connection?.exit;
    const stderrTail = error instanceof ConnectError ? error.stderrTail : connection?.stderrTail();
    const tooLarge = error instanceof ConnectError ? error.tooLarge : connection?.tooLarge;
    const failure = classifyFailure(cause, {
      ...(tooLarge === undefined ? {} : { tooLarge }),
      ...(exit ? { exit } : {}),
      ...(stderrTail ? { stderrTail } : {}),
      timedOut,
      timeoutMs: connectTimeoutMs,
      cancelled: context.signal.aborted && !timedOut,
    });
    await connection?.kill();
    const timings = connectMs === undefined ? { totalMs: elapsed(), ...cpuWait() } : { connectMs, totalMs: elapsed(), ...cpuWait() };
    if (failure.kind === 'timeout' && cpuWaitMs !== undefined) {
      failure.message += ` (starved: it had waited ${Math.round(cpuWaitMs)} ms for a CPU at discovery's low priority before it got normal priority back)`;
    }
    // A verdict that was offered and did not lead to a working connection is not trusted again:
    // the next discovery probes (a stale modern verdict fails at the first request, not at connect).
    const staleEra = cachedEra !== undefined && failure.kind !== 'cancelled' && failure.kind !== 'timeout';
    return { status: 'failed', server: name, failure, timings, ...(staleEra ? { eraStale: true as const } : {}) };
  } finally {
    clearTimeout(timer);
    clearInterval(starvationChecks);
    context.signal.removeEventListener('abort', onRetired);
  }
}
