/**
 * Both protocol eras in one host, against real processes: servers built with the v1 SDK (the
 * 2025-11-25 era only), with the v2 server SDK speaking both eras, and with it speaking only
 * 2026-07-28 — over stdio and Streamable HTTP. Each server's era is negotiated (HTTP: probed;
 * stdio: as configured), shown in the view, cached, and adopted by a restarted host without a
 * second probe; a server configured for an era it does not speak fails alone, saying what to set.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { serverFingerprint } from '../../src/config/fingerprint.js';
import { createHost } from '../../src/index.js';
import { ERA_FIXTURE, eraFixtureConfig, startHttpFixture, startListeningFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

async function eraHttp(t: import('ava').ExecutionContext, legacy: 'serve' | 'reject', tag: string, extra: string[] = []): Promise<{ url: string }> {
  const fixture = await startListeningFixture(ERA_FIXTURE, ['--http', '--legacy', legacy, ...extra], { tag });
  t.teardown(() => fixture.proc.stop());
  return { url: `${fixture.base}/mcp` };
}

async function scratch(t: import('ava').ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-eras-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * The `server/discover` requests a recording era fixture received: the SDK's era probes (ids
 * `server-discover-probe-<n>`) and the liveness checks of sessions that adopted a cached verdict.
 */
async function discoverRequests(file: string): Promise<{ probes: number; livenessChecks: number }> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const ids = text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { method?: string | null; id?: unknown })
    .filter((entry) => entry.method === 'server/discover')
    .map((entry) => String(entry.id));
  const probes = ids.filter((id) => id.startsWith('server-discover-probe')).length;
  return { probes, livenessChecks: ids.length - probes };
}

const OLD_ERA = '2025-11-25';
const NEW_ERA = '2026-07-28';

test('one profile, every combination of era and transport: one turn lists them all and calls work on each, in the era each speaks', async (t) => {
  const tag = useFixtureTag(t);
  const oldHttp = await startHttpFixture([], { tag });
  t.teardown(() => oldHttp.stop());
  const host = createHost({
    profiles: {
      p: {
        mcpServers: {
          oldStdio: stdioFixtureConfig([], { tag }),
          dualStdio: eraFixtureConfig(['--legacy', 'serve'], { tag }),
          newStdio: { ...eraFixtureConfig(['--legacy', 'reject'], { tag }), protocol: NEW_ERA },
          autoStdio: { ...eraFixtureConfig(['--legacy', 'reject'], { tag }), protocol: 'auto' },
          oldHttp: { url: oldHttp.url },
          dualHttp: await eraHttp(t, 'serve', tag),
          newHttp: await eraHttp(t, 'reject', tag),
        },
      },
    },
  });
  t.teardown(() => host.close());
  const view = await host.ready('p');
  t.is(view.status, 'ready', JSON.stringify(view.servers));
  const eras = Object.fromEntries(Object.entries(view.servers).map(([name, server]) => [name, server.status === 'ready' ? server.protocolVersion : server.status]));
  t.deepEqual(eras, {
    oldStdio: OLD_ERA,
    dualStdio: OLD_ERA, // stdio defaults to the old era: no probe, no second process
    newStdio: NEW_ERA,
    autoStdio: NEW_ERA,
    oldHttp: OLD_ERA, // probed; the old server refused `server/discover`, the client fell back
    dualHttp: NEW_ERA, // probed; speaks both, so the newer
    newHttp: NEW_ERA,
  });

  const turn = await host.beginTurn('p');
  for (const server of ['oldStdio', 'dualStdio', 'newStdio', 'autoStdio', 'oldHttp', 'dualHttp', 'newHttp']) {
    t.true(turn.tools.some((tool) => tool.name === `mcp__${server}__echo`), `${server} in the turn`);
    t.is(textOf(await turn.callTool(`mcp__${server}__echo`, { text: server })), server, server);
  }
});

test('a new-era-only stdio server left at the default era fails alone, naming the setting that would reach it', async (t) => {
  const tag = useFixtureTag(t);
  const host = createHost({ profiles: { p: { mcpServers: { fine: stdioFixtureConfig([], { tag }), newOnly: eraFixtureConfig(['--legacy', 'reject'], { tag }) } } } });
  t.teardown(() => host.close());
  const view = await host.ready('p');
  t.is(view.status, 'degraded');
  t.is(view.servers.fine?.status, 'ready');
  const server = view.servers.newOnly;
  if (server?.status !== 'failed') return t.fail(JSON.stringify(server));
  t.is(server.kind, 'protocol', 'a refusal of the version is neither an exit nor a timeout');
  t.is(server.message, 'the server does not speak MCP 2025-11-25 (it speaks 2026-07-28): set "protocol": "2026-07-28" (or "auto") on this server to speak its era');
});

test('the era of each server is probed once: a restarted host with the same protocolCache adopts it (no probe again, sessions included; a session that adopted it checks liveness with server/discover)', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await scratch(t);
  const record = path.join(dir, 'new-http.jsonl');
  const cache = path.join(dir, 'eras.json');
  const newHttp = await eraHttp(t, 'reject', tag, ['--record', record]);
  const oldHttp = await startHttpFixture([], { tag });
  t.teardown(() => oldHttp.stop());
  const profiles = { p: { mcpServers: { newHttp, oldHttp: { url: oldHttp.url } } } };

  const first = createHost({ profiles, protocolCache: cache });
  const firstView = await first.ready('p');
  t.is(firstView.status, 'ready', JSON.stringify(firstView.servers));
  t.is(textOf(await (await first.beginTurn('p')).callTool('mcp__newHttp__echo', { text: 'one' })), 'one');
  t.is(textOf(await (await first.beginTurn('p')).callTool('mcp__oldHttp__echo', { text: 'one' })), 'one');
  t.like(first.stats().protocolEras, { entries: 2, stale: 0 });
  t.false('fileError' in first.stats().protocolEras);
  await first.close();
  const firstRun = await discoverRequests(record);
  const probesOfNew = firstRun.probes;
  const probesOfOld = (await oldHttp.stats()).discovers;
  t.is(probesOfNew, 1, 'discovery probed the new-era server once; its session adopted the verdict');
  t.is(probesOfOld, 1, 'discovery probed the old-era server once; its session adopted the verdict');
  const stored = JSON.parse(await readFile(cache, 'utf8')) as { verdicts: Record<string, { era: string }> };
  t.deepEqual(Object.values(stored.verdicts).map((verdict) => verdict.era).sort(), ['legacy', 'modern']);

  const second = createHost({ profiles, protocolCache: cache });
  t.teardown(() => second.close());
  const view = await second.ready('p');
  t.is(view.servers.newHttp?.status === 'ready' && view.servers.newHttp.protocolVersion, NEW_ERA);
  t.is(view.servers.oldHttp?.status === 'ready' && view.servers.oldHttp.protocolVersion, OLD_ERA);
  const turn = await second.beginTurn('p');
  t.is(textOf(await turn.callTool('mcp__newHttp__echo', { text: 'two' })), 'two');
  t.is(textOf(await turn.callTool('mcp__oldHttp__echo', { text: 'two' })), 'two');
  const secondRun = await discoverRequests(record);
  t.is(secondRun.probes, probesOfNew, 'the restarted host did not probe the new-era server');
  t.true(secondRun.livenessChecks > firstRun.livenessChecks, 'its session, which adopted the verdict, asked server/discover whether the server is there');
  t.is((await oldHttp.stats()).discovers, probesOfOld, 'nor the old-era one');
});

test('a cached era the server no longer speaks is dropped at once: the same attempt probes again and the server works', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await scratch(t);
  const cache = path.join(dir, 'eras.json');
  const newHttp = await eraHttp(t, 'reject', tag);
  // What a host would have cached while this URL was served by an old-era server.
  const key = serverFingerprint({ name: 's', transport: 'http', url: newHttp.url, headers: {}, disabled: false, share: false, shareDiscovery: true });
  await writeFile(cache, JSON.stringify({ format: 1, verdicts: { [key]: { era: 'legacy' } } }));

  const host = createHost({ profiles: { p: { mcpServers: { s: newHttp } } }, protocolCache: cache });
  t.teardown(() => host.close());
  const view = await host.ready('p');
  t.is(view.servers.s?.status === 'ready' && view.servers.s.protocolVersion, NEW_ERA, JSON.stringify(view.servers.s));
  const stored = JSON.parse(await readFile(cache, 'utf8')) as { verdicts: Record<string, { era: string }> };
  t.is(stored.verdicts[key]?.era, 'modern', 'the stale verdict was replaced by what the probe found');
  t.is(textOf(await (await host.beginTurn('p')).callTool('mcp__s__echo', { text: 'works' })), 'works');
});
