/**
 * The scrubber of `src/config/redact.ts` and its choke points (errors, events, views, the doctor's
 * table, config errors). The registry is process-wide: every test plants values of its own, so
 * tests running concurrently in this file never depend on each other's registrations.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import {
  MAX_REGISTERED_SECRETS,
  REDACTED,
  clearSecretRegistry,
  isRegisteredSecret,
  redactUrlText,
  registerSecret,
  registeredSecretCount,
  scrubDeep,
  scrubTail,
  scrubText,
} from '../../src/config/redact.js';
import { parseJsonDocument } from '../../src/config/load.js';
import { renderTable, rowsFor } from '../../src/cli/report.js';
import type { ServerOutcome } from '../../src/discovery/types.js';
import { TypedEmitter } from '../../src/events.js';
import type { SessionLayer } from '../../src/readiness/driver.js';
import { buildView, type TurnCatalog } from '../../src/readiness/settlement.js';
import { createTurn } from '../../src/readiness/turn.js';
import { describeError } from '../../src/errors.js';
import {
  McpSupervisorError,
  isMcpSupervisorError,
  parseProfileConfig,
  type HttpServerConfig,
  type ProfileConfig,
} from '../../src/index.js';

/** A fresh random value: `prefix` + hex. */
function fresh(prefix: string, bytes = 6): string {
  return `${prefix}${randomBytes(bytes).toString('hex')}`;
}

const base64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

function parse(document: unknown, env: Record<string, string> = {}): ProfileConfig {
  return parseProfileConfig(document, { profile: 'tenant', env });
}

function configError(document: unknown, env: Record<string, string> = {}): McpSupervisorError {
  try {
    parse(document, env);
  } catch (error) {
    if (isMcpSupervisorError(error)) return error;
    throw error;
  }
  throw new Error('expected INVALID_CONFIG');
}

/** Every text an error exposes. */
function errorText(error: McpSupervisorError): string {
  return [error.message, error.modelText, JSON.stringify(error.data ?? null), JSON.stringify(error.toJSON()), String(error.stack)].join('\n');
}

// Serial: runs before the concurrent tests, which then register their own values again.
test.serial('the registry is bounded (oldest dropped first) and registration is idempotent', (t) => {
  const first = fresh('bound-first-');
  registerSecret(first);
  const count = registeredSecretCount();
  registerSecret(first);
  registerSecret(first);
  t.is(registeredSecretCount(), count, 'registering a value again adds nothing');
  for (let index = 0; index < MAX_REGISTERED_SECRETS + 10; index++) registerSecret(`bound-filler-${index}-xxxxxxxx`);
  t.is(registeredSecretCount(), MAX_REGISTERED_SECRETS);
  t.false(isRegisteredSecret(first), 'the oldest value was dropped');
  t.true(isRegisteredSecret(`bound-filler-${MAX_REGISTERED_SECRETS + 9}-xxxxxxxx`));
  t.is(scrubText(`a bound-filler-${MAX_REGISTERED_SECRETS + 9}-xxxxxxxx b`), `a ${REDACTED} b`);
  clearSecretRegistry();
  t.is(registeredSecretCount(), 0);
  t.is(scrubText('bound-filler-5000-xxxxxxxx'), 'bound-filler-5000-xxxxxxxx');
});

test('registration rule: >= 6 characters, or >= 3 when the name looks secret; short values only as whole tokens', (t) => {
  const config = parse({
    mcpServers: {
      s: {
        command: 'node',
        env: { API_KEY: 'q7Z', MODE: 'prodx', LEVEL: 'verbose1', TOKEN: 'ab', SESSION_ID: 'Wq9' },
      },
    },
  });
  t.truthy(config.servers['s']);
  t.true(isRegisteredSecret('q7Z'), 'secret-named, 3 characters');
  t.true(isRegisteredSecret('Wq9'), 'secret-named (session), 3 characters');
  t.true(isRegisteredSecret('verbose1'), '6+ characters, whatever the name');
  t.false(isRegisteredSecret('prodx'), 'not secret-named and shorter than 6');
  t.false(isRegisteredSecret('ab'), 'shorter than 3 even when secret-named');
  t.is(scrubText('key=q7Z; Bearer q7Z, "q7Z"'), `key=${REDACTED}; Bearer ${REDACTED}, "${REDACTED}"`);
  t.is(scrubText('q7Zebra and aq7Z stay'), 'q7Zebra and aq7Z stay', 'a short secret inside a word is left alone');
  t.is(scrubText('level verbose1x'), `level ${REDACTED}x`, 'a long secret is replaced wherever it is');
  t.is(scrubText('mode prodx'), 'mode prodx');
});

test('header names: bearer/api/private count as secret-named; the credential of `Scheme credential` is registered alone', (t) => {
  const token = fresh('tk', 2); // 6 characters
  parse({
    mcpServers: {
      h: {
        url: 'https://example.test/mcp',
        headers: { Authorization: `Bearer ${token}`, 'X-Api-Version': 'v12', 'X-Private-Id': 'Pv9', 'X-Trace': 'abcde' },
      },
    },
  });
  t.true(isRegisteredSecret(`Bearer ${token}`));
  t.true(isRegisteredSecret(token), 'the token alone');
  t.true(isRegisteredSecret('v12'), 'api');
  t.true(isRegisteredSecret('Pv9'), 'private');
  t.false(isRegisteredSecret('abcde'), 'X-Trace is not secret-named and the value is short');
  t.is(scrubText(`the server said: invalid token ${token}`), `the server said: invalid token ${REDACTED}`);
});

test('derived forms: percent-encoded, form-encoded and JSON-escaped values, base64 of user:password', (t) => {
  const secret = `p@ss w"rd/${fresh('', 3)}`;
  registerSecret(secret, true);
  t.is(scrubText(`q=${encodeURIComponent(secret)}`), `q=${REDACTED}`);
  t.is(scrubText(`q=${new URLSearchParams([['q', secret]]).toString().slice(2)}`), `q=${REDACTED}`);
  t.is(scrubText(JSON.stringify({ secret })), `{"secret":"${REDACTED}"}`);
  const user = fresh('user-', 3);
  const password = fresh('pw-', 4);
  parse({ mcpServers: { u: { url: `http://${user}:${password}@127.0.0.1:9/mcp` } } });
  t.is(scrubText(`sent ${base64(`${user}:${password}`)} as credentials`), `sent ${REDACTED} as credentials`);
  t.false(scrubText(`Authorization: Basic ${base64(`${user}:${password}`)}`).includes(base64(`${user}:${password}`)));
  t.is(scrubText(`creds ${user}:${password}`), `creds ${REDACTED}`);
  t.is(scrubText(`user ${user} only`), `user ${REDACTED} only`, 'a username with a password counts (it is long enough)');
});

test('URL userinfo becomes an Authorization: Basic header; the URL keeps no credentials', (t) => {
  const password = fresh('pw%2F', 4);
  const config = parse({ mcpServers: { remote: { url: `https://admin:${password}@example.test:8443/mcp?team=x&api_key=${fresh('k')}`, headers: { 'X-Other': 'y' } } } });
  const remote = config.servers['remote'] as HttpServerConfig;
  t.false(remote.url.includes('@'));
  t.false(remote.url.includes(password));
  t.regex(remote.url, /^https:\/\/example\.test:8443\/mcp\?team=x&api_key=/);
  t.deepEqual(remote.headers, { 'X-Other': 'y', Authorization: `Basic ${base64(`admin:${decodeURIComponent(password)}`)}` });
  t.true(Object.isFrozen(remote.headers));

  const userOnly = parse({ mcpServers: { gh: { url: 'https://ghp_tokenvalue123@example.test/mcp' } } }).servers['gh'] as HttpServerConfig;
  t.is(userOnly.url, 'https://example.test/mcp');
  t.deepEqual(userOnly.headers, { Authorization: `Basic ${base64('ghp_tokenvalue123:')}` });
  t.true(isRegisteredSecret('ghp_tokenvalue123'));

  const plain = parse({ mcpServers: { p: { url: 'http://example.test' } } }).servers['p'] as HttpServerConfig;
  t.is(plain.url, 'http://example.test', 'a URL without userinfo is kept exactly as written');
  t.deepEqual(plain.headers, {});
});

test('URL userinfo and an Authorization header: refused on the url field, neither credential echoed', (t) => {
  const password = fresh('pw-');
  const header = fresh('Bearer hdr-');
  for (const name of ['Authorization', 'authorization', 'AUTHORIZATION']) {
    const error = configError({ mcpServers: { both: { url: `http://admin:${password}@example.test/mcp`, headers: { [name]: header } } } });
    t.is(error.code, 'INVALID_CONFIG');
    t.is(error.server, 'both');
    t.regex(error.message, /server "both", field `url`: expected credentials either in the URL \(user:password@\) or in an `Authorization` header, got both/);
    const issues = error.data?.['issues'] as { field: string }[];
    t.deepEqual(issues.map((issue) => issue.field), ['url']);
    const text = errorText(error);
    t.false(text.includes(password));
    t.false(text.includes(header));
  }
});

test('config errors never echo a header, env or secret query value, nor a password in a malformed URL', (t) => {
  const password = fresh('pw-');
  const apiKey = fresh('key-');
  const literal = fresh('sk-live-');
  const envValue = fresh('envv-');
  const cases: [unknown, RegExp][] = [
    // A malformed URL (space in the host) with a password and a secret query value.
    [{ mcpServers: { bad: { url: `http://admin:${password}@ho st/mcp?api_key=${apiKey}&team=x` } } }, /field `url`: expected an absolute http\(s\) URL, got `"http:\/\/\[redacted\]@ho st\/mcp\?api_key=\[redacted\]&team=x"`/],
    // Password with a slash: the URL does not parse where the password is.
    [{ mcpServers: { bad: { url: `http://admin:${password}/x@host/mcp` } } }, /field `url`: expected an absolute http\(s\) URL, got `"http:\/\/\[redacted\]@host\/mcp"`/],
    // A placeholder default in a header is never shown, even when the reference is invalid.
    [{ mcpServers: { h: { url: 'http://a/mcp', headers: { Authorization: `Bearer \${bad-name:-${literal}}` } } } }, /field `headers.Authorization`: expected `\$\{VAR\}` placeholders with a valid variable name, got an invalid one \(value not shown\)/],
    [{ mcpServers: { h: { url: 'http://a/mcp', headers: { Authorization: `Bearer \${${literal}}` } } } }, /field `headers.Authorization`: expected `\$\{VAR\}` placeholders/],
    // An invalid reference elsewhere shows the name, never the default.
    [{ mcpServers: { s: { command: 'x', args: [`\${not valid:-${literal}}`] } } }, /field `args\[0\]`: `\$\{not valid:-…\}` is not a valid variable reference/],
    // A whole server of the wrong shape: nested env and header values are redacted.
    [{ mcpServers: { arr: [{ env: { K: envValue } }, { headers: { H: literal } }] } }, /server "arr", field `\(server\)`: expected an object, got `\[\{"env":\{"K":"\[redacted\]"\}\},\{"headers":\{"H":"\[redacted\]"\}\}\]` \(array\)/],
    // An env value registered by a valid server, quoted back by a problem of another one.
    [{ mcpServers: { ok: { command: 'x', env: { SETTING: envValue } }, bad: { command: 'y', args: ['a', 7, { x: envValue }] } } }, /field `args\[2\]`: expected a string, number or boolean, got `\{"x":"\[redacted\]"\}` \(object\)/],
  ];
  for (const [document, expected] of cases) {
    const error = configError(document);
    t.regex(error.message, expected);
    const text = errorText(error);
    for (const secret of [password, apiKey, literal, envValue]) t.false(text.includes(secret), `${secret} leaked: ${text}`);
  }
});

test('JSON syntax errors never quote the document', (t) => {
  const secret = fresh('sk-');
  const error = t.throws(() => parseJsonDocument(`{"mcpServers": {"a": {"url": "http://a", "headers": {"X-Key": ${secret}}}}}`, { profile: 'p', file: '/tmp/x.json' }));
  t.true(isMcpSupervisorError(error));
  t.regex(error!.message, /file \/tmp\/x\.json, profile "p": not valid JSON/);
  t.false(error!.message.includes(secret));
});

test('${SECRET_NAMED_VAR} expanded anywhere (args, url path) is registered', (t) => {
  const token = fresh('tok-');
  const pathSecret = fresh('path-');
  parse(
    { mcpServers: { s: { command: 'x', args: ['--token', '${MY_TOKEN}'] }, h: { url: 'https://example.test/${env:PRIVATE_PATH}/mcp' } } },
    { MY_TOKEN: token, PRIVATE_PATH: pathSecret },
  );
  t.is(scrubText(`spawn x --token ${token} failed`), `spawn x --token ${REDACTED} failed`);
  t.is(scrubText(`GET https://example.test/${pathSecret}/mcp`), `GET https://example.test/${REDACTED}/mcp`);
});

test('scrubText: userinfo of any URL in free text; short and non-secret strings untouched; longest secret first', (t) => {
  t.is(scrubText('fetch http://someone:unregistered-pw@10.0.0.1/mcp failed'), `fetch http://${REDACTED}@10.0.0.1/mcp failed`);
  t.is(scrubText('mail me at a@b.c, see http://example.test/x'), 'mail me at a@b.c, see http://example.test/x');
  const inner = fresh('inner-');
  registerSecret(inner);
  registerSecret(`${inner}-outer`);
  t.is(scrubText(`[${inner}-outer] [${inner}]`), `[${REDACTED}] [${REDACTED}]`);
  t.is(scrubText(''), '');
  t.is(scrubText('ok'), 'ok');
  t.is(redactUrlText('not a url'), 'not a url');
  t.is(redactUrlText('http://u:p@h/x?token=abc&page=2'), `http://${REDACTED}@h/x?token=${REDACTED}&page=2`);
});

test('scrubTail: a secret cut by the start of a tail is redacted too', (t) => {
  const secret = fresh('tail-secret-', 8);
  registerSecret(secret, true);
  const line = `env: ${secret} ok\nnext line`;
  t.is(scrubTail(line), `env: ${REDACTED} ok\nnext line`);
  const cut = line.slice(line.indexOf(secret) + 9);
  t.is(scrubTail(cut), `${REDACTED} ok\nnext line`);
  t.is(scrubTail('plain start of a tail'), 'plain start of a tail');
});

test('scrubDeep: scrubbed copy of plain data, non-strings kept, same value when nothing matched, depth guarded', (t) => {
  const secret = fresh('deep-');
  registerSecret(secret);
  const when = new Date(0);
  const input = Object.freeze({ a: `x ${secret}`, n: 1, b: true, nil: null, u: undefined, when, list: [secret, 2, { c: secret }], untouched: { d: 'fine' } });
  const out = scrubDeep(input);
  t.not(out, input);
  t.deepEqual(out, { a: `x ${REDACTED}`, n: 1, b: true, nil: null, u: undefined, when, list: [REDACTED, 2, { c: REDACTED }], untouched: { d: 'fine' } });
  t.is(out.untouched, input.untouched, 'unchanged branches are shared');
  t.is(input.a, `x ${secret}`, 'the input is not modified');
  const clean = { a: 'nothing here', list: [1, 'two'] };
  t.is(scrubDeep(clean), clean);
  t.is(scrubDeep(42), 42);
  t.is(scrubDeep(`${secret}`), REDACTED);
  const error = scrubDeep({ cause: new TypeError(`bad ${secret}`) }).cause;
  t.is(error.message, `bad ${REDACTED}`);
  t.is(error.name, 'TypeError');
  // A clean wrapper does not carry a secret one level down the cause chain.
  const chained = scrubDeep(new Error('wrapper', { cause: new Error('middle', { cause: new Error(`inner ${secret}`) }) }));
  t.is(chained.message, 'wrapper');
  t.is(((chained.cause as Error).cause as Error).message, `inner ${REDACTED}`);
  const wrapped = new McpSupervisorError('DISCOVERY_FAILED', 'clean', { cause: new Error('clean too', { cause: new Error(`deep ${secret}`) }) });
  t.false(JSON.stringify(((wrapped.cause as Error).cause as Error).message).includes(secret));
  const cleanChain = new Error('a', { cause: new Error('b') });
  t.is(scrubDeep(cleanChain), cleanChain, 'nothing replaced: the very same error');
  const cyclic: Record<string, unknown> = { text: secret };
  cyclic['self'] = cyclic;
  const scrubbedCycle = scrubDeep(cyclic);
  t.is(scrubbedCycle['text'], REDACTED, 'a cycle does not recurse forever');
});

test('McpSupervisorError scrubs message, modelText, data and cause; fromJSON too; describeError', (t) => {
  const secret = fresh('err-');
  registerSecret(secret);
  const error = new McpSupervisorError('SERVER_UNREACHABLE', `fetch failed for http://h/?k=${secret}`, {
    server: 's',
    data: { failure: { message: `at ${secret}` }, list: [secret], count: 3 },
    cause: new Error(`cause ${secret}`),
  });
  t.is(error.message, `fetch failed for http://h/?k=${REDACTED}`);
  t.is(error.modelText, error.message);
  t.deepEqual(error.data, { failure: { message: `at ${REDACTED}` }, list: [REDACTED], count: 3 });
  t.false(String(error.stack).includes(secret));
  t.false((error.cause as Error).message.includes(secret));
  const withModelText = new McpSupervisorError('CALL_TIMEOUT', 'm', { modelText: `tell the model ${secret}` });
  t.is(withModelText.modelText, `tell the model ${REDACTED}`);
  // As rebuilt from a worker thread, whose registry is empty.
  const rebuilt = McpSupervisorError.fromJSON({ code: 'DISCOVERY_FAILED', message: `m ${secret}`, retryable: true, modelText: `t ${secret}`, data: { d: secret } });
  t.false(errorText(rebuilt).includes(secret));
  t.is(describeError(new Error(`x ${secret}`)), `x ${REDACTED}`);
  t.is(describeError({ v: secret }), `{"v":"${REDACTED}"}`);
});

test('TypedEmitter: listeners receive a scrubbed payload', (t) => {
  const secret = fresh('evt-');
  registerSecret(secret);
  const emitter = new TypedEmitter<{ 'server:parked': { server: string; reason: string; profiles: string[] } }>();
  const seen: unknown[] = [];
  emitter.on('server:parked', (payload) => seen.push(payload));
  const payload = { server: 's', reason: `refused at ${secret}`, profiles: ['p'] };
  emitter.emit('server:parked', payload);
  t.deepEqual(seen, [{ server: 's', reason: `refused at ${REDACTED}`, profiles: ['p'] }]);
  t.is(payload.reason, `refused at ${secret}`, 'the emitter does not modify the caller\'s object');
});

test('buildView and turns: failure message, stderr tail and the view error are scrubbed; the table scrubs before truncating', (t) => {
  const secret = fresh('view-secret-', 10);
  const config = parse({ mcpServers: { ex: { command: 'node', env: { SERVICE_SETTING: secret } }, api: { url: 'http://127.0.0.1:9/mcp' } } });
  const outcomes = new Map<string, ServerOutcome>([
    ['ex', { status: 'failed', server: 'ex', failure: { kind: 'exited', message: `exited; env was ${secret}`, exitCode: 1, stderrTail: `boot\nprinting env SERVICE_SETTING=${secret} done` }, timings: { totalMs: 1 } }],
    ['api', { status: 'failed', server: 'api', failure: { kind: 'refused', message: `refused ${'x'.repeat(150)}${secret}` }, timings: { totalMs: 1 } }],
  ]);
  const view = buildView({ key: 'tenant', generation: 1, config, outcomes, failures: new Map(), error: { code: 'DISCOVERY_FAILED', message: `e ${secret}`, retryable: true, modelText: `m ${secret}`, data: { d: secret } } });
  const text = JSON.stringify(view);
  t.false(text.includes(secret));
  t.like(view.servers['ex'], { status: 'failed', kind: 'exited', message: `exited; env was ${REDACTED}`, stderrTail: `boot\nprinting env SERVICE_SETTING=${REDACTED} done` });
  t.true(Object.isFrozen(view.error));
  const sessions: SessionLayer = {
    callTool: () => Promise.reject(new Error('not called')),
    read: () => Promise.reject(new Error('not called')),
    isExcluded: () => false,
    exclusionVersion: () => 0,
    published: () => undefined,
    revive: () => undefined,
    shutdownProfile: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  const catalog: TurnCatalog = { tools: [], prompts: [], resources: [], resourceTemplates: [], routes: new Map(), byServerTool: new Map() };
  const turn = createTurn(view, catalog, () => config, sessions);
  t.deepEqual(turn.failed.map((failed) => [failed.server, failed.kind]), [['ex', 'exited'], ['api', 'refused']]);
  t.false(JSON.stringify(turn.failed).includes(secret));
  // The table truncates messages at 160 characters: scrubbing first means no half secret.
  const table = renderTable(rowsFor('tenant', config, view));
  t.false(table.includes(secret.slice(0, 14)), 'not even the start of the secret');
  t.regex(table, /tenant\s+ex\s+stdio\s+-\s+failed\s+-\s+-\s+exited\s+exited; env was \[redacted\]; stderr: boot \| printing env SERVICE_SETTING=\[redacted\] done/);
  // A raw (unscrubbed) view from elsewhere: the table still scrubs, before truncating.
  const rawRows = [{ profile: 'tenant', server: 'api', transport: 'http', protocol: null, status: 'failed', tools: null, connectMs: null, kind: 'refused', message: `${'y'.repeat(150)}${secret}` }];
  t.false(renderTable(rawRows).includes(secret.slice(0, 6)));
});
