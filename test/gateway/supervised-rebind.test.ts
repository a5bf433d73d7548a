/**
 * The gateway restart seen from a client built on this library's supervised sessions: after the
 * restart the stale session gets 404, the supervisor re-initialises by itself and retries once, and
 * the agent is bound to the new epoch — no manual re-initialise, no error surfaced to the caller.
 */
import test from 'ava';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createGateway } from '../../src/gateway/index.js';
import { createHost } from '../../src/index.js';
import { startHttpHost } from './http-host.js';

function registerTools(server: McpServer): void {
  server.registerTool('heartbeat', { description: 'Agent heartbeat', annotations: { readOnlyHint: true } }, () => ({ content: [{ type: 'text', text: 'ok' }] }));
}

test('a client on supervised sessions re-binds by itself after a gateway restart', async (t) => {
  const gw = createGateway({ identify: (extra) => extra.authInfo?.clientId });
  const gateway = await startHttpHost(gw, registerTools);
  const host = createHost({
    profiles: { agent: { mcpServers: { gateway: { url: gateway.url.href, headers: { authorization: 'Bearer agent-s' } } } } },
  });
  t.teardown(async () => {
    await host.close();
    await gateway.close();
  });
  const turn = await host.beginTurn('agent');
  t.is(turn.status, 'ready');
  t.deepEqual((await turn.callTool('mcp__gateway__heartbeat')).content, [{ type: 'text', text: 'ok' }]);
  t.true((await gw.status('agent-s')).bound);

  const before = gw.epoch;
  await gateway.restart();
  t.not(gw.epoch, before);
  t.false((await gw.status('agent-s')).bound);

  // The same turn, the same call: the supervisor meets the 404, opens a new session, retries once.
  const result = await turn.callTool('mcp__gateway__heartbeat');
  t.deepEqual(result.content, [{ type: 'text', text: 'ok' }]);
  const status = await gw.status('agent-s');
  t.true(status.bound);
  t.is(status.epoch, gw.epoch);
  const stats = host.stats().sessions.find((entry) => entry.server === 'gateway');
  t.is(stats?.reinitialisations, 1);
});
