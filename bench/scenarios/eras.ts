/**
 * Scenario `eras`: what each MCP protocol era costs through the supervisor, against a bare v2 SDK
 * client (`@modelcontextprotocol/client`) driven the same way in the same run, on the v2-SDK era
 * fixture (`test/fixtures/era-server.ts`).
 *
 * 1. Call overhead, per (era, transport): `turn.callTool` of a host against `client.callTool` of
 *    a bare v2 client, each on its own server process, samples interleaved (the order alternates).
 *    Rows: old era (2025-11-25) over stdio, new era (2026-07-28) over stdio, new era over
 *    Streamable HTTP (probed: `auto`), old era over HTTP (configured). Reported, no target: the
 *    `call` scenario holds the supervised call to its target against the raw v1 SDK (what hosts
 *    call through today); these rows say what the supervision costs over the v2 client itself.
 * 2. Discovery cost per era: `createHost` → `await host.ready()` (a fresh host per sample, closed
 *    after) against a bare v2 client's `connect` + `listTools()` (closed after), interleaved.
 *    stdio: a server spawned per sample on both sides. HTTP: a server already running; the host
 *    probes (`auto`) against a bare `auto` connect, then a host whose `protocolCache` file already
 *    holds the verdict against a bare connect with `prior: { kind: 'modern', discover }`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, type ConnectOptions, type DiscoverResult, type Transport, type VersionNegotiationMode } from '@modelcontextprotocol/client';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { createHost, type Host, type ReadinessView } from '../../src/index.js';
import { ERA_FIXTURE, eraFixtureConfig, startListeningFixture, type ListeningFixture, type StdioServerConfig } from '../../test/helpers/fixtures.js';
import { settleHeap } from '../lib/gc.js';
import { round2, roundSummary, summarize, type Summary } from '../lib/stats.js';
import type { Metric, Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { since } from './sdk-baseline.js';

const OLD_ERA = '2025-11-25';
const NEW_ERA = '2026-07-28';
type Era = typeof OLD_ERA | typeof NEW_ERA;
/** What `client.getProtocolEra()` answers for each era. */
const SDK_ERA: Record<Era, 'legacy' | 'modern'> = { [OLD_ERA]: 'legacy', [NEW_ERA]: 'modern' };

/** The fixture's flags: a server of both eras, or of the new one only. */
const DUAL = ['--legacy', 'serve'];
const NEW_ONLY = ['--legacy', 'reject'];

function firstText(result: { content?: unknown }): string {
  const [first] = (result.content ?? []) as { type?: string; text?: string }[];
  return first?.text ?? '';
}

/** A bare v2 client negotiating with `mode`. */
function bareClient(mode: VersionNegotiationMode): Client {
  const client = new Client({ name: 'bench-bare-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
  client.onerror = () => undefined;
  return client;
}

/** The SDK's own stdio transport, spawning `config` (a process of its own) with the SDK's default environment. */
function stdioTransport(config: StdioServerConfig): StdioClientTransport {
  return new StdioClientTransport({ command: config.command, args: config.args, env: { ...getDefaultEnvironment(), ...config.env }, stderr: 'ignore' });
}

function httpTransport(url: string): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(url));
}

/**
 * A bare client (negotiating with `mode`) connected over `transport` and checked to be in `era`;
 * on any failure both are closed (a spawned server with them) before the error is rethrown.
 */
async function connectBare(mode: VersionNegotiationMode, transport: Transport, era: Era, what: string, options?: ConnectOptions): Promise<Client> {
  const client = bareClient(mode);
  try {
    await client.connect(transport, options);
    checkBareEra(client, era, what);
  } catch (error) {
    await client.close().catch(() => undefined);
    await transport.close().catch(() => undefined);
    throw error;
  }
  return client;
}

/** Checks a connected bare client is in `era`. */
function checkBareEra(client: Client, era: Era, what: string): void {
  const got = client.getProtocolEra();
  if (got !== SDK_ERA[era]) throw new Error(`${what}: the bare v2 client negotiated ${String(got)}, expected ${SDK_ERA[era]}`);
}

/** Checks the host's view of server `fx` is ready in `era`; returns the library's own discovery attempt time (ms). */
function checkHostEra(view: ReadinessView, era: Era, what: string): number | undefined {
  const server = view.servers['fx'];
  if (server?.status !== 'ready') throw new Error(`${what}: server not ready: ${JSON.stringify(server)}`);
  if (server.protocolVersion !== era) throw new Error(`${what}: the host speaks ${String(server.protocolVersion)}, expected ${era}`);
  return server.timings.totalMs;
}

function newHost(config: unknown, protocolCache?: string): Host {
  return createHost({ profiles: { bench: { mcpServers: { fx: config } } }, ...(protocolCache === undefined ? {} : { protocolCache }) });
}

/** Starts the era fixture over Streamable HTTP; `url` is its `/mcp`. */
async function httpFixture(context: ScenarioContext, flags: readonly string[]): Promise<ListeningFixture & { url: string }> {
  const fixture = await startListeningFixture(ERA_FIXTURE, ['--http', ...flags], { tag: context.tag });
  return { ...fixture, url: `${fixture.base}/mcp` };
}

type Closers = (() => Promise<unknown>)[];

/** Runs every closer (last opened first), whatever happens to the others; rethrows the first failure. */
async function closeAll(closers: Closers): Promise<void> {
  let failure: unknown;
  for (const close of closers.splice(0).reverse()) {
    try {
      await close();
    } catch (error) {
      failure ??= error;
    }
  }
  if (failure !== undefined) throw failure;
}

// ---------------------------------------------------------------------------------------------
// 1. Call overhead.

/** One row of the call table. */
interface CallRow {
  label: string;
  era: Era;
  transport: 'stdio' | 'http';
  /** The fixture's flags (both sides get a server of their own with these flags). */
  flags: readonly string[];
  /** `protocol` in the host's config (absent: the library's default for the transport). */
  protocol?: Era;
  /** The bare client's negotiation. */
  bareMode: VersionNegotiationMode;
}

const CALL_ROWS: readonly CallRow[] = [
  // stdio defaults to the old era in the library: no `protocol` in the config.
  { label: 'old era stdio', era: OLD_ERA, transport: 'stdio', flags: DUAL, bareMode: 'legacy' },
  { label: 'new era stdio', era: NEW_ERA, transport: 'stdio', flags: NEW_ONLY, protocol: NEW_ERA, bareMode: { pin: NEW_ERA } },
  // Streamable HTTP defaults to `auto` (probed) in the library.
  { label: 'new era HTTP', era: NEW_ERA, transport: 'http', flags: NEW_ONLY, bareMode: 'auto' },
  { label: 'old era HTTP', era: OLD_ERA, transport: 'http', flags: DUAL, protocol: OLD_ERA, bareMode: 'legacy' },
];

/** `promise`, its result registered in `closers` (closed by `close`) as soon as it exists. */
function tracked<T>(closers: Closers, promise: Promise<T>, close: (value: T) => Promise<unknown>): Promise<T> {
  return promise.then((value) => {
    closers.push(() => close(value));
    return value;
  });
}

/** Waits for both (so neither is still starting when the caller cleans up), then throws the first failure. */
async function both<A, B>(a: Promise<A>, b: Promise<B>): Promise<[A, B]> {
  const [first, second] = await Promise.allSettled([a, b]);
  if (first.status === 'rejected') throw first.reason;
  if (second.status === 'rejected') throw second.reason;
  return [first.value, second.value];
}

/** The host's server config of `row` and the bare client's transport factory, each side on its own server process. */
async function callServers(context: ScenarioContext, row: CallRow, closers: Closers): Promise<{ config: unknown; transport(): Transport }> {
  const protocol = row.protocol === undefined ? {} : { protocol: row.protocol };
  if (row.transport === 'stdio') {
    // Both sides spawn their own process from the same command line.
    const config = eraFixtureConfig(row.flags, { tag: context.tag });
    return { config: { ...config, ...protocol }, transport: () => stdioTransport(config) };
  }
  const [forHost, forBare] = await both(
    tracked(closers, httpFixture(context, row.flags), (fixture) => fixture.proc.stop()),
    tracked(closers, httpFixture(context, row.flags), (fixture) => fixture.proc.stop()),
  );
  return { config: { url: forHost.url, ...protocol }, transport: () => httpTransport(forBare.url) };
}

interface CallFigures {
  label: string;
  transport: 'stdio' | 'http';
  supervised: Summary;
  bare: Summary;
}

async function measureCalls(context: ScenarioContext, row: CallRow): Promise<CallFigures> {
  const started = performance.now();
  context.log(`calls: ${row.label}`);
  const closers: Closers = [];
  const supervisedMs: number[] = [];
  const bareMs: number[] = [];
  try {
    const { config, transport } = await callServers(context, row, closers);
    const host = newHost(config);
    closers.push(() => host.close());
    // Setup, not measured: the two sides come up side by side.
    const [view, bare] = await both(
      host.ready('bench'),
      tracked(closers, connectBare(row.bareMode, transport(), row.era, row.label), (client) => client.close()),
    );
    checkHostEra(view, row.era, `${row.label} (host)`);
    // What a host does before calling: it knows the server's tools (the client caches the list).
    await bare.listTools();

    const turn = await host.beginTurn('bench');
    const args = { text: 'x'.repeat(64) };
    const fromHost = firstText(await turn.callTool('mcp__fx__echo', args));
    const fromBare = firstText(await bare.callTool({ name: 'echo', arguments: args }));
    if (fromHost !== args.text || fromBare !== args.text) throw new Error(`${row.label}: echo answered ${JSON.stringify(fromHost)} (host), ${JSON.stringify(fromBare)} (bare)`);
    const warmup = context.samples(200, 20);
    for (let index = 0; index < warmup; index++) {
      await turn.callTool('mcp__fx__echo', args);
      await bare.callTool({ name: 'echo', arguments: args });
    }
    await settleHeap(50);
    const rounds = row.transport === 'stdio' ? context.samples(1500, 100) : context.samples(400, 40);
    for (let index = 0; index < rounds; index++) {
      // Alternate which goes first so neither always sees the other's garbage.
      for (const which of index % 2 === 0 ? (['sup', 'bare'] as const) : (['bare', 'sup'] as const)) {
        const start = performance.now();
        if (which === 'sup') await turn.callTool('mcp__fx__echo', args);
        else await bare.callTool({ name: 'echo', arguments: args });
        (which === 'sup' ? supervisedMs : bareMs).push(since(start));
      }
    }
  } finally {
    await closeAll(closers);
  }
  context.log(`calls: ${row.label}: ${supervisedMs.length} rounds in ${(since(started) / 1000).toFixed(1)} s`);
  return { label: row.label, transport: row.transport, supervised: summarize(supervisedMs), bare: summarize(bareMs) };
}

// ---------------------------------------------------------------------------------------------
// 2. Discovery cost.

interface DiscoveryFigures {
  label: string;
  baselineLabel: string;
  host: Summary;
  bare: Summary;
  /** The library's own discovery attempt (`view.servers.fx.timings.totalMs`), inside the host's figure. */
  attempt: Summary;
}

/**
 * Interleaves `rounds` samples (after one unmeasured warm-up pair, except under `--quick`) of a
 * fresh host's `createHost` → `ready()` and of `bare()`; the order alternates.
 */
async function measureDiscovery(
  context: ScenarioContext,
  what: { label: string; baselineLabel: string; era: Era; config: unknown; protocolCache?: string; rounds: number },
  bare: () => Promise<void>,
): Promise<DiscoveryFigures> {
  const started = performance.now();
  context.log(`discovery: ${what.label}`);
  const hostMs: number[] = [];
  const bareMs: number[] = [];
  const attemptMs: number[] = [];
  const hostSample = async (record: boolean): Promise<void> => {
    const start = performance.now();
    const host = newHost(what.config, what.protocolCache);
    try {
      const view = await host.ready('bench');
      const elapsed = since(start);
      const attempt = checkHostEra(view, what.era, `${what.label} (host)`);
      if (record) {
        hostMs.push(elapsed);
        if (attempt !== undefined) attemptMs.push(attempt);
      }
    } finally {
      await host.close();
    }
  };
  const bareSample = async (record: boolean): Promise<void> => {
    const start = performance.now();
    await bare();
    if (record) bareMs.push(since(start));
  };
  if (!context.quick) {
    await hostSample(false);
    await bareSample(false);
  }
  for (let index = 0; index < what.rounds; index++) {
    await settleHeap(20);
    if (index % 2 === 0) {
      await hostSample(true);
      await bareSample(true);
    } else {
      await bareSample(true);
      await hostSample(true);
    }
  }
  context.log(`discovery: ${what.label}: ${what.rounds} rounds in ${(since(started) / 1000).toFixed(1)} s`);
  return { label: what.label, baselineLabel: what.baselineLabel, host: summarize(hostMs), bare: summarize(bareMs), attempt: summarize(attemptMs) };
}

/**
 * Re-discovery on a host that is already running (its worker warm, the verdict cached):
 * `host.retry()` rounds, timed by the attempt the view reports, against the bare client's connect
 * + `listTools()` in this (warm) process, interleaved.
 */
async function measureWarmRediscovery(context: ScenarioContext, config: unknown, protocolCache: string, rounds: number, bare: () => Promise<void>): Promise<{ attempt: Summary; bare: Summary }> {
  context.log('discovery: new era HTTP, warm host re-discovery');
  const host = newHost(config, protocolCache);
  const attemptMs: number[] = [];
  const bareMs: number[] = [];
  try {
    checkHostEra(await host.ready('bench'), NEW_ERA, 'warm host');
    await host.retry('bench');
    await bare();
    for (let index = 0; index < rounds; index++) {
      const attempt = checkHostEra(await host.retry('bench'), NEW_ERA, 'warm host re-discovery');
      if (attempt !== undefined) attemptMs.push(attempt);
      const start = performance.now();
      await bare();
      bareMs.push(since(start));
    }
  } finally {
    await host.close();
  }
  return { attempt: summarize(attemptMs), bare: summarize(bareMs) };
}

/** A bare client's `connect` (over a new transport) + `listTools()`, closed after; checks the era. */
async function bareDiscovery(mode: VersionNegotiationMode, era: Era, transport: () => Transport, what: string, connectOptions?: ConnectOptions): Promise<Client> {
  const client = await connectBare(mode, transport(), era, what, connectOptions);
  try {
    const { tools } = await client.listTools();
    if (!tools.some((tool) => tool.name === 'echo')) throw new Error(`${what}: the bare client listed no echo tool`);
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}

/**
 * How many era probes a `--record` file holds: `server/discover` requests with the SDK's probe ids
 * (`server-discover-probe-<n>`); a session that adopted a cached verdict asks `server/discover` as a
 * liveness check with an ordinary id, which is not a probe.
 */
function probesRecorded(file: string): number {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return 0;
  }
  let count = 0;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const entry = JSON.parse(line) as { method?: unknown; id?: unknown };
    if (entry.method === 'server/discover' && String(entry.id).startsWith('server-discover-probe')) count++;
  }
  return count;
}

// ---------------------------------------------------------------------------------------------

export const erasScenario: Scenario = {
  name: 'eras',
  description: 'call overhead and discovery cost per protocol era, against a bare v2 client in the same run',
  // ≈ 90 s on an idle 2-core machine; room for a loaded one.
  timeoutMs: 240_000,
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const calls: CallFigures[] = [];
    for (const row of CALL_ROWS) {
      calls.push(await measureCalls(context, row));
      await settleHeap(50);
    }

    const discoveries: DiscoveryFigures[] = [];
    const stdioRounds = context.samples(8, 1);
    const httpRounds = context.samples(12, 2);

    const oldStdio = eraFixtureConfig(DUAL, { tag: context.tag });
    discoveries.push(
      await measureDiscovery(
        context,
        { label: 'old era stdio', baselineLabel: 'bare v2 legacy spawn+connect+listTools p50', era: OLD_ERA, config: oldStdio, rounds: stdioRounds },
        async () => void (await (await bareDiscovery('legacy', OLD_ERA, () => stdioTransport(oldStdio), 'old era stdio')).close()),
      ),
    );

    const newStdio = eraFixtureConfig(NEW_ONLY, { tag: context.tag });
    discoveries.push(
      await measureDiscovery(
        context,
        { label: 'new era stdio', baselineLabel: 'bare v2 pin spawn×2+connect+listTools p50', era: NEW_ERA, config: { ...newStdio, protocol: NEW_ERA }, rounds: stdioRounds },
        async () => void (await (await bareDiscovery({ pin: NEW_ERA }, NEW_ERA, () => stdioTransport(newStdio), 'new era stdio')).close()),
      ),
    );

    // One new-era-only HTTP server for both sides, already running; it records what it receives,
    // so the cached series can be checked to have sent no `server/discover`.
    const record = join(context.tmpDir, 'new-era-http.jsonl');
    const protocolCache = join(context.tmpDir, 'eras.json');
    let probes: { autoSeries: number; expectedAutoSeries: number; priming: number; cachedSeries: number } | undefined;
    let warm: { attempt: Summary; bare: Summary } | undefined;
    const server = await httpFixture(context, [...NEW_ONLY, '--record', record]);
    try {
      const config = { url: server.url };
      const before = probesRecorded(record);
      discoveries.push(
        await measureDiscovery(
          context,
          { label: 'new era HTTP auto (probe)', baselineLabel: 'bare v2 auto connect+listTools p50', era: NEW_ERA, config, rounds: httpRounds },
          async () => void (await (await bareDiscovery('auto', NEW_ERA, () => httpTransport(server.url), 'new era HTTP auto')).close()),
        ),
      );
      const afterAuto = probesRecorded(record);

      // The verdict: the bare side's from an earlier connect, the host's written by a first host.
      const earlier = await bareDiscovery('auto', NEW_ERA, () => httpTransport(server.url), 'new era HTTP (priming)');
      let discover: DiscoverResult | undefined;
      try {
        discover = earlier.getDiscoverResult();
      } finally {
        await earlier.close();
      }
      if (discover === undefined) throw new Error('the bare v2 client kept no DiscoverResult after an auto connect');
      const prior = { kind: 'modern' as const, discover };
      const first = newHost(config, protocolCache);
      try {
        checkHostEra(await first.ready('bench'), NEW_ERA, 'new era HTTP (priming host)');
      } finally {
        await first.close();
      }
      const afterPriming = probesRecorded(record);

      discoveries.push(
        await measureDiscovery(
          context,
          { label: 'new era HTTP cached verdict', baselineLabel: 'bare v2 prior connect+listTools p50', era: NEW_ERA, config, protocolCache, rounds: httpRounds },
          async () => void (await (await bareDiscovery('auto', NEW_ERA, () => httpTransport(server.url), 'new era HTTP prior', { prior })).close()),
        ),
      );
      warm = await measureWarmRediscovery(context, config, protocolCache, httpRounds, async () => void (await (await bareDiscovery('auto', NEW_ERA, () => httpTransport(server.url), 'new era HTTP prior (warm)', { prior })).close()));
      probes = {
        autoSeries: afterAuto - before,
        // One probe per host (its discovery; the warm session adopts the verdict) and one per bare connect, warm-ups included.
        expectedAutoSeries: 2 * (httpRounds + (context.quick ? 0 : 1)),
        priming: afterPriming - afterAuto,
        cachedSeries: probesRecorded(record) - afterPriming,
      };
    } finally {
      await server.proc.stop();
    }

    const metrics: Metric[] = [];
    for (const figures of calls) {
      metrics.push(
        { name: `${figures.label}: callTool p50`, unit: 'ms', value: round2(figures.supervised.p50), samples: figures.supervised.n, baseline: { label: 'bare v2 client p50', value: round2(figures.bare.p50) } },
        { name: `${figures.label}: callTool added p50`, unit: 'µs', value: round2((figures.supervised.p50 - figures.bare.p50) * 1000) },
      );
    }
    for (const figures of discoveries) {
      metrics.push(
        { name: `${figures.label}: createHost→ready p50`, unit: 'ms', value: round2(figures.host.p50), samples: figures.host.n, baseline: { label: figures.baselineLabel, value: round2(figures.bare.p50) } },
        // The library's own discovery attempt (connect + every list, in a fresh worker), inside the figure above.
        { name: `${figures.label}: discovery attempt p50`, unit: 'ms', value: round2(figures.attempt.p50), samples: figures.attempt.n, baseline: { label: figures.baselineLabel, value: round2(figures.bare.p50) } },
      );
    }
    if (warm) {
      metrics.push({
        name: 'new era HTTP cached verdict, warm host: re-discovery attempt p50',
        unit: 'ms',
        value: round2(warm.attempt.p50),
        samples: warm.attempt.n,
        baseline: { label: 'bare v2 prior connect+listTools p50', value: round2(warm.bare.p50) },
      });
    }
    metrics.push({ name: 'era probes (server/discover) sent in the cached series', unit: 'count', value: probes.cachedSeries, target: { of: 'value', op: '<=', limit: 0 } });

    return {
      metrics,
      notes: [
        'eras: baselines are a bare v2 SDK client (@modelcontextprotocol/client Client: StdioClientTransport from /stdio, StreamableHTTPClientTransport) negotiating the same era: legacy for the old era, { pin: 2026-07-28 } for the new era over stdio, auto for the new era over HTTP, measured interleaved with the figure in the same run.',
        'eras calls: the host and the bare client each call echo on their own server process (same fixture and flags); reported without a target (the call scenario holds the target against the raw v1 SDK). The old-era HTTP leg of the v2 server is stateless.',
        'eras discovery: createHost→ready() includes starting the host (each fresh host starts its own discovery worker pool, so a cold worker thread per sample), discovery (tools, prompts and resources listed) and, by default, the warm session of the server (ready means callable; over stdio that is a second server process); the bare figure is one connect + listTools() on one connection. details.discovery.*.attemptMs is the library\'s own discovery attempt (view timings.totalMs), inside the host figure.',
        'eras stdio discovery: the bare v2 client pinned to 2026-07-28 sends its server/discover probe on a short-lived sibling process it spawns from the same parameters (SDK behaviour of StdioClientTransport in pin and auto modes), so that baseline spawns the server twice; the legacy one spawns it once.',
        'eras HTTP discovery: one server already running serves both sides. "auto (probe)": each fresh host probes with server/discover (its verdict kept in memory only); "cached verdict": every host reads a protocolCache file a first host wrote, the bare client connects with prior { kind: modern, discover } from an earlier connect (zero round trips before tools/list). That server runs with --record (a synchronous append per message, on both sides alike): details.serverDiscoverRequests counts the probes each series sent.',
      ],
      details: {
        calls: Object.fromEntries(calls.map((figures) => [figures.label, { supervisedMs: roundSummary(figures.supervised), bareMs: roundSummary(figures.bare) }])),
        warmRediscovery: warm === undefined ? undefined : { attemptMs: roundSummary(warm.attempt), bareMs: roundSummary(warm.bare) },
        discovery: Object.fromEntries(
          discoveries.map((figures) => [figures.label, { hostMs: roundSummary(figures.host), bareMs: roundSummary(figures.bare), attemptMs: roundSummary(figures.attempt) }]),
        ),
        serverDiscoverRequests: probes,
      },
    };
  },
};
