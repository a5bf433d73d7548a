import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  isMcpSupervisorError,
  loadProfileFile,
  parseProfileConfig,
  redactServer,
  serverFingerprint,
  type McpSupervisorError,
  type ServerConfig,
  type HttpServerConfig,
  type StdioServerConfig,
} from '../../src/index.js';

const context = { profile: 'work', env: { HOME: '/home/u', TOKEN: 's3cr3t-token', EMPTY: '' } };

function invalid(t: import('ava').ExecutionContext, document: unknown, ctx: Parameters<typeof parseProfileConfig>[1] = context): McpSupervisorError {
  const error = t.throws(() => parseProfileConfig(document, ctx));
  if (!isMcpSupervisorError(error)) throw new Error('expected an McpSupervisorError');
  t.is(error.code, 'INVALID_CONFIG');
  return error;
}

test('Claude Desktop format: stdio server with command, args, env, cwd', (t) => {
  const config = parseProfileConfig(
    { mcpServers: { fs: { command: 'node', args: ['fs.js', '--root', '/data'], env: { LEVEL: 'debug', PORT: 3000 }, cwd: '/srv' } } },
    context,
  );
  t.deepEqual(config.servers['fs'], {
    name: 'fs',
    transport: 'stdio',
    command: 'node',
    args: ['fs.js', '--root', '/data'],
    env: { LEVEL: 'debug', PORT: '3000' },
    cwd: '/srv',
    disabled: false,
    share: false,
    shareDiscovery: true,
  });
  t.true(Object.isFrozen(config.servers['fs']));
  t.true(Object.isFrozen((config.servers['fs'] as { args: readonly string[] }).args));
});

test('Cursor format: url servers default to Streamable HTTP, with headers', (t) => {
  const config = parseProfileConfig({ mcpServers: { remote: { url: 'https://example.test/mcp', headers: { Authorization: 'Bearer x' } } } }, context);
  const remote = config.servers['remote'] as HttpServerConfig;
  t.is(remote.transport, 'http');
  t.deepEqual(remote.headers, { Authorization: 'Bearer x' });
});

test('VS Code format: servers with explicit type, also nested under mcp in settings', (t) => {
  const config = parseProfileConfig(
    {
      servers: {
        local: { type: 'stdio', command: 'uvx', args: ['tool'] },
        remote: { type: 'http', url: 'http://127.0.0.1:1/mcp' },
        legacy: { type: 'sse', url: 'http://127.0.0.1:2/sse' },
      },
      inputs: [],
    },
    context,
  );
  t.deepEqual(
    Object.values(config.servers).map((server) => [server.name, server.transport]),
    [
      ['local', 'stdio'],
      ['remote', 'http'],
      ['legacy', 'sse'],
    ],
  );
  const settings = parseProfileConfig({ 'editor.fontSize': 12, mcp: { servers: { a: { command: 'a' } } } }, context);
  t.deepEqual(Object.keys(settings.servers), ['a']);
});

test('.mcp.json format: type field and ${VAR} / ${VAR:-default} / ${env:VAR} expansion in command, args, env, url, headers', (t) => {
  const config = parseProfileConfig(
    {
      mcpServers: {
        local: {
          type: 'stdio',
          command: '${HOME}/bin/server',
          args: ['--token=${TOKEN}', '${MISSING:-fallback}', '${EMPTY:-was-empty}', 'literal'],
          env: { API_KEY: '${TOKEN}', MODE: '${MODE:-prod}', VS: '${env:HOME}' },
        },
        remote: { type: 'http', url: 'http://${HOST:-127.0.0.1}:8080/mcp', headers: { Authorization: 'Bearer ${TOKEN}' } },
      },
    },
    context,
  );
  const local = config.servers['local'] as StdioServerConfig;
  t.is(local.command, '/home/u/bin/server');
  t.deepEqual(local.args, ['--token=s3cr3t-token', 'fallback', 'was-empty', 'literal']);
  t.deepEqual(local.env, { API_KEY: 's3cr3t-token', MODE: 'prod', VS: '/home/u' });
  const remote = config.servers['remote'] as HttpServerConfig;
  t.is(remote.url, 'http://127.0.0.1:8080/mcp');
  t.deepEqual(remote.headers, { Authorization: 'Bearer s3cr3t-token' });
});

test('per-server options: disabled, connectTimeoutMs, callTimeoutMs, share', (t) => {
  const config = parseProfileConfig(
    { mcpServers: { a: { command: 'a', disabled: true, connectTimeoutMs: 500, callTimeoutMs: 9000, share: true } } },
    context,
  );
  t.like(config.servers['a'], { disabled: true, connectTimeoutMs: 500, callTimeoutMs: 9000, share: true });
});

test('unknown keys users keep in their files (autoApprove, description) are accepted', (t) => {
  const config = parseProfileConfig({ mcpServers: { a: { command: 'a', autoApprove: ['x'], description: 'd' } }, globalShortcut: 'x' }, context);
  t.deepEqual(Object.keys(config.servers), ['a']);
});

test('error: a wrong type names profile, server, field, expected and received', (t) => {
  const error = invalid(t, { mcpServers: { fs: { command: 'node', args: ['ok', 42, { x: 1 }] } } });
  t.regex(error.message, /profile "work"/);
  t.regex(error.message, /server "fs"/);
  t.regex(error.message, /field `args\[2\]`/);
  t.regex(error.message, /expected a string, number or boolean, got `\{"x":1\}` \(object\)/);
  t.is(error.server, 'fs');
  t.is(error.profile, 'work');
});

test('error: the file is named when there is one', (t) => {
  const error = invalid(t, { mcpServers: { fs: { command: 'node', connectTimeoutMs: -1 } } }, { ...context, file: '/etc/mcp.json' });
  t.regex(error.message, /file \/etc\/mcp\.json, profile "work", server "fs", field `connectTimeoutMs`: expected a positive number, got `-1` \(number\)/);
});

test('error: every problem of every server is reported, nothing half-applied', (t) => {
  const error = invalid(t, {
    mcpServers: {
      good: { command: 'ok' },
      neither: { args: [] },
      both: { command: 'x', url: 'http://a' },
      badType: { type: 'websocket', url: 'ws://a' },
      badTimeout: { command: 'x', callTimeoutMs: 1.5 },
      badUrl: { url: 'not a url' },
      ftp: { url: 'ftp://host/x' },
      wrongShape: 'node server.js',
      typeMismatch: { type: 'stdio', url: 'http://a' },
    },
  });
  const issues = (error.data?.['issues'] ?? []) as { server?: string; field: string; problem: string }[];
  const byServer = Object.fromEntries(issues.map((issue) => [issue.server, `${issue.field}: ${issue.problem}`]));
  t.deepEqual(Object.keys(byServer).sort(), ['badTimeout', 'badType', 'badUrl', 'both', 'ftp', 'neither', 'typeMismatch', 'wrongShape']);
  t.regex(byServer['neither']!, /^command: expected `command` \(stdio\) or `url` \(HTTP\), got neither/);
  t.regex(byServer['both']!, /got both/);
  t.regex(byServer['badType']!, /^type: expected one of "stdio", "http", .*got `"websocket"` \(string\)/);
  t.regex(byServer['badTimeout']!, /^callTimeoutMs: expected an integer, got `1.5` \(number\)/);
  t.regex(byServer['badUrl']!, /^url: expected an absolute http\(s\) URL, got `"not a url"`/);
  t.regex(byServer['ftp']!, /^url: expected an http: or https: URL, got a ftp: URL/);
  t.regex(byServer['wrongShape']!, /^\(server\): expected an object, got `"node server.js"` \(string\)/);
  t.regex(byServer['typeMismatch']!, /^command: expected a command for type "stdio", got a url/);
  t.regex(error.message, /and 7 more/);
});

test('error: a document without mcpServers or servers says which keys it expected', (t) => {
  const error = invalid(t, { tools: {} });
  t.regex(error.message, /field `mcpServers`: expected an object with `mcpServers`.*or `servers` \(VS Code\)/);
  const notObject = invalid(t, ['x']);
  t.regex(notObject.message, /field `\(document\)`: expected an object, got `\["x"\]` \(array\)/);
  const mapNotObject = invalid(t, { mcpServers: [] });
  t.regex(mapNotObject.message, /field `mcpServers`: expected an object/);
});

test('error: a server defined under both mcpServers and servers is a duplicate', (t) => {
  const error = invalid(t, { mcpServers: { a: { command: 'a' } }, servers: { a: { command: 'b' } } });
  t.regex(error.message, /server "a", field `servers`: expected each server name once/);
});

test('error: unset variable without default names the variable and the field', (t) => {
  const error = invalid(t, { mcpServers: { api: { command: 'x', env: { KEY: '${NOT_SET_ANYWHERE}' } } } });
  t.regex(error.message, /server "api", field `env.KEY`: environment variable `NOT_SET_ANYWHERE` is not set and has no default/);
  const input = invalid(t, { servers: { api: { url: 'http://a/${input:token}' } } });
  t.regex(input.message, /field `url`: `\$\{input:token\}` asks the user for input/);
});

test('redaction: env and header values never appear in error messages', (t) => {
  const envError = invalid(t, { mcpServers: { api: { command: 'x', env: { KEY: ['sk-live-123456'] } } } });
  t.regex(envError.message, /field `env.KEY`: expected a string, number or boolean, got a redacted array/);
  t.notRegex(envError.message, /sk-live/);
  const headerError = invalid(t, { mcpServers: { api: { url: 'http://a', headers: { Authorization: 99123456 } } } });
  t.regex(headerError.message, /field `headers.Authorization`: expected a string, got a redacted number/);
  t.notRegex(headerError.message, /99123456/);
  t.notRegex(JSON.stringify(headerError.toJSON()), /99123456/);
});

test('redaction: redactServer hides env, header values and URL credentials', (t) => {
  const config = parseProfileConfig(
    {
      mcpServers: {
        local: { command: 'node', env: { API_KEY: 'sk-live-1' } },
        remote: { url: 'https://user:pw@example.test/mcp?api_key=abc&team=x' },
        bearer: { url: 'https://example.test/mcp', headers: { Authorization: 'Bearer tok' } },
      },
    },
    context,
  );
  const text = JSON.stringify(Object.values(config.servers).map(redactServer));
  t.notRegex(text, /sk-live-1|Bearer tok|pw@|abc|dXNlcjpwdw/);
  t.regex(text, /API_KEY/);
  t.regex(text, /team=x/);
});

test('fingerprint: stable across key order, sensitive to what defines the connection only', (t) => {
  const parse = (server: unknown): ServerConfig => parseProfileConfig({ mcpServers: { s: server } }, context).servers['s']!;
  const base = serverFingerprint(parse({ command: 'node', args: ['a'], env: { A: '1', B: '2' } }));
  t.is(serverFingerprint(parse({ command: 'node', args: ['a'], env: { B: '2', A: '1' } })), base);
  t.is(serverFingerprint(parse({ command: 'node', args: ['a'], env: { A: '1', B: '2' }, callTimeoutMs: 5, share: true })), base);
  t.not(serverFingerprint(parse({ command: 'node', args: ['b'], env: { A: '1', B: '2' } })), base);
  t.not(serverFingerprint(parse({ command: 'node', args: ['a'], env: { A: '1', B: '3' } })), base);
  t.not(serverFingerprint(parse({ command: 'node', args: ['a'], env: { A: '1', B: '2' }, cwd: '/x' })), base);
  const http = serverFingerprint(parse({ url: 'http://a/mcp', headers: { 'X-Key': 'k' } }));
  t.is(serverFingerprint(parse({ url: 'http://a/mcp', headers: { 'x-key': 'k' } })), http);
  t.not(serverFingerprint(parse({ type: 'sse', url: 'http://a/mcp', headers: { 'X-Key': 'k' } })), http);
  t.regex(base, /^[0-9a-f]{24}$/);
  t.false(base.includes('node'));
});

test('loadProfileFile: JSON with comments and trailing commas (VS Code), syntax errors with line and column', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const good = path.join(dir, '.vscode', 'mcp.json');
  await import('node:fs/promises').then((fs) => fs.mkdir(path.dirname(good)));
  await writeFile(good, '{\n  // my servers\n  "servers": {\n    "a": { "command": "${workspaceFolder}/run", /* inline */ "args": ["x // not a comment",], },\n  },\n}\n');
  const config = await loadProfileFile(good, { profile: 'p', env: {} });
  t.like(config.servers['a'], { command: `${dir}/run`, args: ['x // not a comment'] });
  t.is(config.file, good);

  const broken = path.join(dir, 'broken.json');
  await writeFile(broken, '{\n  "mcpServers": {\n    "a": { "command": "x" \n  }\n');
  const syntax = await t.throwsAsync(loadProfileFile(broken, { profile: 'p' }));
  t.like(syntax, { code: 'INVALID_CONFIG' });
  t.regex(syntax!.message, new RegExp(`file ${broken.replace(/[.]/g, '\\.')}, profile "p": not valid JSON`));

  const missing = await t.throwsAsync(loadProfileFile(path.join(dir, 'nope.json'), { profile: 'p' }));
  t.regex(missing!.message, /nope\.json.*cannot read the file \(ENOENT\)/);
});

test('protocol: one of the three settings, kept as written; a legacy SSE server only in the 2025-11-25 era; anything else names the field', (t) => {
  const config = parseProfileConfig(
    { mcpServers: { a: { url: 'http://127.0.0.1:1/mcp', protocol: '2026-07-28' }, b: { command: 'node', protocol: 'auto' }, c: { url: 'http://127.0.0.1:2/mcp' } } },
    context,
  );
  t.is(config.servers['a']?.protocol, '2026-07-28');
  t.is(config.servers['b']?.protocol, 'auto');
  t.false('protocol' in config.servers['c']!, 'absent: the transport default applies');
  const wrong = invalid(t, { mcpServers: { a: { url: 'http://127.0.0.1:1/mcp', protocol: '2024-11-05' } } });
  t.regex(wrong.message, /protocol/);
  const sse = invalid(t, { mcpServers: { legacy: { type: 'sse', url: 'http://127.0.0.1:1/sse', protocol: 'auto' } } });
  t.regex(sse.message, /legacy.*protocol.*2025-11-25/s);
});
