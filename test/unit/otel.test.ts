/**
 * The OpenTelemetry layer's mapping, driven through the core's own channel helpers (no server):
 * span names and attributes after the MCP conventions, `error.type`, the W3C `traceparent` put
 * into `_meta`, attempts under the caller's parent, the duration histogram, and silence after
 * `uninstrument()`. The same layer against real servers is in test/integration/tracing.test.ts.
 */
import test from 'ava';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { AggregationTemporality, MeterProvider, MetricReader, type HistogramMetricData } from '@opentelemetry/sdk-metrics';
import { instrument } from '../../src/otel/index.js';
import { callChannel, type CallTraceContext, startDiscoverTrace, traceAttempt } from '../../src/observability/channels.js';

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const contextManager = new AsyncLocalStorageContextManager().enable();
context.setGlobalContextManager(contextManager);
test.after.always(() => {
  context.disable();
});

function setup(t: import('ava').ExecutionContext) {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const uninstrument = instrument({ tracerProvider, meterProvider });
  t.teardown(uninstrument);
  return { exporter, tracerProvider, reader, uninstrument };
}

const base = (attempt: number): CallTraceContext => ({ profile: 'p', server: 'fx', method: 'tools/call', tool: 'search', name: 'mcp__fx__search', attempt, transport: 'stdio', meta: {} });

// Serial: the channels are process-wide, so two instrumentations at once would see each other's attempts.
test.serial('an attempt is a CLIENT span "tools/call <tool>" with the MCP attributes; its traceparent goes into _meta', async (t) => {
  const { exporter } = setup(t);
  let sentMeta: Record<string, unknown> | undefined;
  const result = await traceAttempt(
    () => ({ ...base(1), sessionId: 'abc' }),
    async (meta) => {
      sentMeta = meta;
      return { content: [] };
    },
  );
  t.deepEqual(result, { content: [] });
  const [span] = exporter.getFinishedSpans();
  t.truthy(span);
  t.is(span!.name, 'tools/call search');
  t.like(span!.attributes, { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'search', 'gen_ai.operation.name': 'execute_tool', 'network.transport': 'pipe', 'mcp.session.id': 'abc' });
  t.is(span!.attributes['error.type'], undefined);
  t.is(sentMeta?.['traceparent'], `00-${span!.spanContext().traceId}-${span!.spanContext().spanId}-01`);
});

test.serial('a failing attempt records error.type (the library code) and an ERROR status; an isError result is a tool_error', async (t) => {
  const { exporter } = setup(t);
  const failure = Object.assign(new Error('the server exited'), { code: 'SERVER_EXITED' });
  await t.throwsAsync(traceAttempt(() => base(1), async () => Promise.reject(failure)), { message: 'the server exited' });
  await traceAttempt(() => base(1), async () => ({ content: [], isError: true }));
  const [failed, toolError] = exporter.getFinishedSpans();
  t.is(failed!.attributes['error.type'], 'SERVER_EXITED');
  t.is(failed!.status.code, 2);
  t.is(toolError!.attributes['error.type'], 'tool_error');
});

test.serial('a replayed call: two attempt spans under the caller\'s one parent, one trace', async (t) => {
  const { exporter, tracerProvider } = setup(t);
  const tracer = tracerProvider.getTracer('host');
  await tracer.startActiveSpan('turn', async (parent) => {
    const died = Object.assign(new Error('died mid-call'), { code: 'SERVER_EXITED' });
    await traceAttempt(() => base(1), async () => Promise.reject(died)).catch(() => undefined);
    await traceAttempt(() => base(2), async () => ({ content: [] }));
    parent.end();
  });
  const spans = exporter.getFinishedSpans();
  const parent = spans.find((span) => span.name === 'turn')!;
  const attempts = spans.filter((span) => span.name === 'tools/call search');
  t.is(attempts.length, 2);
  for (const attempt of attempts) {
    t.is(attempt.parentSpanContext?.spanId, parent.spanContext().spanId);
    t.is(attempt.spanContext().traceId, parent.spanContext().traceId);
  }
  t.deepEqual(attempts.map((span) => span.attributes['mcp_supervisor.attempt']), [1, 2]);
});

test.serial('the duration histogram mcp.client.operation.duration records each attempt with its error.type', async (t) => {
  const { reader } = setup(t);
  await traceAttempt(() => base(1), async () => ({ content: [] }));
  await traceAttempt(() => base(1), async () => ({ content: [], isError: true }));
  const { resourceMetrics } = await reader.collect();
  const metric = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((entry) => entry.descriptor.name === 'mcp.client.operation.duration') as HistogramMetricData | undefined;
  t.truthy(metric);
  t.is(metric!.descriptor.unit, 's');
  const byError = new Map(metric!.dataPoints.map((point) => [point.attributes['error.type'] ?? 'ok', point.value.count]));
  t.deepEqual(Object.fromEntries(byError), { ok: 1, tool_error: 1 });
});

test.serial('discovery traces become INTERNAL spans; after uninstrument() nothing is recorded and no channel has subscribers', async (t) => {
  const { exporter, uninstrument } = setup(t);
  const end = startDiscoverTrace({ profile: 'p', server: 'fx', generation: 3, transport: 'http' });
  end({ status: 'failed', kind: 'refused' });
  const [span] = exporter.getFinishedSpans();
  t.is(span!.name, 'mcp-supervisor.discover fx');
  t.like(span!.attributes, { 'mcp_supervisor.generation': 3, 'error.type': 'refused', 'network.transport': 'tcp' });
  uninstrument();
  exporter.reset();
  t.false(callChannel.hasSubscribers);
  let built = false;
  await traceAttempt(
    () => {
      built = true;
      return base(1);
    },
    async (meta) => {
      t.is(meta, undefined, 'no _meta is added without a subscriber');
      return {};
    },
  );
  t.false(built, 'the trace context is not even built when nobody listens');
  startDiscoverTrace({ profile: 'p', server: 'fx', generation: 4, transport: 'stdio' })({ status: 'ready', tools: 1 });
  t.deepEqual(exporter.getFinishedSpans(), []);
});

test.serial('a span still open when the host uninstruments is ended then, not leaked', async (t) => {
  const { exporter, uninstrument } = setup(t);
  let release!: () => void;
  const pending = traceAttempt(() => base(1), () => new Promise<object>((resolve) => (release = () => resolve({}))));
  uninstrument();
  t.is(exporter.getFinishedSpans().length, 1);
  release();
  await pending;
  t.is(exporter.getFinishedSpans().length, 1, 'the late end records nothing more');
});
