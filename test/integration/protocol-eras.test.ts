/**
 * Servers of the 2026-07-28 era, as the v2 server SDK builds them (real processes): a dual-era
 * server is used in the 2025-11-25 era like any other; a new-era-only one fails alone, with an
 * error that says what it speaks — over stdio and over Streamable HTTP, in discovery, in a
 * turn and in the doctor — never as an exit, an HTTP 400 or a timeout.
 */
import test from 'ava';
import { createHost } from '../../src/index.js';
import { ERA_FIXTURE, eraFixtureConfig, startListeningFixture, useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

async function eraHttp(t: import('ava').ExecutionContext, legacy: 'serve' | 'reject', tag: string): Promise<{ url: string }> {
  const fixture = await startListeningFixture(ERA_FIXTURE, ['--http', '--legacy', legacy], { tag });
  t.teardown(() => fixture.proc.stop());
  return { url: `${fixture.base}/mcp` };
}

const NEW_ERA_ONLY = /^the server does not speak MCP 2025-11-25 \(it speaks 2026-07-28\): servers that speak only the 2026-07-28 era, without the 2025-11-25 one, are not supported yet$/;

test('one profile: a dual-era and a new-era-only server on each transport — the dual ones serve turns and calls, the new-era-only ones fail alone and say which era they speak', async (t) => {
  const tag = useFixtureTag(t);
  const host = createHost({
    profiles: {
      p: {
        mcpServers: {
          dualStdio: eraFixtureConfig(['--legacy', 'serve'], { tag }),
          newStdio: eraFixtureConfig(['--legacy', 'reject'], { tag }),
          dualHttp: await eraHttp(t, 'serve', tag),
          newHttp: await eraHttp(t, 'reject', tag),
        },
      },
    },
  });
  t.teardown(() => host.close());
  const view = await host.ready('p');
  t.is(view.status, 'degraded', JSON.stringify(view.servers));
  for (const name of ['dualStdio', 'dualHttp']) t.is(view.servers[name]?.status, 'ready', name);
  for (const name of ['newStdio', 'newHttp']) {
    const server = view.servers[name];
    if (server?.status !== 'failed') {
      t.fail(`${name}: ${JSON.stringify(server)}`);
      continue;
    }
    t.is(server.kind, 'protocol', `${name}: a refusal of the version is neither an exit nor an HTTP error`);
    t.regex(server.message, NEW_ERA_ONLY, name);
  }

  const turn = await host.beginTurn('p');
  t.deepEqual(turn.tools.map((tool) => tool.name).sort(), ['mcp__dualHttp__echo', 'mcp__dualStdio__echo']);
  t.is(textOf(await turn.callTool('mcp__dualStdio__echo', { text: 'stdio' })), 'stdio');
  t.is(textOf(await turn.callTool('mcp__dualHttp__echo', { text: 'http' })), 'http');
});
