/**
 * `mcp-supervisor/otel`: maps the core's diagnostics channels to OpenTelemetry, after the MCP
 * semantic conventions (OpenTelemetry GenAI conventions, "MCP" — development status):
 *
 * - one CLIENT span per attempt of a supervised request, named `{mcp.method.name} {target}`
 *   (`tools/call search`), with `mcp.method.name`, `gen_ai.tool.name` / `gen_ai.prompt.name`,
 *   `gen_ai.operation.name` (`execute_tool` for tool calls), `mcp.session.id`,
 *   `mcp.protocol.version`, `network.transport`, and `error.type` when it failed (the error's
 *   code, or `tool_error` for a result with `isError: true`); its parent is the context active
 *   where the host called (so a replay shows as two attempts under one parent);
 * - the W3C `traceparent` (and `tracestate`) of that span in the request's `params._meta`;
 * - the histogram `mcp.client.operation.duration` (seconds);
 * - one INTERNAL span per server discovery (`mcp-supervisor.discover {server}`).
 *
 * `@opentelemetry/api` is an optional peer dependency: only hosts that import this subpath need it.
 */
import {
  type Attributes,
  type Context,
  type Histogram,
  type MeterProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  context as otelContext,
  metrics,
  trace,
} from '@opentelemetry/api';
import { callChannel, type CallTraceContext, discoverChannel, type DiscoverTraceContext } from '../observability/channels.js';
import { DEFAULT_CLIENT_INFO } from '../client/info.js';

/** Where spans and metrics go. Defaults: the globally registered providers. */
export interface InstrumentOptions {
  tracerProvider?: TracerProvider;
  meterProvider?: MeterProvider;
}

const SCOPE = 'mcp-supervisor';
/** Bucket boundaries the convention advises for `mcp.client.operation.duration` (seconds). */
const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

interface Live {
  span: Span;
  startedAt: number;
  attributes: Attributes;
}

/** `error.type`: the library's error code, an error's name, or `tool_error` for an `isError` result. */
function errorType(traced: CallTraceContext): string | undefined {
  if (traced.error !== undefined) {
    const error = traced.error as { code?: unknown; name?: unknown };
    if (typeof error.code === 'string') return error.code;
    return typeof error.name === 'string' ? error.name : '_OTHER';
  }
  const result = traced.result as { isError?: unknown } | undefined;
  return result?.isError === true ? 'tool_error' : undefined;
}

function callAttributes(traced: CallTraceContext): Attributes {
  return {
    'mcp.method.name': traced.method,
    ...(traced.method === 'tools/call' && traced.tool !== undefined ? { 'gen_ai.tool.name': traced.tool, 'gen_ai.operation.name': 'execute_tool' } : {}),
    ...(traced.method === 'prompts/get' && traced.tool !== undefined ? { 'gen_ai.prompt.name': traced.tool } : {}),
    ...(traced.uri !== undefined ? { 'mcp.resource.uri': traced.uri } : {}),
    'network.transport': traced.transport === 'stdio' ? 'pipe' : 'tcp',
    'mcp_supervisor.profile': traced.profile,
    'mcp_supervisor.server': traced.server,
    'mcp_supervisor.attempt': traced.attempt,
  };
}

/**
 * The W3C trace-context header of a span, written here rather than through the global propagator:
 * the MCP convention asks for W3C `traceparent` in `_meta` whatever propagator (none, B3…) the
 * host registered for its HTTP traffic.
 */
function traceparentOf(span: Span): Record<string, string> {
  const spanContext = span.spanContext();
  const flags = spanContext.traceFlags.toString(16).padStart(2, '0');
  const state = spanContext.traceState?.serialize();
  return { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`, ...(state ? { tracestate: state } : {}) };
}

/** Handlers of `mcp-supervisor:call`: one CLIENT span per attempt, and its duration. */
function callHandlers(tracer: Tracer, duration: Histogram, calls: Map<CallTraceContext, Live>) {
  return {
    start(traced: CallTraceContext): void {
      const target = traced.tool === undefined ? '' : ` ${traced.tool}`;
      const attributes = callAttributes(traced);
      const parent: Context = otelContext.active();
      const span = tracer.startSpan(`${traced.method}${target}`, { kind: SpanKind.CLIENT, attributes }, parent);
      Object.assign(traced.meta, traceparentOf(span));
      calls.set(traced, { span, startedAt: performance.now(), attributes });
    },
    asyncEnd(traced: CallTraceContext): void {
      const live = calls.get(traced);
      if (!live) return;
      calls.delete(traced);
      const type = errorType(traced);
      live.span.setAttributes({
        ...(type === undefined ? {} : { 'error.type': type }),
        ...(traced.sessionId === undefined ? {} : { 'mcp.session.id': traced.sessionId }),
        ...(traced.protocolVersion === undefined ? {} : { 'mcp.protocol.version': traced.protocolVersion }),
      });
      if (traced.error !== undefined) {
        const error = traced.error as Error;
        live.span.recordException(error);
        live.span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
      } else if (type !== undefined) {
        live.span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool reported an error (isError)' });
      }
      live.span.end();
      const { 'mcp_supervisor.attempt': _attempt, ...metricAttributes } = live.attributes;
      duration.record((performance.now() - live.startedAt) / 1000, { ...metricAttributes, ...(type === undefined ? {} : { 'error.type': type }) });
    },
  };
}

/** Handlers of `mcp-supervisor:discover`: one INTERNAL span per server discovered. */
function discoverHandlers(tracer: Tracer, discoveries: Map<DiscoverTraceContext, Span>) {
  return {
    start(traced: DiscoverTraceContext): void {
      const span = tracer.startSpan(`mcp-supervisor.discover ${traced.server}`, {
        kind: SpanKind.INTERNAL,
        attributes: {
          'mcp_supervisor.profile': traced.profile,
          'mcp_supervisor.server': traced.server,
          'mcp_supervisor.generation': traced.generation,
          'network.transport': traced.transport === 'stdio' ? 'pipe' : 'tcp',
        },
      });
      discoveries.set(traced, span);
    },
    asyncEnd(traced: DiscoverTraceContext): void {
      const span = discoveries.get(traced);
      if (!span) return;
      discoveries.delete(traced);
      const result = traced.result;
      if (result) {
        span.setAttribute('mcp_supervisor.outcome', result.status);
        if (result.tools !== undefined) span.setAttribute('mcp_supervisor.tools', result.tools);
        if (result.status === 'failed') {
          span.setAttribute('error.type', result.kind ?? '_OTHER');
          span.setStatus({ code: SpanStatusCode.ERROR, message: `discovery failed (${result.kind ?? 'unknown'})` });
        }
      }
      span.end();
    },
  };
}

/**
 * Subscribes to the core's channels and records spans and metrics. Returns the function that
 * unsubscribes: after it nothing more is recorded (spans still open are ended at that moment).
 */
export function instrument(options: InstrumentOptions = {}): () => void {
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE, DEFAULT_CLIENT_INFO.version);
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE, DEFAULT_CLIENT_INFO.version);
  const duration: Histogram = meter.createHistogram('mcp.client.operation.duration', {
    unit: 's',
    description: 'Duration of an MCP request as observed by the client, from sending it to its answer.',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  // Maps, not WeakMaps: spans still open when the host uninstruments are ended then, not leaked.
  const calls = new Map<CallTraceContext, Live>();
  const discoveries = new Map<DiscoverTraceContext, Span>();
  const onCall = callHandlers(tracer, duration, calls);
  const onDiscover = discoverHandlers(tracer, discoveries);
  let active = true;
  callChannel.subscribe(onCall as never);
  discoverChannel.subscribe(onDiscover as never);
  return () => {
    if (!active) return;
    active = false;
    callChannel.unsubscribe(onCall as never);
    discoverChannel.unsubscribe(onDiscover as never);
    for (const { span } of calls.values()) span.end();
    for (const span of discoveries.values()) span.end();
    calls.clear();
    discoveries.clear();
  };
}
