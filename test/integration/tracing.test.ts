/**
 * Tracing through the host, against real fixture servers: the diagnostics channels (a call's
 * attempt, a discovery done in a worker thread, the mirrored host events) and the OpenTelemetry
 * layer end to end (the span of a call, the `traceparent` the server receives in `params._meta`,
 * a replay as two attempts under one parent, nothing after `uninstrument()`).
 *
 * Serial: diagnostics channels are process-wide, so a test subscribing sees only its own host.
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createHost } from '../../src/index.js';
import type { Host, HostOptions } from '../../src/host.js';
import { instrument } from '../../src/otel/index.js';
import type { CallTraceContext, DiscoverTraceContext, EventMessage } from '../../src/observability/channels.js';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, structured, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
test.after.always(() => context.disable());

function host(t: ExecutionContext, options: HostOptions): Host {
  const created = createHost({ ...options, discovery: { maxThreads: 1, ...options.discovery } });
  t.teardown(() => created.close());
  return created;
}

/** Subscribes to a tracing channel for the test; returns what each handler saw, in order. */
function record<Context extends object>(t: ExecutionContext, name: string): { event: string; context: Context }[] {
  const seen: { event: string; context: Context }[] = [];
  const handlers = Object.fromEntries(
    (['start', 'end', 'asyncStart', 'asyncEnd', 'error'] as const).map((event) => [event, (message: unknown) => seen.push({ event, context: message as Context })]),
  );
  const channel = diagnosticsChannel.tracingChannel(name);
  channel.subscribe(handlers as never);
  t.teardown(() => channel.unsubscribe(handlers as never));
  return seen;
}

test.serial('mcp-supervisor:discover fires on the main thread for a discovery done in a worker; mcp-supervisor:call sees start and end of a call with its context', async (t) => {
  const tag = useFixtureTag(t);
  const discovered = record<DiscoverTraceContext>(t, 'mcp-supervisor:discover');
  const calls = record<CallTraceContext>(t, 'mcp-supervisor:call');
  const events: EventMessage[] = [];
  const onEvent = (message: unknown): void => void events.push(message as EventMessage);
  diagnosticsChannel.subscribe('mcp-supervisor:event', onEvent);
  t.teardown(() => diagnosticsChannel.unsubscribe('mcp-supervisor:event', onEvent));

  const h = host(t, { profiles: { p: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } } });
  const turn = await h.beginTurn('p');
  t.deepEqual(discovered.map((entry) => entry.event), ['start', 'end', 'asyncStart', 'asyncEnd']);
  t.like(discovered[0]!.context, { profile: 'p', server: 'fx', generation: 1, transport: 'stdio', result: { status: 'ready' } });
  t.true(events.some((event) => event.name === 'discovery:settled' && (event.payload as { key: string }).key === 'p'), 'host events are mirrored');

  t.is(textOf(await turn.callTool('mcp__fx__echo', { text: 'traced' })), 'traced');
  t.deepEqual(calls.map((entry) => entry.event), ['start', 'end', 'asyncStart', 'asyncEnd']);
  const traced = calls[0]!.context;
  t.like(traced, { profile: 'p', server: 'fx', method: 'tools/call', tool: 'echo', attempt: 1, transport: 'stdio' });
  t.like(traced.result, { content: [{ type: 'text', text: 'traced' }] });
});

test.serial('OpenTelemetry: a call is a span "tools/call <tool>"; the server receives its traceparent in params._meta; after uninstrument() nothing is recorded', async (t) => {
  const tag = useFixtureTag(t);
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const uninstrument = instrument({ tracerProvider });
  t.teardown(uninstrument);
  const h = host(t, { profiles: { p: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } } });
  const turn = await h.beginTurn('p');
  const info = structured<{ meta?: { traceparent?: string } }>(await turn.callTool('mcp__fx__client_info'));
  const span = exporter.getFinishedSpans().find((entry) => entry.name === 'tools/call client_info');
  t.truthy(span, exporter.getFinishedSpans().map((entry) => entry.name).join(', '));
  t.like(span!.attributes, { 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'client_info', 'network.transport': 'pipe', 'mcp_supervisor.profile': 'p' });
  t.is(info.meta?.traceparent, `00-${span!.spanContext().traceId}-${span!.spanContext().spanId}-01`, 'the server saw this span as its parent');
  t.truthy(exporter.getFinishedSpans().find((entry) => entry.name === 'mcp-supervisor.discover fx'), 'the discovery of fx is a span too');

  const failing = await turn.callTool('mcp__fx__fail');
  t.true(failing.isError);
  t.is(exporter.getFinishedSpans().find((entry) => entry.name === 'tools/call fail')?.attributes['error.type'], 'tool_error');

  uninstrument();
  exporter.reset();
  const untraced = structured<{ meta?: unknown }>(await turn.callTool('mcp__fx__client_info'));
  t.is(untraced.meta, undefined, 'no _meta is sent without a tracer');
  t.deepEqual(exporter.getFinishedSpans(), []);
});

test.serial('OpenTelemetry: a read-only call whose answer was lost is replayed: two attempt spans under the caller\'s one parent', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--drop-in-tool', 'echo', '--drop-count', '1'], { tag });
  t.teardown(() => fixture.stop());
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  t.teardown(instrument({ tracerProvider }));
  const h = host(t, { profiles: { p: { mcpServers: { web: { url: fixture.url } } } } });
  const turn = await h.beginTurn('p');
  const tracer = tracerProvider.getTracer('host');
  await tracer.startActiveSpan('turn', async (parent) => {
    t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'again' })), 'again');
    parent.end();
  });
  const spans = exporter.getFinishedSpans();
  const parent = spans.find((span) => span.name === 'turn')!;
  const attempts = spans.filter((span) => span.name === 'tools/call echo');
  t.deepEqual(attempts.map((span) => span.attributes['mcp_supervisor.attempt']), [1, 2]);
  for (const attempt of attempts) t.is(attempt.parentSpanContext?.spanId, parent.spanContext().spanId);
  t.truthy(attempts[0]!.attributes['error.type'], 'the lost attempt failed');
  t.is(attempts[1]!.attributes['error.type'], undefined);
  t.is(attempts[1]!.attributes['network.transport'], 'tcp');
  t.truthy(attempts[1]!.attributes['mcp.session.id']);
  t.is((await fixture.stats()).executions['echo'], 2, 'the server ran it twice: the replay is real');
});
