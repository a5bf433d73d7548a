/**
 * `doctor --trace`: a human view of the core's tracing channels — the same data an OpenTelemetry
 * layer maps to spans. It listens to `mcp-supervisor:discover` (one entry per server discovered,
 * published on the main thread for work done in the workers) and `mcp-supervisor:call` (one
 * entry per attempt, so a replay shows as a second attempt), then prints them as a tree.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { CallTraceContext, DiscoverTraceContext } from '../observability/channels.js';

/** One finished (or still open) traced operation. */
export interface TraceEntry {
  kind: 'discover' | 'call';
  profile: string;
  server: string;
  /** `discover`, or the MCP method and target of an attempt (`tools/call echo`). */
  label: string;
  attempt?: number;
  generation?: number;
  transport: string;
  /** ms; undefined while open. */
  durationMs?: number;
  outcome: string;
}

/** What `recordTrace` returns: the entries so far, and the function that stops listening. */
export interface TraceRecorder {
  entries: TraceEntry[];
  stop(): void;
}

function describeCall(traced: CallTraceContext): string {
  if (traced.error !== undefined) {
    const error = traced.error as { code?: unknown; message?: unknown };
    return `failed: ${typeof error.code === 'string' ? error.code : String(error.message ?? traced.error)}`;
  }
  return (traced.result as { isError?: unknown } | undefined)?.isError === true ? 'tool error (isError)' : 'ok';
}

function describeDiscovery(traced: DiscoverTraceContext): string {
  const result = traced.result;
  if (!result) return 'ended without an outcome';
  if (result.status === 'ready') return `ready, ${result.tools ?? 0} tools`;
  return result.status === 'failed' ? `failed (${result.kind ?? 'unknown'})` : result.status;
}

/** Starts recording both channels. */
export function recordTrace(): TraceRecorder {
  const entries: TraceEntry[] = [];
  const open = new Map<object, { entry: TraceEntry; startedAt: number }>();
  const begin = (traced: object, entry: TraceEntry): void => {
    entries.push(entry);
    open.set(traced, { entry, startedAt: performance.now() });
  };
  const finish = (traced: object, outcome: string): void => {
    const started = open.get(traced);
    if (!started) return;
    open.delete(traced);
    started.entry.durationMs = performance.now() - started.startedAt;
    started.entry.outcome = outcome;
  };
  const discover = {
    start: (traced: DiscoverTraceContext) =>
      begin(traced, { kind: 'discover', profile: traced.profile, server: traced.server, label: 'discover', generation: traced.generation, transport: traced.transport, outcome: 'open' }),
    asyncEnd: (traced: DiscoverTraceContext) => finish(traced, describeDiscovery(traced)),
  };
  const call = {
    start: (traced: CallTraceContext) =>
      begin(traced, {
        kind: 'call',
        profile: traced.profile,
        server: traced.server,
        label: `${traced.method} ${traced.tool ?? traced.uri ?? ''}`.trim(),
        attempt: traced.attempt,
        transport: traced.transport,
        outcome: 'open',
      }),
    asyncEnd: (traced: CallTraceContext) => finish(traced, describeCall(traced)),
  };
  const discoverChannel = diagnosticsChannel.tracingChannel('mcp-supervisor:discover');
  const callChannel = diagnosticsChannel.tracingChannel('mcp-supervisor:call');
  discoverChannel.subscribe(discover as never);
  callChannel.subscribe(call as never);
  return {
    entries,
    stop: () => {
      discoverChannel.unsubscribe(discover as never);
      callChannel.unsubscribe(call as never);
    },
  };
}

/** The entries as a tree: profile → server → discovery and call attempts, in the order they began. */
export function renderTrace(entries: readonly TraceEntry[]): string {
  const lines: string[] = ['trace (mcp-supervisor:discover, mcp-supervisor:call)'];
  const profiles = [...new Set(entries.map((entry) => entry.profile))];
  for (const profile of profiles) {
    lines.push(`profile ${profile}`);
    const servers = [...new Set(entries.filter((entry) => entry.profile === profile).map((entry) => entry.server))];
    servers.forEach((server, serverIndex) => {
      const lastServer = serverIndex === servers.length - 1;
      lines.push(`${lastServer ? '└─' : '├─'} ${server}`);
      const own = entries.filter((entry) => entry.profile === profile && entry.server === server);
      own.forEach((entry, index) => {
        const branch = index === own.length - 1 ? '└─' : '├─';
        const what = entry.kind === 'discover' ? `discover (${entry.transport}, generation ${entry.generation})` : `${entry.label}, attempt ${entry.attempt}`;
        const took = entry.durationMs === undefined ? 'open' : `${entry.durationMs.toFixed(1)} ms`;
        lines.push(`${lastServer ? '   ' : '│  '}${branch} ${what}  ${took}  ${entry.outcome}`);
      });
    });
  }
  return lines.join('\n');
}
