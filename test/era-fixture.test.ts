/**
 * The v2-SDK era fixture (`test/fixtures/era-server.ts`) against the bare v2 client
 * (`@modelcontextprotocol/client`), in both protocol eras and on both transports: what its flags
 * and tools promise the supervision tests is what a real client observes.
 *
 * Era `legacy` is the client's `versionNegotiation: { mode: 'legacy' }` (`initialize`, 2025-11-25);
 * era `modern` is `{ mode: 'auto' }`, which the dual-era fixture answers with 2026-07-28.
 *
 * Serial: every test starts server processes at normal priority; all of them at once starve the
 * discovery (at nice 19) of the test files running beside this one into connect timeouts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { Client, SdkError, SdkErrorCode, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { ERA_FIXTURE, FIXTURE_TAG_ENV, startListeningFixture, useFixtureTag } from './helpers/fixtures.js';
import { guardOpenHandles } from './helpers/processes.js';

guardOpenHandles(test);

type Era = 'legacy' | 'modern';
type Kind = 'stdio' | 'http';
const ERAS: readonly Era[] = ['legacy', 'modern'];
const KINDS: readonly Kind[] = ['stdio', 'http'];
const VERSION: Record<Era, string> = { legacy: '2025-11-25', modern: '2026-07-28' };

/** One line of the fixture's `--record` file. */
interface RecordLine {
  method?: string | null;
  id?: string | number | null;
  tool?: string | null;
  response?: 'result' | 'error';
  executed?: string;
  dropped?: string;
}

interface Connected {
  client: Client;
  /** The lines of the record file so far. */
  record(): Promise<RecordLine[]>;
  /** The HTTP endpoint (`http` only), for a second client. */
  url?: URL;
}

interface ConnectOptions {
  flags?: readonly string[];
  /** Declares the `elicitation` capability and answers with this. */
  elicit?: (request: ElicitRequest) => ElicitResult;
  maxRounds?: number;
}

/** Starts the fixture (HTTP) or lets the client spawn it (stdio), with `--record`, and connects a bare v2 client. */
async function connect(t: ExecutionContext, kind: Kind, era: Era, options: ConnectOptions = {}): Promise<Connected> {
  const tag = useFixtureTag(t, 'era');
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-era-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const recordPath = path.join(dir, 'record.jsonl');
  const flags = ['--record', recordPath, ...(options.flags ?? [])];
  let url: URL | undefined;
  let transport: StdioClientTransport | StreamableHTTPClientTransport;
  if (kind === 'http') {
    const fixture = await startListeningFixture(ERA_FIXTURE, ['--http', ...flags], { tag });
    t.teardown(() => fixture.proc.stop());
    url = new URL(`${fixture.base}/mcp`);
    transport = new StreamableHTTPClientTransport(url);
  } else {
    // The client spawns the fixture (and, in `auto` mode, a short-lived probe sibling with the
    // same arguments: same record file) and kills it on close.
    transport = new StdioClientTransport({ command: process.execPath, args: [ERA_FIXTURE, ...flags], env: { [FIXTURE_TAG_ENV]: tag }, stderr: 'pipe' });
  }
  const client = new Client(
    { name: 'era-fixture-test', version: '0.0.0' },
    {
      capabilities: options.elicit === undefined ? {} : { elicitation: { form: {} } },
      versionNegotiation: { mode: era === 'legacy' ? 'legacy' : 'auto' },
      ...(options.maxRounds !== undefined && { inputRequired: { maxRounds: options.maxRounds } }),
    },
  );
  const elicit = options.elicit;
  if (elicit !== undefined) client.setRequestHandler('elicitation/create', async (request) => elicit(request));
  t.teardown(() => client.close());
  await client.connect(transport);
  t.is(client.getNegotiatedProtocolVersion(), VERSION[era], 'the era the test asked for');
  const record = async (): Promise<RecordLine[]> => {
    const text = await readFile(recordPath, 'utf8').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? '' : Promise.reject(error)));
    return text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as RecordLine);
  };
  return { client, record, ...(url && { url }) };
}

function textOf(result: { content?: unknown }): string {
  const first = Array.isArray(result.content) ? (result.content[0] as { type?: string; text?: string } | undefined) : undefined;
  return first?.type === 'text' ? (first.text ?? '') : '';
}

const calls = (lines: RecordLine[], tool: string) => lines.filter((line) => line.method === 'tools/call' && line.tool === tool);
const runs = (lines: RecordLine[], tool: string) => lines.filter((line) => line.executed === tool);

/** Rejects if `promise` has not settled within `ms` (a bound on an awaited event, not a sleep). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

const ACCEPT = (): ElicitResult => ({ action: 'accept', content: { ok: true } });

for (const kind of KINDS) {
  for (const era of ERAS) {
    test.serial(`${kind}, ${era} era: --record lists every message (the era probe included) and each run of lookup and charge; hints as declared`, async (t) => {
      const { client, record } = await connect(t, kind, era);
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((tool) => [tool.name, tool]));
      t.deepEqual([...byName.keys()].sort(), ['add_tool', 'charge', 'confirm', 'echo', 'lookup', 'never_done']);
      t.deepEqual(byName.get('lookup')?.annotations, { readOnlyHint: true });
      t.is(byName.get('charge')?.annotations, undefined, 'charge: neither read-only nor idempotent');
      t.is(textOf(await client.callTool({ name: 'lookup', arguments: { key: 'k1' } })), 'found k1');
      t.is(textOf(await client.callTool({ name: 'charge', arguments: { amount: 12.5 } })), 'charged 12.5');

      const lines = await record();
      const probes = lines.filter((line) => line.method === 'server/discover' || line.method === 'initialize');
      if (era === 'legacy') {
        t.deepEqual(probes, [{ method: 'initialize', id: 0 }]);
        t.true(lines.some((line) => line.method === 'notifications/initialized' && line.id === null));
      } else {
        t.is(probes.length, 1, JSON.stringify(lines));
        t.is(probes[0]?.method, 'server/discover');
        t.false(lines.some((line) => line.method === 'notifications/initialized'));
      }
      t.is(lines.filter((line) => line.method === 'tools/list').length, 1);
      for (const [tool, count] of [
        ['lookup', 1],
        ['charge', 1],
      ] as const) {
        const received = calls(lines, tool);
        t.is(received.length, count, tool);
        t.deepEqual(
          runs(lines, tool).map((line) => line.id),
          received.map((line) => line.id),
          `${tool}: executed under the id it was received with`,
        );
        t.true(lines.indexOf(received[0]!) < lines.indexOf(runs(lines, tool)[0]!), `${tool}: receipt before execution`);
      }
    });
  }
}

for (const era of ERAS) {
  test.serial(`http, ${era} era: --drop-stream 2 runs the first two lookup/charge calls but kills their connection instead of answering; the third is answered`, async (t) => {
    const { client, record } = await connect(t, 'http', era, { flags: ['--drop-stream', '2'] });
    for (const [name, args] of [
      ['lookup', { key: 'a' }],
      ['charge', { amount: 1 }],
    ] as const) {
      const error = await t.throwsAsync(client.callTool({ name, arguments: args }, { timeout: 5000 }), undefined, `${name}: no answer`);
      // The socket dies before the status line: the client's fetch itself fails, at once.
      t.is((error?.cause as { code?: string } | undefined)?.code, 'UND_ERR_SOCKET', String(error));
    }
    t.is(textOf(await client.callTool({ name: 'lookup', arguments: { key: 'b' } }, { timeout: 5000 })), 'found b');
    t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'still here' } })), 'still here');

    const lines = await record();
    for (const tool of ['lookup', 'charge']) {
      t.deepEqual(
        runs(lines, tool).map((line) => line.id),
        calls(lines, tool).map((line) => line.id),
        `${tool}: every received call ran, the dropped ones included`,
      );
    }
    t.is(runs(lines, 'lookup').length, 2);
    t.is(runs(lines, 'charge').length, 1);
    const dropped = lines.filter((line) => line.dropped !== undefined);
    t.deepEqual(dropped, [
      { dropped: 'lookup', id: calls(lines, 'lookup')[0]?.id },
      { dropped: 'charge', id: calls(lines, 'charge')[0]?.id },
    ]);
    for (const line of dropped) t.true(lines.indexOf(runs(lines, line.dropped!)[0]!) < lines.indexOf(line), `${line.dropped}: ran before its answer was dropped`);
    t.is(calls(lines, 'lookup').length + calls(lines, 'charge').length, 3, 'no call was re-sent by the client');
  });
}

test.serial('stdio: --drop-stream needs --http (the fixture refuses to start)', async (t) => {
  const tag = useFixtureTag(t, 'era');
  const transport = new StdioClientTransport({ command: process.execPath, args: [ERA_FIXTURE, '--drop-stream', '1'], env: { [FIXTURE_TAG_ENV]: tag }, stderr: 'pipe' });
  const client = new Client({ name: 'era-fixture-test', version: '0.0.0' });
  t.teardown(() => client.close());
  await t.throwsAsync(client.connect(transport, { timeout: 10_000 }));
});

/**
 * Calls `confirm` with a handler that accepts; checks the handler was asked once, with the
 * fixture's message and schema, and the answer; returns the server's record.
 */
async function confirmAccepted(t: ExecutionContext, kind: Kind, era: Era): Promise<RecordLine[]> {
  const seen: ElicitRequest['params'][] = [];
  const { client, record } = await connect(t, kind, era, {
    elicit: (request) => {
      seen.push(request.params);
      return ACCEPT();
    },
  });
  t.is(textOf(await client.callTool({ name: 'confirm', arguments: { what: 'deploy' } })), 'confirmed deploy: {"ok":true}');
  t.is(seen.length, 1);
  t.like(seen[0], { message: 'Proceed with deploy?', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } });
  return record();
}

for (const kind of KINDS) {
  test.serial(`${kind}, modern era: confirm comes back input_required and completes on the client's retry with inputResponses (a fresh request id)`, async (t) => {
    const lines = await confirmAccepted(t, kind, 'modern');
    const received = calls(lines, 'confirm');
    t.is(received.length, 2, 'the first call and its retry');
    t.not(received[0]?.id, received[1]?.id);
    t.deepEqual(
      runs(lines, 'confirm').map((line) => line.id),
      received.map((line) => line.id),
    );
    t.false(lines.some((line) => line.method === null), 'no server→client request was answered: nothing but requests came in');
  });

  test.serial(`${kind}, modern era: a declined confirm answers "declined"`, async (t) => {
    const { client } = await connect(t, kind, 'modern', { elicit: () => ({ action: 'decline' }) });
    t.is(textOf(await client.callTool({ name: 'confirm', arguments: { what: 'deploy' } })), 'declined deploy');
  });

  test.serial(`${kind}, modern era: never_done keeps answering input_required until the client's round bound`, async (t) => {
    let asked = 0;
    const { client, record } = await connect(t, kind, 'modern', {
      maxRounds: 2,
      elicit: () => {
        asked += 1;
        return ACCEPT();
      },
    });
    const error = await t.throwsAsync(client.callTool({ name: 'never_done', arguments: {} }), { instanceOf: SdkError });
    t.is((error as SdkError | undefined)?.code, SdkErrorCode.InputRequiredRoundsExceeded);
    t.is(asked, 2);
    const received = calls(await record(), 'never_done');
    t.is(received.length, 3, 'the call and two retries');
    t.is(new Set(received.map((line) => line.id)).size, 3);
  });
}

test.serial('stdio, legacy era: confirm sends a real elicitation/create; the SDK re-enters the handler with the answer under the same request id', async (t) => {
  const lines = await confirmAccepted(t, 'stdio', 'legacy');
  const received = calls(lines, 'confirm');
  t.is(received.length, 1);
  t.deepEqual(
    runs(lines, 'confirm').map((line) => line.id),
    [received[0]?.id, received[0]?.id],
  );
  t.is(lines.filter((line) => line.method === null && line.response === 'result').length, 1, "the client's answer to elicitation/create");
});

test.serial('stdio, legacy era: never_done fails as an isError result after the server shim’s 8 rounds', async (t) => {
  let asked = 0;
  const { client } = await connect(t, 'stdio', 'legacy', {
    elicit: () => {
      asked += 1;
      return ACCEPT();
    },
  });
  const result = await client.callTool({ name: 'never_done', arguments: {} });
  t.true(result.isError);
  t.regex(textOf(result), /still required input after 8 rounds/);
  t.is(asked, 8);
});

test.serial('http, legacy era: the stateless old-era leg cannot ask the client — confirm answers isError without a request', async (t) => {
  let asked = 0;
  const { client, record } = await connect(t, 'http', 'legacy', {
    elicit: () => {
      asked += 1;
      return ACCEPT();
    },
  });
  const result = await client.callTool({ name: 'confirm', arguments: { what: 'deploy' } });
  t.true(result.isError);
  t.regex(textOf(result), /per-request legacy serving cannot receive server-to-client requests/);
  t.is(asked, 0);
  t.is(runs(await record(), 'confirm').length, 1);
});

for (const kind of KINDS) {
  test.serial(`${kind}: --cache-ttl puts ttlMs on new-era list results, and the client's cache then serves tools/list`, async (t) => {
    const { client, record } = await connect(t, kind, 'modern', { flags: ['--cache-ttl', '60000'] });
    const raw = (await client.request({ method: 'tools/list' })) as unknown as Record<string, unknown>;
    t.is(raw.ttlMs, 60_000);
    t.is(raw.cacheScope, 'public');
    await client.listTools();
    await client.listTools();
    t.is((await record()).filter((line) => line.method === 'tools/list').length, 2, 'the raw request and one fetch: the second listTools came from the cache');
  });

  test.serial(`${kind}: without --cache-ttl new-era list results say ttlMs 0, and every listTools goes to the server`, async (t) => {
    const { client, record } = await connect(t, kind, 'modern');
    const raw = (await client.request({ method: 'tools/list' })) as unknown as Record<string, unknown>;
    t.is(raw.ttlMs, 0);
    t.is(raw.cacheScope, 'private');
    await client.listTools();
    await client.listTools();
    t.is((await record()).filter((line) => line.method === 'tools/list').length, 3);
  });

  test.serial(`${kind}: --cache-ttl leaves old-era list results alone`, async (t) => {
    const { client } = await connect(t, kind, 'legacy', { flags: ['--cache-ttl', '60000'] });
    const raw = (await client.request({ method: 'tools/list' })) as unknown as Record<string, unknown>;
    t.false('ttlMs' in raw);
    t.false('cacheScope' in raw);
  });
}

for (const kind of KINDS) {
  for (const era of ERAS) {
    test.serial(`${kind}, ${era} era: add_tool registers extra_1, extra_2 and announces tools/list_changed`, async (t) => {
      const { client, record, url } = await connect(t, kind, era);
      let changed = 0;
      let onChange: () => void = () => {};
      client.setNotificationHandler('notifications/tools/list_changed', () => {
        changed += 1;
        onChange();
      });
      if (era === 'modern') {
        const subscription = await client.listen({ toolsListChanged: true });
        t.teardown(() => subscription.close());
        t.deepEqual(subscription.honoredFilter, { toolsListChanged: true });
      }
      for (const k of [1, 2]) {
        const announced = new Promise<void>((resolve) => {
          onChange = resolve;
        });
        t.is(textOf(await client.callTool({ name: 'add_tool', arguments: {} })), `added extra_${k}`);
        await within(announced, 10_000, `list_changed after add_tool #${k}`);
        t.is(changed, k);
      }
      const names = (await client.listTools()).tools.map((tool) => tool.name);
      t.true(names.includes('extra_1') && names.includes('extra_2'), names.join(' '));
      t.is(textOf(await client.callTool({ name: 'extra_2', arguments: {} })), 'extra_2');
      t.is(runs(await record(), 'extra_2').length, 1);

      if (url !== undefined) {
        // A fresh client (fresh per-request servers over HTTP) sees the added tools too.
        const other = new Client({ name: 'era-fixture-test-2', version: '0.0.0' }, { versionNegotiation: { mode: era === 'legacy' ? 'legacy' : 'auto' } });
        t.teardown(() => other.close());
        await other.connect(new StreamableHTTPClientTransport(url));
        const otherNames = (await other.listTools()).tools.map((tool) => tool.name);
        t.true(otherNames.includes('extra_1') && otherNames.includes('extra_2'), otherNames.join(' '));
      }
    });
  }
}

test.serial('http, modern era: without subscriptions/listen no list_changed reaches the client', async (t) => {
  const { client, record } = await connect(t, 'http', 'modern');
  let changed = 0;
  client.setNotificationHandler('notifications/tools/list_changed', () => {
    changed += 1;
  });
  t.is(textOf(await client.callTool({ name: 'add_tool', arguments: {} })), 'added extra_1');
  // The call's answer has arrived: anything sent on its exchange came before it.
  t.is(changed, 0);
  t.false((await record()).some((line) => line.method === 'subscriptions/listen'));
});
