/**
 * Proves that every fixture misbehaviour is real: real processes, the real SDK client, no
 * mocks. The library's own tests rely on these fixtures behaving exactly as documented, so a
 * fixture that quietly stopped misbehaving would turn their failure-path tests into no-ops.
 *
 * Every test takes a fresh tag from the leak guard first, so it fails if it leaves anything
 * running.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ClientOptions } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, ErrorCode, LATEST_PROTOCOL_VERSION, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { BASE_TOOL_NAMES, ELICIT_MESSAGE, ELICIT_SCHEMA, NO_ELICITATION_TEXT } from './fixtures/tools.js';
import {
  refusedUrl,
  reapTag,
  startHttpFixture,
  startStdioFixture,
  stdioFixtureConfig,
  useFixtureTag,
  newFixtureTag,
  probePort,
} from './helpers/fixtures.js';
import { killTree, ownProcessGroup, pidsInGroup, pidsWithTag, pollUntil, procState, readStat, signal } from './helpers/processes.js';

const clientInfo = { name: 'fixtures-test', version: '0.0.0' };

/** A scratch directory removed when the test ends. */
function scratch(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-fixture-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Connects the SDK's own StdioClientTransport (it spawns the fixture itself, as users would). */
async function connectStdio(t: ExecutionContext, flags: string[], tag: string, env?: Record<string, string>): Promise<Client> {
  const client = new Client(clientInfo);
  await client.connect(new StdioClientTransport({ ...stdioFixtureConfig(flags, { tag, env }), stderr: 'pipe' }));
  t.teardown(() => client.close());
  return client;
}

async function listAllTools(client: Client): Promise<{ tools: Tool[]; pages: number }> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
    pages++;
  } while (cursor !== undefined);
  return { tools, pages };
}

function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((part) => part.text ?? '').join('');
}

test.serial('crash-loop fixture exits with code 1 within 1 s of spawn', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--crash-loop'], { tag });
  const exit = await fixture.exited;
  t.is(exit.code, 1);
  t.log(`spawn → exit: ${exit.elapsedMs.toFixed(0)} ms`);
  t.true(exit.elapsedMs < 1000, `exited after ${exit.elapsedMs.toFixed(0)} ms`);
  t.regex(await fixture.waitForStderr(/crash-loop: start 1/), /exits with code 1/);
});

test.serial('exit-at-start exits with its code and says so on stderr', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--stderr', 'hello from the fixture', '--exit-at-start', '7'], { tag });
  const exit = await fixture.exited;
  t.is(exit.code, 7);
  const stderr = await fixture.waitForStderr(/exiting at start with code 7/);
  t.regex(stderr, /hello from the fixture/);
});

test('an unknown flag is a usage error (exit 64), not a healthy server', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--tols', '3'], { tag });
  t.is((await fixture.exited).code, 64);
  t.regex(await fixture.waitForStderr(/usage error/), /unknown flag "--tols"/);
});

test('healthy fixture: tools with annotations, prompt, resource, and every base tool works', async (t) => {
  const tag = useFixtureTag(t);
  const client = await connectStdio(t, ['--tools', '5'], tag);
  const { tools } = await client.listTools();
  t.deepEqual(tools.map((tool) => tool.name), [...BASE_TOOL_NAMES, 'gen_0', 'gen_1', 'gen_2', 'gen_3', 'gen_4']);
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  t.true(byName.get('echo')?.annotations?.readOnlyHint);
  t.true(byName.get('slow_read')?.annotations?.readOnlyHint);
  t.true(byName.get('add')?.annotations?.idempotentHint);
  t.is(byName.get('increment')?.annotations, undefined);
  t.is(byName.get('slow')?.annotations, undefined);

  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'hi');
  t.deepEqual((await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).structuredContent, { sum: 5 });
  t.deepEqual((await client.callTool({ name: 'increment', arguments: {} })).structuredContent, { value: 1 });
  t.deepEqual((await client.callTool({ name: 'increment', arguments: {} })).structuredContent, { value: 2 });
  t.is(textOf(await client.callTool({ name: 'slow', arguments: { ms: 20 } })), 'slept 20 ms');
  t.is(textOf(await client.callTool({ name: 'gen_4', arguments: { value: 'x' } })), 'gen_4:x');
  const failed = await client.callTool({ name: 'fail', arguments: {} });
  t.true(failed.isError);
  t.deepEqual((await client.callTool({ name: 'calls', arguments: {} })).structuredContent, { calls: 8 });
  const ids = (await client.callTool({ name: 'pid', arguments: {} })).structuredContent as { pid: number; ppid: number; pgid: number };
  t.is(ids.ppid, process.pid, 'the SDK transport spawned it directly');
  t.is(ids.pgid, ownProcessGroup(), 'StdioClientTransport does not detach: same group as the test');
  t.deepEqual(pidsWithTag(tag), [ids.pid]);

  t.deepEqual((await client.listPrompts()).prompts.map((prompt) => prompt.name), ['greeting']);
  const prompt = await client.getPrompt({ name: 'greeting', arguments: { name: 'Ada' } });
  t.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'Hello, Ada!' });
  const resources = (await client.listResources()).resources;
  t.deepEqual(resources.map((resource) => resource.uri), ['fixture://info']);
  const info = await client.readResource({ uri: 'fixture://info' });
  t.like(JSON.parse((info.contents[0] as { text: string }).text), { pid: ids.pid });

  await client.close();
  t.is(procState(ids.pid) === 'alive', false, 'closing stdin ends the fixture');
});

test('--no-extras offers tools only', async (t) => {
  const tag = useFixtureTag(t);
  const client = await connectStdio(t, ['--no-extras'], tag);
  t.deepEqual(client.getServerCapabilities(), { tools: { listChanged: true } });
});

test('--page-size paginates tools/list and the pages add up to the whole catalog', async (t) => {
  const tag = useFixtureTag(t);
  const paged = await connectStdio(t, ['--tools', '23', '--page-size', '5'], tag);
  const unpaged = await connectStdio(t, ['--tools', '23'], tag);
  const { tools, pages } = await listAllTools(paged);
  const all = (await unpaged.listTools()).tools;
  t.is(all.length, BASE_TOOL_NAMES.length + 23);
  t.is(pages, Math.ceil(all.length / 5));
  t.deepEqual(tools.map((tool) => tool.name), all.map((tool) => tool.name));
  t.is((await paged.listTools()).tools.length, 5);
  const invalid = await t.throwsAsync(paged.listTools({ cursor: 'not-a-cursor' }));
  t.is((invalid as McpError).code, ErrorCode.InvalidParams);
});

test('--output-schemas gives every generated tool a big output schema that its results satisfy', async (t) => {
  const tag = useFixtureTag(t);
  const client = await connectStdio(t, ['--tools', '3', '--output-schemas'], tag);
  const generated = (await client.listTools()).tools.filter((tool) => tool.name.startsWith('gen_'));
  t.is(generated.length, 3);
  for (const tool of generated) {
    t.true(Object.keys(tool.outputSchema?.properties ?? {}).length >= 20, `${tool.name} has a big schema`);
  }
  t.not(JSON.stringify(generated[0]?.outputSchema), JSON.stringify(generated[1]?.outputSchema), 'schemas differ per tool');
  // The client validates structuredContent against the cached (Ajv-compiled) schema.
  const result = await client.callTool({ name: 'gen_2', arguments: { value: 'v' } });
  t.like(result.structuredContent, { tool: 'gen_2', value: 'v', status: 'ok' });
});

test('--start-delay holds back the answer to initialize', async (t) => {
  const tag = useFixtureTag(t);
  const started = performance.now();
  const client = await connectStdio(t, ['--start-delay', '400'], tag);
  t.true(performance.now() - started >= 400);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'late' } })), 'late');
});

test('hang-initialize never answers initialize within 5 s, and stays alive', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--hang-initialize'], { tag });
  t.teardown(() => fixture.stop());
  await fixture.waitForStderr(/hanging/);
  const started = performance.now();
  const error = await t.throwsAsync(fixture.connect(undefined, { timeout: 5000 }));
  t.is((error as McpError).code, ErrorCode.RequestTimeout);
  t.true(performance.now() - started >= 5000);
  t.is(procState(fixture.pid), 'alive');
});

test('die-after-calls N answers N calls, then exits with code 3', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--die-after-calls', '2'], { tag });
  t.teardown(() => fixture.stop());
  const client = await fixture.connect();
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'one' } })), 'one');
  t.is(procState(fixture.pid), 'alive');
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'two' } })), 'two');
  t.is((await fixture.exited).code, 3);
  t.regex(await fixture.waitForStderr(/die-after-calls/), /answered 2 tools\/call/);
  await t.throwsAsync(client.callTool({ name: 'echo', arguments: { text: 'three' } }));
});

test('die-in-tool SIGKILLs the server mid-call: the call rejects, the side effect happened once', async (t) => {
  const tag = useFixtureTag(t);
  const sideEffects = join(scratch(t), 'side-effects.log');
  const fixture = await startStdioFixture(['--die-in-tool', 'increment'], {
    tag,
    env: { MCP_FIXTURE_SIDE_EFFECT_FILE: sideEffects },
  });
  t.teardown(() => fixture.stop());
  const client = await fixture.connect();
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'fine' } })), 'fine');
  const error = await t.throwsAsync(client.callTool({ name: 'increment', arguments: {} }));
  t.is((error as McpError).code, ErrorCode.ConnectionClosed);
  t.like(await fixture.exited, { code: null, signal: 'SIGKILL' });
  t.deepEqual(readFileSync(sideEffects, 'utf8').trim().split('\n'), [`${fixture.pid} increment 1`]);
});

test('crash-loop with --healthy-starts: healthy first, then dies right after the respawn', async (t) => {
  const tag = useFixtureTag(t);
  const state = join(scratch(t), 'starts');
  const flags = ['--crash-loop', '--state-file', state, '--healthy-starts', '1'];
  const first = await startStdioFixture(flags, { tag });
  t.teardown(() => first.stop());
  const client = await first.connect();
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'up' } })), 'up');
  await client.close(); // ends stdin: a healthy fixture exits 0
  t.is((await first.exited).code, 0);

  const second = await startStdioFixture(flags, { tag });
  const exit = await second.exited;
  // How fast it dies is pinned by the crash-loop test above; here: the second start crashes.
  t.is(exit.code, 1);
  t.is(readFileSync(state, 'utf8').trim(), '2');
});

test('wrapper: shell parent, server child and sleeper grandchild all tagged; group kill ends them all', async (t) => {
  const tag = useFixtureTag(t);
  const pidFile = join(scratch(t), 'pids');
  const fixture = await startStdioFixture(['--wrapper', '--pid-file', pidFile], { tag });
  t.teardown(() => fixture.stop());
  // Stdio passes through wrapper and shell: a full MCP session works.
  const client = await fixture.connect();
  const ids = (await client.callTool({ name: 'pid', arguments: {} })).structuredContent as { pid: number; ppid: number; pgid: number };

  const roles = new Map(readFileSync(pidFile, 'utf8').trim().split('\n').map((line) => {
    const [role = '', pid = ''] = line.split(' ');
    return [role, Number(pid)] as const;
  }));
  t.deepEqual([...roles.keys()].sort(), ['server', 'shell', 'sleeper', 'wrapper']);
  t.is(roles.get('wrapper'), fixture.pid);
  t.is(roles.get('server'), ids.pid);
  t.is(ids.ppid, roles.get('shell') ?? -1, 'the shell stays the parent (no exec)');
  t.is(ids.pgid, fixture.pgid);
  t.is(readStat(roles.get('sleeper') ?? 0)?.ppid, roles.get('shell'));
  const all = [...roles.values()].sort((a, b) => a - b);
  t.deepEqual(pidsWithTag(tag).sort((a, b) => a - b), all, 'every descendant inherits MCP_FIXTURE_TAG');
  t.deepEqual(pidsInGroup(fixture.pgid).sort((a, b) => a - b), all);

  await fixture.stop();
  for (const pid of all) t.not(procState(pid), 'alive', `pid ${pid} is dead`);
});

test('wrapper: signalling only the wrapper leaves the grandchild running, holding stdout open', async (t) => {
  const tag = useFixtureTag(t);
  const pidFile = join(scratch(t), 'pids');
  const fixture = await startStdioFixture(['--wrapper', '--pid-file', pidFile], { tag });
  t.teardown(() => fixture.stop());
  const client = await fixture.connect();
  await client.listTools();
  // The pid file is complete once the server answered (it records itself before connecting).
  const pids = readFileSync(pidFile, 'utf8');
  const sleeper = Number(/sleeper (\d+)/.exec(pids)?.[1]);
  const server = Number(/server (\d+)/.exec(pids)?.[1]);

  signal(fixture.pid, 'SIGTERM');
  t.is((await fixture.exited).code, 143, 'the wrapper mirrors the shell killed by SIGTERM');
  // Node destroys a child's stdin pipe when the child exits, so the orphaned server sees EOF
  // and exits by itself; the sleeper (stdin from /dev/null) does not.
  t.true(await pollUntil(() => procState(server) !== 'alive'), 'the server exits on stdin EOF');
  t.is(procState(sleeper), 'alive');
  t.is(readStat(sleeper)?.pgid, fixture.pgid);
  t.false(fixture.child.stdout?.readableEnded, 'the orphaned grandchild still holds the stdout pipe');

  const stdoutClosed = new Promise((resolve) => fixture.child.stdout?.once('close', resolve));
  t.deepEqual(await killTree(fixture.pgid), { signalled: 'SIGTERM', survivors: [] });
  await stdoutClosed;
  t.not(procState(sleeper), 'alive');
});

test('killTree escalates to SIGKILL for a fixture that ignores SIGTERM', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startStdioFixture(['--hang-initialize', '--ignore-sigterm'], { tag });
  await fixture.waitForStderr(/hanging/); // the SIGTERM handler is installed before this line
  signal(fixture.pid, 'SIGTERM');
  await fixture.waitForStderr(/ignoring SIGTERM/); // it handled SIGTERM and lives on
  t.is(procState(fixture.pid), 'alive');
  const result = await killTree(fixture.pgid, { graceMs: 300 });
  t.deepEqual(result, { signalled: 'SIGKILL', survivors: [] });
  t.is((await fixture.exited).signal, 'SIGKILL');
});

test('add_tool registers a tool and the client receives tools/list_changed', async (t) => {
  const tag = useFixtureTag(t);
  const client = await connectStdio(t, [], tag);
  const changed = new Promise<void>((resolve) => {
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve());
  });
  t.is(textOf(await client.callTool({ name: 'add_tool', arguments: { name: 'late_tool' } })), 'added late_tool');
  await changed;
  t.true((await client.listTools()).tools.some((tool) => tool.name === 'late_tool'));
  t.is(textOf(await client.callTool({ name: 'late_tool', arguments: {} })), 'late_tool called');
});

test('HTTP fixture: a forgotten session gets 404 "Session not found"', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--tools', '2'], { tag });
  t.teardown(() => fixture.stop());
  const transport = new StreamableHTTPClientTransport(new URL(fixture.url));
  const client = new Client(clientInfo);
  client.onerror = () => {}; // the standalone GET stream's reconnect attempts fail after the forget
  await client.connect(transport);
  t.teardown(() => client.close());
  t.is((await client.listTools()).tools.length, BASE_TOOL_NAMES.length + 2);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'http' } })), 'http');
  t.like(await fixture.stats(), { initializes: 1, toolCalls: 1, sessions: 1 });

  const staleId = transport.sessionId;
  t.is(await fixture.forgetSessions(), 1);
  const error = await t.throwsAsync(client.callTool({ name: 'echo', arguments: { text: 'again' } }));
  t.true(error instanceof StreamableHTTPError);
  t.is((error as StreamableHTTPError).code, 404);
  const raw = await fetch(fixture.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': staleId ?? '' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
  });
  t.is(raw.status, 404);
  t.like(await raw.json(), { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' } });

  // A fresh client gets a fresh session; the counters see the second initialize.
  const again = new Client(clientInfo);
  await again.connect(new StreamableHTTPClientTransport(new URL(fixture.url)));
  t.teardown(() => again.close());
  t.is(textOf(await again.callTool({ name: 'echo', arguments: { text: 'new' } })), 'new');
  t.like(await fixture.stats(), { initializes: 2, sessions: 1 });
});

test('HTTP fixture: 401 with WWW-Authenticate while auth is required', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--json-response'], { tag });
  t.teardown(() => fixture.stop());
  await fixture.setAuthRequired(true);
  const raw = await fetch(fixture.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.is(raw.status, 401);
  t.regex(raw.headers.get('www-authenticate') ?? '', /^Bearer /);
  const denied = new Client(clientInfo);
  const error = await t.throwsAsync(denied.connect(new StreamableHTTPClientTransport(new URL(fixture.url))));
  t.is((error as StreamableHTTPError).code, 401);
  t.like(await fixture.stats(), { initializes: 0 });

  await fixture.setAuthRequired(false);
  const client = new Client(clientInfo);
  await client.connect(new StreamableHTTPClientTransport(new URL(fixture.url)));
  t.teardown(() => client.close());
  t.deepEqual((await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })).structuredContent, { sum: 2 });
});

test('HTTP fixture: stop-listening closes the port and the process exits', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const client = new Client(clientInfo);
  client.onerror = () => {};
  await client.connect(new StreamableHTTPClientTransport(new URL(fixture.url)));
  t.teardown(() => client.close());
  t.is(await probePort(fixture.url), 'open');
  t.is((await fixture.stopListening()).code, 0);
  t.is(await probePort(fixture.url), 'refused');
  await t.throwsAsync(client.callTool({ name: 'echo', arguments: { text: 'gone' } }));
});

test('refusedUrl() is refused', async (t) => {
  t.is(await probePort(await refusedUrl()), 'refused');
});

test('HTTP fixture: the legacy SSE endpoint works too', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const client = new Client(clientInfo);
  await client.connect(new SSEClientTransport(new URL(fixture.sseUrl)));
  t.teardown(() => client.close());
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'sse' } })), 'sse');
  t.like(await fixture.stats(), { initializes: 1, sseSessions: 1 });
});

// --- Stateless mode, GET answers, unknown sessions, dropped answers, new tools -------------

const rawHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** A raw `tools/call` request body. */
function rawCall(id: number, name: string, args: Record<string, unknown> = {}): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
}

/**
 * initialize + notifications/initialized with plain `fetch`; returns the headers later requests
 * need (session id, if the server issued one, and protocol version).
 */
async function rawSession(url: string): Promise<Record<string, string>> {
  const init = await fetch(url, {
    method: 'POST',
    headers: rawHeaders,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo } }),
  });
  const text = await init.text();
  if (init.status !== 200) throw new Error(`initialize: HTTP ${init.status} ${text}`);
  const sessionId = init.headers.get('mcp-session-id');
  const headers: Record<string, string> = { ...rawHeaders, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
  if (sessionId !== null) headers['mcp-session-id'] = sessionId;
  const initialized = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
  await initialized.text();
  if (initialized.status !== 202) throw new Error(`notifications/initialized: HTTP ${initialized.status}`);
  return headers;
}

async function connectHttp(t: ExecutionContext, url: string, options?: ClientOptions): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client(clientInfo, options);
  client.onerror = () => {};
  await client.connect(transport);
  t.teardown(() => client.close());
  return { client, transport };
}

test('HTTP fixture --stateless: no session id ever, calls work from two clients, counters add up', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--stateless'], { tag });
  t.teardown(() => fixture.stop());
  const a = await connectHttp(t, fixture.url);
  const b = await connectHttp(t, fixture.url);
  t.is(a.transport.sessionId, undefined);
  t.is(b.transport.sessionId, undefined);
  // One FixtureState behind the per-request servers: the counter is shared.
  t.deepEqual((await a.client.callTool({ name: 'increment', arguments: {} })).structuredContent, { value: 1 });
  t.deepEqual((await b.client.callTool({ name: 'increment', arguments: {} })).structuredContent, { value: 2 });
  t.is(textOf(await b.client.callTool({ name: 'echo', arguments: { text: 'stateless' } })), 'stateless');
  // A per-request server never saw the client's initialize.
  t.deepEqual((await a.client.callTool({ name: 'client_info', arguments: {} })).structuredContent, { capabilities: null, clientInfo: null });

  const init = await fetch(fixture.url, {
    method: 'POST',
    headers: rawHeaders,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo } }),
  });
  t.is(init.status, 200);
  t.is(init.headers.get('mcp-session-id'), null);
  await init.text();
  // No initialize needed on this connection's requests either: a bare tools/call is answered.
  const bare = await fetch(fixture.url, { method: 'POST', headers: { ...rawHeaders, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION }, body: rawCall(2, 'read_once') });
  t.is(bare.status, 200);
  t.is(bare.headers.get('mcp-session-id'), null);
  t.regex(await bare.text(), /"structuredContent":\{"count":1\}/);

  const stats = await fixture.stats();
  t.like(stats, { initializes: 3, toolCalls: 5, sessions: 0, dropped: 0 });
  t.deepEqual(stats.executions, { increment: 2, echo: 1, client_info: 1, read_once: 1 });
});

test('HTTP fixture /control/hold: a held call is counted, then waits until released; other tools are not held', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const { client } = await connectHttp(t, fixture.url);
  await fixture.setHold('echo', true);
  let answered = false;
  const held = client.callTool({ name: 'echo', arguments: { text: 'held' } }).then((result) => {
    answered = true;
    return result;
  });
  const deadline = performance.now() + 10_000;
  while ((await fixture.stats()).executions['echo'] !== 1 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  t.is((await fixture.stats()).executions['echo'], 1, 'counted while held');
  // Another tool goes through while echo is held, and echo is still unanswered after it.
  t.deepEqual((await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } })).structuredContent, { sum: 3 });
  t.false(answered);
  await fixture.setHold('echo', false);
  t.is(textOf(await held), 'held');
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'free' } })), 'free', 'released: no longer held');
  const bad = await fetch(fixture.url.replace('/mcp', '/control/hold'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"tool":1}' });
  t.is(bad.status, 400);
  await bad.text();
});

test('HTTP fixture: GET /mcp answers 405 (stateless default, or --get-status 405) or 404 (--get-status 404), counted in stats', async (t) => {
  const tag = useFixtureTag(t);
  const [stateless, notFound, stateful405, stateful404, plain] = await Promise.all([
    startHttpFixture(['--stateless'], { tag }),
    startHttpFixture(['--stateless', '--get-status', '404'], { tag }),
    startHttpFixture(['--get-status', '405'], { tag }),
    startHttpFixture(['--get-status', '404', '--json-response'], { tag }),
    startHttpFixture([], { tag }),
  ]);
  for (const fixture of [stateless, notFound, stateful405, stateful404, plain]) t.teardown(() => fixture.stop());
  const get = (url: string, headers: Record<string, string> = rawHeaders) => fetch(url, { headers: { ...headers, accept: 'text/event-stream' } });

  const methodNotAllowed = async (response: Response) => {
    t.is(response.status, 405);
    t.is(response.headers.get('allow'), 'POST, DELETE');
    t.like(await response.json(), { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
  };
  const expressNotFound = async (response: Response) => {
    t.is(response.status, 404);
    t.is(response.headers.get('content-type'), 'text/html; charset=utf-8');
    const body = await response.text();
    t.regex(body, /^<!DOCTYPE html>\n/);
    t.true(body.includes('<pre>Cannot GET /mcp</pre>'), body);
  };
  await methodNotAllowed(await get(stateless.url));
  await expressNotFound(await get(notFound.url));
  // Stateful: with a valid session id the flag's status replaces the standalone stream.
  await methodNotAllowed(await get(stateful405.url, await rawSession(stateful405.url)));
  await expressNotFound(await get(stateful404.url, await rawSession(stateful404.url)));
  // Without the flag a stateful GET still opens the stream.
  const stream = await get(plain.url, await rawSession(plain.url));
  t.is(stream.status, 200);
  t.regex(stream.headers.get('content-type') ?? '', /^text\/event-stream/);
  await stream.body?.cancel();

  for (const fixture of [stateless, notFound, stateful405, stateful404, plain]) t.is((await fixture.stats()).gets, 1);

  // The SDK client takes 405 as "no standalone stream" silently, and reports a 404 through onerror.
  const quiet = await connectHttp(t, stateless.url);
  t.is(textOf(await quiet.client.callTool({ name: 'echo', arguments: { text: 'no stream' } })), 'no stream');
  const client = new Client(clientInfo);
  const getFailed = new Promise<Error>((resolve) => {
    client.onerror = resolve;
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(stateful404.url)));
  t.teardown(() => client.close());
  const error = await getFailed;
  t.true(error instanceof StreamableHTTPError);
  t.is((error as StreamableHTTPError).code, 404);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'still works' } })), 'still works');
});

test('HTTP fixture --unknown-session-status 400: an unknown session gets what server-everything answers', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture(['--unknown-session-status', '400'], { tag });
  t.teardown(() => fixture.stop());
  const raw = await fetch(fixture.url, {
    method: 'POST',
    headers: { ...rawHeaders, 'mcp-session-id': 'no-such-session', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  t.is(raw.status, 400);
  t.is(await raw.text(), '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}');

  const { client } = await connectHttp(t, fixture.url);
  t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'before' } })), 'before');
  t.is(await fixture.forgetSessions(), 1);
  const error = await t.throwsAsync(client.callTool({ name: 'echo', arguments: { text: 'after' } }));
  t.true(error instanceof StreamableHTTPError);
  t.is((error as StreamableHTTPError).code, 400);
});

test('HTTP-only flags: bad statuses and contradictions are usage errors, and the stdio fixture refuses them', async (t) => {
  const tag = useFixtureTag(t);
  for (const flags of [['--get-status', '200'], ['--unknown-session-status', '401'], ['--stateless', '--unknown-session-status', '400']]) {
    const error = await t.throwsAsync(startHttpFixture(flags, { tag }));
    t.regex(error?.message ?? '', /exited \(code 64/, flags.join(' '));
  }
  for (const flags of [['--stateless'], ['--drop-in-tool', 'echo'], ['--get-status', '405']]) {
    const fixture = await startStdioFixture(flags, { tag });
    t.is((await fixture.exited).code, 64, flags.join(' '));
    t.regex(await fixture.waitForStderr(/usage error/), /only for the HTTP fixture/);
  }
});

for (const [label, mode] of [['SSE answers', []], ['--json-response', ['--json-response']]] as const) {
  test(`HTTP fixture --drop-in-tool (${label}): the tool runs, the connection dies instead of the answer, the server serves on`, async (t) => {
    const tag = useFixtureTag(t);
    const sideEffects = join(scratch(t), 'side-effects.log');
    const fixture = await startHttpFixture(['--drop-in-tool', 'increment', ...mode], { tag, env: { MCP_FIXTURE_SIDE_EFFECT_FILE: sideEffects } });
    t.teardown(() => fixture.stop());
    const headers = await rawSession(fixture.url);
    const error = await t.throwsAsync(fetch(fixture.url, { method: 'POST', headers, body: rawCall(1, 'increment') }));
    t.is((error?.cause as { code?: string } | undefined)?.code, 'UND_ERR_SOCKET', 'no status line: the fetch itself fails');
    t.deepEqual(readFileSync(sideEffects, 'utf8').trim().split('\n'), [`${fixture.pid} increment 1`]);
    const stats = await fixture.stats();
    t.like(stats, { dropped: 1, toolCalls: 1 });
    t.deepEqual(stats.executions, { increment: 1 });

    // Same session, other tools: answered.
    const echoed = await fetch(fixture.url, { method: 'POST', headers, body: rawCall(2, 'echo', { text: 'raw after drop' }) });
    t.is(echoed.status, 200);
    t.regex(await echoed.text(), /raw after drop/);
    // The SDK client: the dropped call rejects, the next one works.
    const { client } = await connectHttp(t, fixture.url);
    await t.throwsAsync(client.callTool({ name: 'increment', arguments: {} }));
    t.is(textOf(await client.callTool({ name: 'echo', arguments: { text: 'sdk after drop' } })), 'sdk after drop');
    t.is(readFileSync(sideEffects, 'utf8').trim().split('\n').length, 2, 'the dropped call ran');
    const after = await fixture.stats();
    t.like(after, { dropped: 2, toolCalls: 4 });
    t.deepEqual(after.executions, { increment: 2, echo: 2 });
    t.is(procState(fixture.pid), 'alive');
  });
}

test('elicit: the client answers the form, with defaults applied by the client SDK (stdio and HTTP)', async (t) => {
  const tag = useFixtureTag(t);
  const http = await startHttpFixture([], { tag });
  t.teardown(() => http.stop());
  const stdio = await startStdioFixture([], { tag });
  t.teardown(() => stdio.stop());
  const options: ClientOptions = { capabilities: { elicitation: { form: { applyDefaults: true } } } };
  const clients = [
    (await connectHttp(t, http.url, options)).client,
    await stdio.connect(options),
  ];
  for (const client of clients) {
    const asked: unknown[] = [];
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      asked.push(request.params);
      return { action: 'accept', content: {} };
    });
    const result = await client.callTool({ name: 'elicit', arguments: {} });
    t.falsy(result.isError);
    t.deepEqual(result.structuredContent, { action: 'accept', content: { name: 'Ada', count: 3, color: 'green' } });
    t.deepEqual(JSON.parse(textOf(result)), result.structuredContent);
    t.like(asked, [{ mode: 'form', message: ELICIT_MESSAGE, requestedSchema: ELICIT_SCHEMA }]);
  }
  await clients[1]?.close();
  t.deepEqual((await http.stats()).executions, { elicit: 1 });
});

test('elicit: a client without the elicitation capability gets isError and no request', async (t) => {
  const tag = useFixtureTag(t);
  const client = await connectStdio(t, [], tag);
  const asked: string[] = [];
  client.fallbackRequestHandler = async (request) => {
    asked.push(request.method);
    throw new McpError(ErrorCode.MethodNotFound, `unexpected ${request.method}`);
  };
  const result = await client.callTool({ name: 'elicit', arguments: {} });
  t.true(result.isError);
  t.is(textOf(result), NO_ELICITATION_TEXT);
  t.deepEqual(asked, []);
});

test('client_info echoes the declared capabilities and client info; read_once counts its executions', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const capabilities = { elicitation: { form: { applyDefaults: true } }, roots: { listChanged: true } };
  const { client } = await connectHttp(t, fixture.url, { capabilities });
  const byName = new Map((await client.listTools()).tools.map((tool) => [tool.name, tool]));
  t.true(byName.get('client_info')?.annotations?.readOnlyHint);
  t.true(byName.get('read_once')?.annotations?.readOnlyHint);
  t.is(byName.get('elicit')?.annotations, undefined);

  t.deepEqual((await client.callTool({ name: 'client_info', arguments: {} })).structuredContent, { capabilities, clientInfo });
  t.deepEqual((await client.callTool({ name: 'read_once', arguments: {} })).structuredContent, { count: 1 });
  t.deepEqual((await client.callTool({ name: 'read_once', arguments: {} })).structuredContent, { count: 2 });
  t.deepEqual((await fixture.stats()).executions, { client_info: 1, read_once: 2 });
});

test('leak guard: reapTag finds and kills leaked processes, detached or not', async (t) => {
  useFixtureTag(t);
  const leakTag = newFixtureTag('deliberate-leak');
  const detached = await startStdioFixture(['--hang-initialize'], { tag: leakTag });
  // Same process group as the test runner, as the SDK's StdioClientTransport spawns: must be
  // killed by pid, never by group.
  const sameGroup = new StdioClientTransport({ ...stdioFixtureConfig(['--hang-initialize'], { tag: leakTag }), stderr: 'pipe' });
  await sameGroup.start();
  const sameGroupPid = sameGroup.pid ?? 0;
  t.true(await pollUntil(() => pidsWithTag(leakTag).length === 2), 'both leaked processes are visible');

  const report = await reapTag(leakTag);
  t.deepEqual(report.leaked.map(({ pid }) => pid).sort((a, b) => a - b), [detached.pid, sameGroupPid].sort((a, b) => a - b));
  t.regex(report.leaked[0]?.cmdline ?? '', /stdio-server\.js --hang-initialize/);
  t.deepEqual(report.survivors, []);
  t.is((await detached.exited).signal, 'SIGKILL');
  t.not(procState(sameGroupPid), 'alive');
  t.deepEqual(pidsWithTag(leakTag), []);
  t.is(procState(process.pid), 'alive', 'the test runner survived');
  await sameGroup.close();
});

test('leak guard: a test that leaks a process fails with an error naming the leaked pid; a clean test passes', async (t) => {
  useFixtureTag(t);
  // The guard's own teardown, run exactly as ava runs teardowns (last registered first), on a
  // test body that leaks one process.
  const runTeardowns = async (teardowns: (() => unknown)[]): Promise<void> => {
    for (const teardown of [...teardowns].reverse()) await teardown();
  };
  const leakyTeardowns: (() => unknown)[] = [];
  const leakyTag = useFixtureTag({ teardown: (fn) => void leakyTeardowns.push(fn) }, 'deliberate-leak');
  const leaked = await startStdioFixture(['--hang-initialize'], { tag: leakyTag }); // deliberately never stopped
  t.teardown(() => leaked.stop()); // in case the guard did not kill it
  t.true(await pollUntil(() => pidsWithTag(leakyTag).includes(leaked.pid)), 'the leaked process is visible');
  const error = await t.throwsAsync(runTeardowns(leakyTeardowns));
  t.regex(error?.message ?? '', new RegExp(`^leak guard: 1 process\\(es\\) tagged ${leakyTag} outlived the test and had to be killed:\n  pid ${leaked.pid}: \\S*node\\S* \\S*stdio-server\\.js --hang-initialize$`));
  t.is((await leaked.exited).signal, 'SIGKILL', 'the guard killed it');

  // The same guard around a body that stops what it started: no error.
  const cleanTeardowns: (() => unknown)[] = [];
  const cleanTag = useFixtureTag({ teardown: (fn) => void cleanTeardowns.push(fn) }, 'no-leak');
  const stopped = await startStdioFixture(['--hang-initialize'], { tag: cleanTag });
  cleanTeardowns.push(() => stopped.stop());
  await t.notThrowsAsync(runTeardowns(cleanTeardowns));
});
