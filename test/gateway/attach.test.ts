/**
 * `gw.attach(mcpServer)` over the SDK's in-memory transport: a success is recorded when a tool
 * handler completes — never when a request merely arrives — and `mcp_probe` answers with the
 * identity the host's resolver gives, not the one in the arguments.
 */
import test from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { createGateway, PROBE_TOOL_NAME, type Gateway, type ToolExtra } from '../../src/gateway/index.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import { deferred, ManualClock } from './helpers.js';

interface Rig {
  gw: Gateway;
  clock: ManualClock;
  server: McpServer;
  errors: string[];
  /** Connects a client for `agent` through a session minted by the gateway (or `sessionId`). */
  connect(agent: string, sessionId?: string): Promise<Client>;
  close(): Promise<void>;
}

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

function rig(): Rig {
  const clock = new ManualClock();
  const agents = new Map<string, string>(); // session id → agent: the host's trusted mapping
  const errors: string[] = [];
  const gw = createGateway({
    identify: (extra) => (extra.sessionId === undefined ? undefined : agents.get(extra.sessionId)),
    clock,
    onError: (error, context) => errors.push(`${context}: ${String(error)}`),
  });
  const server = new McpServer({ name: 'gateway-under-test', version: '1.0.0' });
  const clients: Client[] = [];
  return {
    gw,
    clock,
    server,
    errors,
    async connect(agent, sessionId = gw.sessionIdGenerator()()) {
      agents.set(sessionId, agent);
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
      serverSide.sessionId = sessionId;
      await server.connect(serverSide);
      const client = new Client({ name: agent, version: '1.0.0' });
      await client.connect(clientSide);
      clients.push(client);
      return client;
    },
    async close() {
      for (const client of clients) await client.close();
      await server.close();
    },
  };
}

test('success is recorded when the handler completes, not when the request arrives', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  const entered = deferred();
  const release = deferred();
  r.server.registerTool('slow', { inputSchema: { n: z.number() } }, async ({ n }) => {
    entered.resolve();
    await release.promise;
    return { content: [{ type: 'text', text: String(n * 2) }] };
  });
  const client = await r.connect('agent-a');
  const call = client.callTool({ name: 'slow', arguments: { n: 21 } });
  await entered.promise;
  t.false((await r.gw.status('agent-a')).bound, 'running, not completed');
  r.clock.advance(7);
  release.resolve();
  t.is(text(await call), '42');
  // Recorded before the result was returned: bound as soon as the client has the answer.
  const status = await r.gw.status('agent-a');
  t.true(status.bound);
  t.is(status.observedAt, r.clock.now());
});

test('requests that never reach a handler do not count', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  r.server.registerTool('typed', { inputSchema: { n: z.number() } }, async () => ({ content: [] }));
  const client = await r.connect('agent-a');
  const invalid = await client.callTool({ name: 'typed', arguments: { n: 'not a number' } });
  t.true(invalid.isError);
  const unknown = await client.callTool({ name: 'nope', arguments: {} });
  t.true(unknown.isError);
  await client.listTools();
  t.false((await r.gw.status('agent-a')).bound);
});

test('a handler that throws still completed: the client got an answer, so it counts', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  r.server.registerTool('boom', {}, () => {
    throw new Error('tool failed');
  });
  const client = await r.connect('agent-a');
  const result = await client.callTool({ name: 'boom', arguments: {} });
  t.true(result.isError);
  t.true((await r.gw.status('agent-a')).bound);
});

test('a cancelled request gets no response, so its completion does not count', async (t) => {
  // Driven through gw.wrap directly: the negative ("nothing was recorded") needs to know exactly
  // when the wrapper has settled, which a round trip through the transport cannot tell.
  const gw = createGateway({ identify: () => 'agent-a', clock: new ManualClock() });
  const release = deferred();
  const wrapped = gw.wrap(async (_extra: ToolExtra): Promise<CallToolResult> => {
    await release.promise;
    return { content: [] };
  });
  const controller = new AbortController();
  const running = wrapped({ signal: controller.signal } as ToolExtra);
  controller.abort();
  release.resolve();
  await running;
  t.false((await gw.status('agent-a')).bound);
  await wrapped({ signal: new AbortController().signal } as ToolExtra);
  t.true((await gw.status('agent-a')).bound, 'the same call, not cancelled, counts');
  t.is(gw.wrap(wrapped), wrapped, 'wrapping twice is a no-op');
});

test('mcp_probe answers {agent, nonce, launchId, gatewayEpoch, observedAt}; identity comes from the resolver', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  const client = await r.connect('agent-a');
  const listed = await client.listTools();
  t.true(listed.tools.some((tool) => tool.name === PROBE_TOOL_NAME));
  await r.gw.requestProbe('agent-a', { nonce: 'n-1', launchId: 'L-1' });
  r.clock.advance(3);
  const result = await client.callTool({
    name: PROBE_TOOL_NAME,
    // An agent claiming another identity in its arguments changes nothing.
    arguments: { nonce: 'n-1', launch_id: 'L-1', agent: 'agent-b' },
  });
  const reply = { agent: 'agent-a', nonce: 'n-1', launchId: 'L-1', gatewayEpoch: r.gw.epoch, observedAt: r.clock.now() };
  t.deepEqual(result.structuredContent, reply);
  t.deepEqual(JSON.parse(text(result)), reply);
  t.true((await r.gw.status('agent-a')).probe?.fulfilled);
  t.false((await r.gw.status('agent-b')).bound);
});

test('mcp_probe from an unidentified caller records nothing', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await r.server.connect(serverSide); // no session id: the resolver cannot tell who this is
  const client = new Client({ name: 'anonymous', version: '1.0.0' });
  await client.connect(clientSide);
  t.teardown(() => client.close());
  const result = await client.callTool({ name: PROBE_TOOL_NAME, arguments: { nonce: 'n', launch_id: 'L' } });
  t.true(result.isError);
  t.regex(text(result), /could not identify the calling agent/);
});

test('a call through a session of an older epoch binds nothing in the current one', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  r.server.registerTool('ping', {}, () => ({ content: [] }));
  const client = await r.connect('agent-a');
  const old = r.gw.epoch;
  await r.gw.bump(); // a host that forgot to 404 the old sessions
  await client.callTool({ name: 'ping', arguments: {} });
  t.false((await r.gw.status('agent-a')).bound);
  const probe = await client.callTool({ name: PROBE_TOOL_NAME, arguments: { nonce: 'n', launch_id: 'L' } });
  t.true(probe.isError);
  t.regex(text(probe), new RegExp(`belongs to gateway epoch ${old}.*must reconnect`));
  t.false((await r.gw.status('agent-a')).bound);
});

test('tools registered before attach: refused without handles, wrapped in place with them', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  const early = r.server.registerTool('early', {}, () => ({ content: [{ type: 'text', text: 'early' }] }));
  const error = t.throws(() => r.gw.attach(r.server));
  t.true(isMcpSupervisorError(error));
  t.is((error as { code?: string }).code, 'INVALID_CONFIG');
  const attachment = r.gw.attach(r.server, { tools: [early] });
  t.is(r.gw.attach(r.server), attachment, 'attaching again returns the first attachment');
  const client = await r.connect('agent-a');
  t.is(text(await client.callTool({ name: 'early', arguments: {} })), 'early');
  t.true((await r.gw.status('agent-a')).bound);
});

test('registerTool, the deprecated tool() and update({ callback }) after attach are all wrapped', async (t) => {
  const r = rig();
  t.teardown(() => r.close());
  r.gw.attach(r.server);
  const a = r.server.registerTool('a', {}, () => ({ content: [{ type: 'text', text: 'a1' }] }));
  r.server.tool('b', 'legacy', { s: z.string() }, ({ s }) => ({ content: [{ type: 'text', text: s }] }));
  a.update({ callback: () => ({ content: [{ type: 'text', text: 'a2' }] }) });
  const client = await r.connect('agent-a');
  const observedAfter = async (name: string, args: Record<string, unknown>) => {
    const at = r.clock.advance(1_000);
    const result = text(await client.callTool({ name, arguments: args }));
    t.is((await r.gw.status('agent-a')).observedAt, at, `${name} recorded its completion`);
    return result;
  };
  t.is(await observedAfter('b', { s: 'legacy ok' }), 'legacy ok');
  t.is(await observedAfter('a', {}), 'a2');
  a.disable(); // enable/disable go through the patched update and keep working
  a.enable();
  t.is(await observedAfter('a', {}), 'a2');
});

test('ledger and resolver failures never break a tool call; they are reported', async (t) => {
  const clock = new ManualClock();
  const errors: string[] = [];
  const gw = createGateway({
    identify: () => {
      throw new Error('resolver down');
    },
    clock,
    onError: (error, context) => errors.push(`${context}: ${String(error)}`),
  });
  const server = new McpServer({ name: 's', version: '1.0.0' });
  gw.attach(server);
  server.registerTool('ping', {}, () => ({ content: [{ type: 'text', text: 'pong' }] }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'c', version: '1.0.0' });
  await client.connect(clientSide);
  t.teardown(async () => {
    await client.close();
    await server.close();
  });
  t.is(text(await client.callTool({ name: 'ping', arguments: {} })), 'pong');
  t.deepEqual(errors, ['identifying the agent of a tool call: Error: resolver down']);
});
