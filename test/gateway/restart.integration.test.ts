/**
 * A real gateway on 127.0.0.1 (SDK Streamable HTTP server) is restarted. A compliant client
 * re-initialises after the 404 and re-binds by itself; a client that never re-initialises is
 * detected, and the host's recover hook is called exactly once, at the deadline (injected clock).
 */
import test from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createGateway, createWatchdog, PROBE_TOOL_NAME, type SweepResult } from '../../src/gateway/index.js';
import { ManualClock } from './helpers.js';
import { startHttpHost } from './http-host.js';

const S = 1000;

function registerTools(server: McpServer): void {
  server.registerTool('heartbeat', { description: 'Agent heartbeat' }, () => ({ content: [{ type: 'text', text: 'ok' }] }));
}

/** An agent's MCP client, as the raw SDK gives it: nothing re-initialises unless we say so. */
async function connectAgent(url: URL, agent: string): Promise<Client> {
  const client = new Client({ name: agent, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${agent}` } } }));
  return client;
}

async function heartbeat(client: Client): Promise<void> {
  const result = await client.callTool({ name: 'heartbeat', arguments: {} });
  if (result.isError) throw new Error('heartbeat failed');
}

/** What a compliant client does: on 404 for its session, re-initialise once and retry. */
async function heartbeatCompliant(client: Client, url: URL, agent: string): Promise<'ok' | 'reinitialised'> {
  try {
    await heartbeat(client);
    return 'ok';
  } catch (error) {
    if (!(error instanceof StreamableHTTPError) || error.code !== 404) throw error;
    await client.close();
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${agent}` } } }));
    await heartbeat(client);
    return 'reinitialised';
  }
}

const byAgent = (results: SweepResult[]) => Object.fromEntries(results.map((r) => [r.agent, r.action]));

test('after a restart the compliant agent re-binds; the stuck one is recovered exactly once at the deadline', async (t) => {
  const clock = new ManualClock();
  const gw = createGateway({ identify: (extra) => extra.authInfo?.clientId, clock });
  const host = await startHttpHost(gw, registerTools);
  const clients = new Set<Client>();
  t.teardown(async () => {
    for (const client of clients) await client.close();
    await host.close();
  });

  const launches = new Map([
    ['agent-a', 'La1'],
    ['agent-b', 'Lb1'],
  ]);
  const a = await connectAgent(host.url, 'agent-a');
  let b = await connectAgent(host.url, 'agent-b');
  clients.add(a).add(b);
  await heartbeat(a);
  await heartbeat(b);
  t.true((await gw.status('agent-a')).bound);
  t.true((await gw.status('agent-b')).bound);

  const recoveries: Array<{ agent: string; reason: string; at: number }> = [];
  const dog = createWatchdog({
    recover: true,
    clock,
    agents: () => [...launches.keys()],
    session: (agent) => ({ connected: true, heartbeatIntervalMs: 30 * S, launchId: launches.get(agent) }),
    status: (agent) => gw.status(agent),
    recoverAgent: async (agent, reason) => {
      recoveries.push({ agent, reason, at: clock.now() });
      // The relaunch: a fresh process means a fresh client, which initialises in the current epoch.
      await b.close();
      clients.delete(b);
      launches.set(agent, 'Lb2');
      b = await connectAgent(host.url, agent);
      clients.add(b);
      await heartbeat(b);
    },
  });
  t.teardown(() => dog.stop());
  t.deepEqual(byAgent(await dog.sweep()), { 'agent-a': 'none', 'agent-b': 'none' });

  const before = gw.epoch;
  await host.restart();
  t.not(gw.epoch, before);
  t.false((await gw.status('agent-a')).bound, 'a restart unbinds everybody');

  // The compliant client hits the 404, re-initialises and is bound again by its own call.
  t.is(await heartbeatCompliant(a, host.url, 'agent-a'), 'reinitialised');
  const statusA = await gw.status('agent-a');
  t.true(statusA.bound);
  t.is(statusA.epoch, gw.epoch);
  await gw.requestProbe('agent-a', { nonce: 'na', launchId: 'La1' });
  const reply = await a.callTool({ name: PROBE_TOOL_NAME, arguments: { nonce: 'na', launch_id: 'La1' } });
  t.like(reply.structuredContent, { agent: 'agent-a', nonce: 'na', launchId: 'La1', gatewayEpoch: gw.epoch });
  t.true((await gw.status('agent-a')).probe?.fulfilled);

  // The other one only ever gets 404s: the request arrives, nothing runs, nothing binds.
  const stale = await t.throwsAsync(heartbeat(b), { instanceOf: StreamableHTTPError });
  t.is((stale as StreamableHTTPError).code, 404);
  await gw.requestProbe('agent-b', { nonce: 'nb', launchId: 'Lb1' });

  const t0 = clock.now();
  t.deepEqual(byAgent(await dog.sweep()), { 'agent-a': 'none', 'agent-b': 'armed' });
  for (const step of [60, 60, 60, 59]) {
    clock.advance(step * S);
    await t.throwsAsync(heartbeat(b)); // still knocking on the dead session
    t.deepEqual(byAgent(await dog.sweep()), { 'agent-a': 'none', 'agent-b': 'armed' });
  }
  t.is(clock.now() - t0, 239 * S);
  t.deepEqual(recoveries, []);

  clock.advance(1 * S);
  const due = await dog.sweep();
  t.deepEqual(byAgent(due), { 'agent-a': 'none', 'agent-b': 'recovered' });
  t.is(recoveries.length, 1);
  t.like(recoveries[0], { agent: 'agent-b', at: t0 + 240 * S });
  t.regex(recoveries[0]!.reason, /not bound to epoch .* for 240 s \(deadline 240 s\); probe nb \(launch Lb1\) unanswered for 240 s/);

  // The relaunched agent bound itself; later sweeps, past every grace, leave it alone.
  t.true((await gw.status('agent-b')).bound);
  for (let i = 0; i < 15; i++) {
    clock.advance(60 * S);
    await heartbeat(b);
    await heartbeatCompliant(a, host.url, 'agent-a');
    t.deepEqual(byAgent(await dog.sweep()), { 'agent-a': 'none', 'agent-b': 'none' });
  }
  t.is(recoveries.length, 1);
});

test('a session id of an older epoch gets 404 even while its transport is still registered', async (t) => {
  const gw = createGateway({ identify: (extra) => extra.authInfo?.clientId });
  const host = await startHttpHost(gw, registerTools);
  const client = await connectAgent(host.url, 'agent-a');
  t.teardown(async () => {
    await client.close();
    await host.close();
  });
  await heartbeat(client);
  await host.restart({ dropSessions: false });
  t.is(host.sessions.size, 1, 'the old transport is still in the table');
  const error = await t.throwsAsync(heartbeat(client), { instanceOf: StreamableHTTPError });
  t.is((error as StreamableHTTPError).code, 404);
  t.false((await gw.status('agent-a')).bound);
});
