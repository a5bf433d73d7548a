/**
 * No configured secret leaves the library, over real processes: secrets planted in env (a short
 * secret-named one and a long plain one), headers, URL userinfo and a `?api_key=` query value; a
 * stdio server that echoes them on stderr and exits; an HTTP server with userinfo on a refused port
 * and one on the real HTTP fixture (reached with the `Authorization: Basic` header the userinfo
 * became). Every output is collected — thrown errors, views, turns, every event, stats, the doctor's
 * table and `--json` — and searched for every planted secret.
 */
import { runCli } from '../helpers/cli.js';
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REDACTED, createHost, isMcpSupervisorError, type HostEvents } from '../../src/index.js';
import { refusedUrl, startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';


/** Every host event: a Record so that a new event name fails the build until it is listed here. */
const ALL_EVENTS: Record<keyof HostEvents, true> = {
  'discovery:start': true,
  'discovery:outcome': true,
  'discovery:settled': true,
  'discovery:retired': true,
  'reload:start': true,
  'tools:changed': true,
  'catalog:changed': true,
  'reload:done': true,
  'server:connected': true,
  'server:exited': true,
  'server:disconnected': true,
  'server:respawned': true,
  'server:parked': true,
  'server:revived': true,
  'breaker:open': true,
  'breaker:half-open': true,
  'breaker:closed': true,
  'server:auth-required': true,
  'server:log': true,
};

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const base64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

/** Distinct secrets per test, with every form they could leak in. */
function plantSecrets() {
  const secrets = {
    /** 3 characters under a secret-looking name (registered by the short rule). Not hex: cannot occur in ids. */
    shortEnv: `Z${Array.from(randomBytes(2), (byte) => 'ghjkmnpqrstvwxyz'[byte % 16]).join('')}`,
    /** A long value under a plain name. */
    longEnv: `plainsetting-${hex(6)}`,
    /** Header values. */
    header: `hdr-${hex(8)}`,
    liveHeader: `livehdr-${hex(8)}`,
    /** URL userinfo of the refused server and of the live one. */
    refusedUser: `svc-user-${hex(3)}`,
    refusedPassword: `pw-refused-${hex(6)}`,
    liveUser: `live-user-${hex(3)}`,
    livePassword: `pw-live-${hex(6)}`,
    /** `?api_key=` values. */
    query: `qk-${hex(8)}`,
    liveQuery: `lqk-${hex(8)}`,
  };
  return secrets;
}

type Secrets = ReturnType<typeof plantSecrets>;

/** Every string a secret could be seen as: itself, percent-encoded, and the Basic credentials. */
function forbiddenForms(secrets: Secrets): Map<string, string> {
  const forms = new Map<string, string>();
  for (const [name, value] of Object.entries(secrets)) {
    forms.set(value, name);
    forms.set(encodeURIComponent(value), `${name} (percent-encoded)`);
  }
  forms.set(base64(`${secrets.refusedUser}:${secrets.refusedPassword}`), 'refused Basic credentials');
  forms.set(base64(`${secrets.liveUser}:${secrets.livePassword}`), 'live Basic credentials');
  return forms;
}

/** The servers of the tenant profile, as a user writes them. */
function tenantServers(tag: string, secrets: Secrets, refused: string, live: string): Record<string, unknown> {
  const env = { API_KEY: secrets.shortEnv, SERVICE_SETTING: secrets.longEnv };
  const withUserinfo = (url: string, user: string, password: string, query: string): string =>
    `${url.replace('http://', `http://${user}:${password}@`)}?api_key=${query}&team=blue`;
  return {
    good: stdioFixtureConfig(['--tools', '1'], { tag, env }),
    // Prints its environment on stderr, then exits before speaking MCP.
    echoer: stdioFixtureConfig(
      ['--stderr', `booting: SERVICE_SETTING=${secrets.longEnv} API_KEY=${secrets.shortEnv} mode=verbose`, '--exit-at-start', '1'],
      { tag, env },
    ),
    refused: { url: withUserinfo(refused, secrets.refusedUser, secrets.refusedPassword, secrets.query), headers: { 'X-Api-Key': secrets.header } },
    live: { type: 'http', url: withUserinfo(live, secrets.liveUser, secrets.livePassword, secrets.liveQuery), headers: { 'X-Tenant-Token': secrets.liveHeader } },
  };
}

/** Collected outputs: label → text. */
class Outputs {
  readonly items: { label: string; text: string }[] = [];

  add(label: string, value: unknown): void {
    this.items.push({ label, text: typeof value === 'string' ? value : JSON.stringify(value) ?? String(value) });
  }

  /** Everything an error exposes. */
  addError(label: string, error: unknown): void {
    if (isMcpSupervisorError(error)) {
      this.add(`${label}.message`, error.message);
      this.add(`${label}.modelText`, error.modelText);
      this.add(`${label}.data`, error.data ?? null);
      this.add(`${label}.toJSON`, error.toJSON());
      this.add(`${label}.stack`, String(error.stack));
      if (error.cause !== undefined) this.add(`${label}.cause`, error.cause instanceof Error ? error.cause.message : error.cause);
    } else {
      this.add(`${label}.foreign`, error instanceof Error ? `${error.name}: ${error.message}\n${error.stack}` : error);
    }
  }

  all(): string {
    return this.items.map((item) => item.text).join('\n');
  }

  assertClean(t: ExecutionContext, forms: Map<string, string>): void {
    let leaks = 0;
    for (const { label, text } of this.items) {
      for (const [form, name] of forms) {
        if (text.includes(form)) {
          leaks++;
          t.fail(`${name} leaked through ${label}: ${text.slice(0, 400)}`);
        }
      }
    }
    t.is(leaks, 0);
  }
}

async function thrown(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

function throwsSync(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

test('host: no planted secret reaches errors, views, turns, events or stats, even echoed on stderr', async (t) => {
  const tag = useFixtureTag(t, 'secrets');
  const secrets = plantSecrets();
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const servers = tenantServers(tag, secrets, await refusedUrl(), fixture.url);
  const outputs = new Outputs();

  const host = createHost({
    profiles: { tenant: { mcpServers: servers } },
    discovery: { connectTimeoutMs: 10_000, retryCooldownMs: 600_000 },
    sessions: { respawnWaitMs: 3_000, reconnectBudget: 2, callTimeoutMs: 10_000 },
  });
  t.teardown(() => host.close());
  const eventNames = new Set<string>();
  for (const name of Object.keys(ALL_EVENTS) as (keyof HostEvents)[]) {
    host.on(name, (payload) => {
      eventNames.add(name);
      outputs.add(`event ${name}`, payload);
    });
  }

  host.start();
  const view = await host.ready('tenant');
  outputs.add('ready()', view);
  outputs.add('status()', host.status('tenant'));
  t.is(view.status, 'degraded');
  t.like(view.servers, { good: { status: 'ready' }, live: { status: 'ready' }, echoer: { status: 'failed', kind: 'exited' }, refused: { status: 'failed', kind: 'refused' } });

  // The useful part of the stderr line survives; the secrets in it do not.
  const echoer = view.servers['echoer'];
  const tail = echoer?.status === 'failed' ? (echoer.stderrTail ?? '') : '';
  t.regex(tail, /booting: SERVICE_SETTING=\[redacted\] API_KEY=\[redacted\] mode=verbose/);
  t.regex(tail, /exiting at start with code 1/);

  const turn = await host.beginTurn('tenant');
  outputs.add('turn.failed', turn.failed);
  outputs.add('turn.pending', turn.pending);
  t.deepEqual(turn.failed.map((failed) => [failed.server, failed.kind]).sort(), [['echoer', 'exited'], ['refused', 'refused']]);

  // Calls that succeed: the live HTTP fixture is reached with the Basic header the userinfo became.
  t.true((servers['live'] as { url: string }).url.includes(`${secrets.liveUser}:${secrets.livePassword}@`), 'the planted URL does carry userinfo');
  const liveResult = await turn.callTool('mcp__live__echo', { text: 'through basic auth' });
  t.deepEqual(liveResult.content, [{ type: 'text', text: 'through basic auth' }]);
  const goodResult = await turn.callTool('mcp__good__echo', { text: 'stdio ok' });
  t.deepEqual(goodResult.content, [{ type: 'text', text: 'stdio ok' }]);
  t.is((await fixture.stats()).executions['echo'], 1);

  // Calls that fail, thrown and as results.
  const refusedError = await thrown(host.callTool('tenant', 'refused', 'echo', { text: 'x' }));
  outputs.addError('callTool(refused)', refusedError);
  t.true(isMcpSupervisorError(refusedError) && refusedError.code === 'SERVER_UNREACHABLE' && refusedError.server === 'refused');
  const refusedResult = await host.callTool('tenant', 'refused', 'echo', { text: 'x' }, { errorsAsResults: true });
  outputs.add('callTool(refused, errorsAsResults)', refusedResult);
  t.true(refusedResult.isError);
  const echoerError = await thrown(host.callTool('tenant', 'echoer', 'echo', { text: 'x' }));
  outputs.addError('callTool(echoer)', echoerError);
  t.true(isMcpSupervisorError(echoerError) && echoerError.server === 'echoer');
  const echoerResult = await host.callTool('tenant', 'echoer', 'echo', { text: 'x' }, { errorsAsResults: true });
  outputs.add('callTool(echoer, errorsAsResults)', echoerResult);
  outputs.addError('callTool(unknown server)', await thrown(host.callTool('tenant', 'nope', 'echo')));

  // Re-discovery and reload go through the same exits.
  outputs.add('retry()', await host.retry('tenant'));
  outputs.add('reload()', await host.reload());
  outputs.add('ready() after reload', await host.ready('tenant'));
  outputs.add('stats()', host.stats());

  // Config errors of later profiles, with fresh secrets of the same kinds.
  const badHeader = `bad-header-${hex(6)}`;
  const badPassword = `bad-pw-${hex(6)}`;
  const badQuery = `bad-qk-${hex(6)}`;
  const reloadError = await thrown(
    host.reload(undefined, {
      profiles: {
        tenant: {
          mcpServers: {
            both: { url: `http://u:${badPassword}@127.0.0.1:1/mcp`, headers: { Authorization: `Bearer ${badHeader}` } },
            malformed: { url: `http://admin:${badPassword}@bad host/mcp?api_key=${badQuery}` },
            placeholder: { url: 'http://127.0.0.1:1/mcp', headers: { 'X-Key': `\${not valid:-${badHeader}}` } },
          },
        },
      },
    }),
  );
  outputs.addError('reload(invalid profiles)', reloadError);
  t.true(isMcpSupervisorError(reloadError) && reloadError.code === 'INVALID_CONFIG');
  t.regex((reloadError as Error).message, /server "both", field `url`: expected credentials either in the URL/);
  const createError = throwsSync(() => createHost({ profiles: { other: { mcpServers: { s: { command: 'x', env: { TOKEN: [badHeader] } }, h: { url: `http://u:${badPassword}@bad host/?token=${badQuery}` } } } } }));
  outputs.addError('createHost(invalid)', createError);
  t.true(isMcpSupervisorError(createError) && createError.code === 'INVALID_CONFIG');

  // Every event of this run, then the whole haul.
  t.true(eventNames.has('discovery:outcome') && eventNames.has('discovery:settled') && eventNames.has('reload:done'));
  const forms = forbiddenForms(secrets);
  for (const extra of [badHeader, badPassword, badQuery]) forms.set(extra, 'invalid-config secret');
  outputs.assertClean(t, forms);

  // And the useful parts are all there.
  const all = outputs.all();
  for (const server of ['good', 'echoer', 'refused', 'live']) t.true(all.includes(`"${server}"`), `server ${server} is named`);
  t.regex(all, /"kind":"exited"/);
  t.regex(all, /"kind":"refused"/);
  t.regex(all, /booting: SERVICE_SETTING=\[redacted\]/);
  t.true(all.includes(REDACTED));
  t.regex((refusedError as Error).message, /"refused".*ECONNREFUSED/);
  t.regex((echoerError as Error).message, /"echoer"/);
});


test('doctor: neither the table nor --json (nor a failed --call) shows a planted secret', async (t) => {
  const tag = useFixtureTag(t, 'secrets-cli');
  const secrets = plantSecrets();
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-secrets-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'tenant.json');
  await writeFile(file, JSON.stringify({ mcpServers: tenantServers(tag, secrets, await refusedUrl(), fixture.url) }));
  const outputs = new Outputs();

  const json = await runCli(['doctor', file, '--json', '--timeout', '10000']);
  outputs.add('doctor --json stdout', json.stdout);
  outputs.add('doctor --json stderr', json.stderr);
  t.is(json.code, 1, json.stderr);
  const report = JSON.parse(json.stdout) as { rows: { server: string; status: string; kind: string | null; message: string | null }[] };
  const byServer = Object.fromEntries(report.rows.map((row) => [row.server, row]));
  t.like(byServer, { good: { status: 'ready' }, live: { status: 'ready' }, echoer: { status: 'failed', kind: 'exited' }, refused: { status: 'failed', kind: 'refused' } });
  t.regex(byServer['echoer']?.message ?? '', /stderr: .*booting: SERVICE_SETTING=\[redacted\] API_KEY=\[redacted\] mode=verbose/);

  const table = await runCli(['doctor', file, '--timeout', '10000', '--call', 'refused/echo', '{"text":"x"}']);
  outputs.add('doctor table stdout', table.stdout);
  outputs.add('doctor table stderr', table.stderr);
  t.is(table.code, 1, table.stderr);
  t.regex(table.stdout, /tenant\s+echoer\s+stdio\s+-\s+failed\s+-\s+-\s+exited\s+.*booting: SERVICE_SETTING=\[redacted\]/);
  t.regex(table.stdout, /tenant\s+refused\s+http\s+-\s+failed\s+-\s+-\s+refused\s/);
  t.regex(table.stdout, /tenant\s+live\s+http\s+2025-11-25\s+ready\s/);
  t.regex(table.stdout, /--call refused\/echo: failed\nSERVER_UNREACHABLE: /);

  outputs.assertClean(t, forbiddenForms(secrets));
});
