/**
 * Tracing through `node:diagnostics_channel`, as undici and node-redis do it: the core publishes,
 * an optional layer (`mcp-supervisor/otel`, or the host's own subscriber) maps. Nothing is built
 * or published while nobody subscribes (`hasSubscribers` is checked first), so tracing costs a
 * property read when unused.
 *
 * - `mcp-supervisor:call` — a tracing channel, one trace per *attempt* of a tool call, resource
 *   read or prompt fetch (a replay is a second attempt, so it is visible). Subscribers may add
 *   entries to `context.meta` in their `start` handler: they are sent in the request's
 *   `params._meta` (that is how a `traceparent` reaches the server).
 * - `mcp-supervisor:discover` — a tracing channel, one trace per server discovered. Discovery
 *   runs in worker threads, whose channels no main-thread subscriber sees: the body reports each
 *   server's start and outcome to the main thread, which publishes them here.
 * - `mcp-supervisor:event` — a plain channel mirroring every typed host event as
 *   `{ name, payload }` (payloads scrubbed of configured secrets, as listeners get them).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { TransportKind } from '../config/types.js';

/** The MCP method of a supervised request. */
export type TracedMethod = 'tools/call' | 'resources/read' | 'prompts/get';

/** Context of one attempt on `mcp-supervisor:call`. The same object reaches every handler of the attempt. */
export interface CallTraceContext {
  readonly profile: string;
  readonly server: string;
  readonly method: TracedMethod;
  /** The tool's name on its server (tools/call), or the prompt's name (prompts/get). */
  readonly tool?: string;
  /** The model-facing name of the tool in the turn, when the call came through a turn. */
  readonly name?: string;
  /** The resource's URI (resources/read). */
  readonly uri?: string;
  /** 1 for the first attempt; 2 for the resend or replay. */
  readonly attempt: number;
  readonly transport: TransportKind;
  /** The MCP session of the attempt (Streamable HTTP), once known. */
  sessionId?: string;
  protocolVersion?: string;
  /** Entries subscribers add in `start`, sent in the request's `params._meta`. */
  readonly meta: Record<string, unknown>;
  /** Set by the channel: the attempt's result, or its error. */
  result?: unknown;
  error?: unknown;
}

/** Context of one server's discovery on `mcp-supervisor:discover`. */
export interface DiscoverTraceContext {
  readonly profile: string;
  readonly server: string;
  readonly generation: number;
  readonly transport: TransportKind;
  /** Set when the outcome arrives. */
  result?: { status: 'ready' | 'failed' | 'disabled'; tools?: number; kind?: string };
  error?: unknown;
}

/** A host event on `mcp-supervisor:event`. */
export interface EventMessage {
  readonly name: string;
  readonly payload: unknown;
}

/** Tool calls, resource reads and prompt fetches, one trace per attempt. */
export const callChannel = diagnosticsChannel.tracingChannel<unknown, CallTraceContext>('mcp-supervisor:call');
/** Discovery of one server (published on the main thread for work done in workers). */
export const discoverChannel = diagnosticsChannel.tracingChannel<unknown, DiscoverTraceContext>('mcp-supervisor:discover');
/** Every typed host event. */
export const eventChannel = diagnosticsChannel.channel('mcp-supervisor:event');

/**
 * Runs one attempt under `mcp-supervisor:call` when someone listens, else just runs it. The
 * context is built only when needed (`build` is not called otherwise).
 */
export function traceAttempt<T>(build: () => CallTraceContext, attempt: (meta: Record<string, unknown> | undefined) => Promise<T>): Promise<T> {
  if (!callChannel.hasSubscribers) return attempt(undefined);
  const context = build();
  return callChannel.tracePromise(() => attempt(Object.keys(context.meta).length > 0 ? context.meta : undefined), context);
}

/**
 * Publishes a discovery that happened elsewhere (a worker) as a trace: `start` when the worker
 * began the server, the async end when its outcome arrived. Returns the function that ends it.
 */
export function startDiscoverTrace(context: DiscoverTraceContext): (result: DiscoverTraceContext['result'], error?: unknown) => void {
  const channel = discoverChannel;
  if (!channel.hasSubscribers) return () => undefined;
  channel.start.publish(context);
  channel.end.publish(context);
  return (result, error) => {
    if (result !== undefined) context.result = result;
    if (error !== undefined) {
      context.error = error;
      channel.error.publish(context);
    }
    channel.asyncStart.publish(context);
    channel.asyncEnd.publish(context);
  };
}
