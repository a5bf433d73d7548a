/**
 * Supervised calls in the 2026-07-28 era, against new-era-only servers built with the v2 server
 * SDK (real processes over Streamable HTTP and stdio), judged by what the server recorded:
 * - a dropped answer stream: a read-only tool is re-issued once, with a new request id, and
 *   succeeds; a tool with no hints is not repeated and is OUTCOME_UNCERTAIN (it ran once);
 * - `input_required`: answered through the host's elicitation handler and retried (a new id per
 *   round); without a handler, an error naming what the server needed; a server that never stops
 *   asking is given up after the round bound;
 * - `list_changed` arrives over the subscription the session opens, and the next turn sees it.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { type Host, type HostOptions, createHost, isMcpSupervisorError } from '../../src/index.js';
import { ERA_FIXTURE, eraFixtureConfig, startListeningFixture, useFixtureTag } from '../helpers/fixtures.js';
import { ManualClock } from '../helpers/clock.js';
import { guardOpenHandles, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

type Line = { method?: string | null; id?: string | number | null; tool?: string; executed?: string; dropped?: string; logLevel?: string };

async function recorded(file: string): Promise<Line[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Line);
}

/** A new-era-only HTTP server recording into a fresh file. */
async function newEraServer(t: ExecutionContext, flags: string[] = []): Promise<{ url: string; record: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-new-era-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const record = path.join(dir, 'record.jsonl');
  const fixture = await startListeningFixture(ERA_FIXTURE, ['--http', '--legacy', 'reject', '--record', record, ...flags], { tag: useFixtureTag(t) });
  t.teardown(() => fixture.proc.stop());
  return { url: `${fixture.base}/mcp`, record };
}

function host(t: ExecutionContext, servers: Record<string, unknown>, options: Partial<HostOptions> = {}): Host {
  const made = createHost({ profiles: { p: { mcpServers: servers } }, ...options });
  t.teardown(() => made.close());
  return made;
}

async function failureOf(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (isMcpSupervisorError(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected the call to fail');
}

test('a dropped answer stream: the read-only tool is re-issued once with a new request id and succeeds; the server ran it twice', async (t) => {
  const server = await newEraServer(t, ['--drop-stream', '1']);
  const h = host(t, { s: { url: server.url } });
  t.is((await h.ready('p')).servers.s?.status, 'ready');
  const result = await (await h.beginTurn('p')).callTool('mcp__s__lookup', { key: 'k' });
  t.is(textOf(result), 'found k');
  const lines = await recorded(server.record);
  const calls = lines.filter((line) => line.method === 'tools/call' && line.tool === 'lookup').map((line) => line.id);
  const executions = lines.filter((line) => line.executed === 'lookup').map((line) => line.id);
  t.is(calls.length, 2, 'sent twice');
  t.not(calls[0], calls[1], 're-issued with a new request id, as the 2026-07-28 era requires');
  t.deepEqual(executions, calls, 'the server ran it once per request');
  t.is(lines.filter((line) => line.dropped === 'lookup').length, 1);
});

test('a dropped answer stream: a tool with no hints is not repeated — OUTCOME_UNCERTAIN, and the server ran it exactly once', async (t) => {
  const server = await newEraServer(t, ['--drop-stream', '1']);
  const h = host(t, { s: { url: server.url } });
  await h.ready('p');
  const failure = await failureOf((await h.beginTurn('p')).callTool('mcp__s__charge', { amount: 5 }));
  t.is(failure.code, 'OUTCOME_UNCERTAIN', failure.message);
  t.regex(failure.message, /may or may not have taken effect/);
  const lines = await recorded(server.record);
  t.is(lines.filter((line) => line.method === 'tools/call' && line.tool === 'charge').length, 1, 'never sent again');
  t.is(lines.filter((line) => line.executed === 'charge').length, 1);
});

test('input_required with an elicitation handler: the handler answers (told the profile and server), the call is retried on a new id and completes', async (t) => {
  const server = await newEraServer(t);
  const asked: { message: string; profile: string; server: string }[] = [];
  const h = host(t, { s: { url: server.url } }, {
    client: {
      elicitation: async (params, ctx) => {
        asked.push({ message: params.message, profile: ctx.profile, server: ctx.server });
        return { action: 'accept', content: { ok: true } };
      },
    },
  });
  await h.ready('p');
  const result = await (await h.beginTurn('p')).callTool('mcp__s__confirm', { what: 'the order' });
  t.is(textOf(result), 'confirmed the order: {"ok":true}');
  t.deepEqual(asked, [{ message: 'Proceed with the order?', profile: 'p', server: 's' }]);
  const calls = (await recorded(server.record)).filter((line) => line.method === 'tools/call' && line.tool === 'confirm').map((line) => line.id);
  t.is(calls.length, 2, 'the first round asked for input, the second carried the answer');
  t.not(calls[0], calls[1]);
});

test('input_required without a handler: an honest error naming what the server needed; nothing is retried', async (t) => {
  const server = await newEraServer(t);
  const h = host(t, { s: { url: server.url } });
  await h.ready('p');
  const failure = await failureOf((await h.beginTurn('p')).callTool('mcp__s__confirm', { what: 'the order' }));
  t.is(failure.code, 'PROTOCOL_ERROR');
  t.is(
    failure.message,
    'The MCP server "s" needs input to complete "confirm" that this host cannot give: it asked for elicitation/create, and no handler for it is configured (client options). The call did not complete.',
  );
  t.is((await recorded(server.record)).filter((line) => line.method === 'tools/call').length, 1);
});

test('a server that never stops asking for input is given up after 10 rounds, and says so', async (t) => {
  const server = await newEraServer(t);
  let rounds = 0;
  const h = host(t, { s: { url: server.url } }, { client: { elicitation: async () => (rounds++, { action: 'accept', content: { ok: true } }) } });
  await h.ready('p');
  const failure = await failureOf((await h.beginTurn('p')).callTool('mcp__s__never_done', {}));
  t.is(failure.code, 'PROTOCOL_ERROR');
  t.regex(failure.message, /^The MCP server "s" kept asking for more input while running "never_done": still incomplete after 10 rounds/);
  t.is(rounds, 10);
  t.is((await recorded(server.record)).filter((line) => line.method === 'tools/call').length, 11, 'the first request and one per answered round');
});

for (const transport of ['http', 'stdio'] as const) {
  test(`list_changed over the session's subscriptions/listen (${transport}): a tool the server adds is in the next turn`, async (t) => {
    const config = transport === 'http' ? { url: (await newEraServer(t)).url } : { ...eraFixtureConfig(['--legacy', 'reject'], { tag: useFixtureTag(t) }), protocol: '2026-07-28' };
    const h = host(t, { s: config });
    await h.ready('p');
    const turn = await h.beginTurn('p');
    t.false(turn.tools.some((tool) => tool.name === 'mcp__s__extra_1'));
    const changed = new Promise<void>((resolve) => h.on('tools:changed', (event) => event.server === 's' && resolve()));
    t.is(textOf(await turn.callTool('mcp__s__add_tool', {})), 'added extra_1');
    await changed;
    const next = await h.beginTurn('p');
    t.true(next.tools.some((tool) => tool.name === 'mcp__s__extra_1'), 'the next turn lists the new tool');
    t.false(turn.tools.some((tool) => tool.name === 'mcp__s__extra_1'), 'the earlier turn keeps its snapshot');
    t.is(textOf(await next.callTool('mcp__s__extra_1', {})), 'extra_1');
  });
}

test('a tool list the server vouches for with ttlMs is re-discovered when it expires; a server without ttlMs is not', async (t) => {
  const vouching = await newEraServer(t, ['--cache-ttl', '30000']);
  const plain = await newEraServer(t);
  const clock = new ManualClock(Date.now());
  const h = host(t, { vouching: { url: vouching.url }, plain: { url: plain.url } }, { clock, sessions: { eager: false } });
  const view = await h.ready('p');
  t.is(view.status, 'ready');
  t.is(view.refreshAt, (view.settledAt ?? Number.NaN) + 30_000, 'the refresh is due when the list expires');
  const lists = async (file: string): Promise<number> => (await recorded(file)).filter((line) => line.method === 'tools/list').length;
  t.deepEqual([await lists(vouching.record), await lists(plain.record)], [1, 1]);
  const settledAgain = new Promise<void>((resolve) => h.on('discovery:settled', () => resolve()));
  await clock.advance(30_000);
  await settledAgain;
  t.is(await lists(vouching.record), 2, 're-discovered once its list expired');
  t.is(await lists(plain.record), 1, 'the server without ttlMs was left alone');
  t.is((await h.ready('p')).servers.vouching?.status, 'ready');
});

test('client.logLevel travels with each call in the 2026-07-28 era (it has no logging/setLevel)', async (t) => {
  const server = await newEraServer(t);
  const h = host(t, { s: { url: server.url } }, { client: { logLevel: 'warning' } });
  await h.ready('p');
  t.is(textOf(await (await h.beginTurn('p')).callTool('mcp__s__echo', { text: 'x' })), 'x');
  const lines = await recorded(server.record);
  t.deepEqual(lines.filter((line) => line.method === 'tools/call').map((line) => line.logLevel), ['warning']);
  t.false(lines.some((line) => line.method === 'logging/setLevel'));
});
