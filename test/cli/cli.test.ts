/**
 * The command line as users run it: a real child process per invocation.
 */
import { runCli } from '../helpers/cli.js';
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BASE_TOOL_NAMES } from '../fixtures/tools.js';
import { eraFixtureConfig, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { parseDoctorArgs, profileNameOf } from '../../src/cli/doctor.js';
import { isPathLikeRef } from '../../src/config/profile-key.js';


const run = runCli;

async function tempDir(t: import('ava').ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-cli-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('doctor on a Claude Desktop-style file with one bad server exits 1 and names the server and the failure kind; every server shows its protocol era', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const file = path.join(dir, 'claude_desktop_config.json');
  await writeFile(
    file,
    JSON.stringify({
      mcpServers: {
        files: stdioFixtureConfig(['--tools', '2'], { tag }),
        broken: stdioFixtureConfig(['--exit-at-start', '5', '--stderr', 'fatal: token missing'], { tag }),
        stateless: { ...eraFixtureConfig(['--legacy', 'reject'], { tag }), protocol: '2026-07-28' },
      },
    }),
  );
  const { code, stdout } = await run(['doctor', file]);
  t.regex(stdout, /claude_desktop_config\s+stateless\s+stdio\s+2026-07-28\s+ready\s/, 'each server shows the era it is spoken to in');
  t.is(code, 1);
  // The fixture's base tools plus the two generated ones.
  t.regex(stdout, new RegExp(`claude_desktop_config\\s+files\\s+stdio\\s+2025-11-25\\s+ready\\s+${BASE_TOOL_NAMES.length + 2}\\b`));
  t.regex(stdout, /claude_desktop_config\s+broken\s+stdio\s+-\s+failed\s+-\s+-\s+exited\s+.*code 5.*fatal: token missing/);
});

test('doctor on a malformed file exits 2 and names the field', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'mcp.json');
  await writeFile(file, JSON.stringify({ mcpServers: { fs: { command: 'node', args: 'server.js' } } }));
  const { code, stderr, stdout } = await run(['doctor', file]);
  t.is(code, 2);
  t.is(stdout, '');
  t.regex(stderr, /file .*mcp\.json, profile "mcp", server "fs", field `args`: expected an array, got `"server.js"` \(string\)/);
  const syntax = path.join(dir, 'broken.json');
  await writeFile(syntax, '{ "mcpServers": { ');
  const parse = await run(['doctor', syntax]);
  t.is(parse.code, 2);
  t.regex(parse.stderr, /broken\.json.*not valid JSON/);
});

test('doctor --json with --call exercises the supervised call path; exit 0 when everything is ready', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const file = path.join(dir, '.mcp.json');
  await writeFile(file, JSON.stringify({ mcpServers: { files: { type: 'stdio', ...stdioFixtureConfig([], { tag }) } } }));
  const { code, stdout } = await run(['doctor', '--profile', `work=${file}`, '--json', '--call', 'files/echo', '{"text":"ping"}']);
  t.is(code, 0);
  const report = JSON.parse(stdout) as { rows: { profile: string; server: string; status: string }[]; allReady: boolean; call: { ok: boolean; text: string } };
  t.deepEqual(report.rows.map((row) => [row.profile, row.server, row.status]), [['work', 'files', 'ready']]);
  t.true(report.allReady);
  t.true(report.call.ok);
  t.regex(report.call.text, /ping/);
});

test('bad command-line usage exits 2 with the usage text', async (t) => {
  const unknown = await run(['doctor', '--frobnicate']);
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /unknown option --frobnicate/);
  const timeout = await run(['doctor', '--timeout', '-3']);
  t.is(timeout.code, 2);
  t.regex(timeout.stderr, /--timeout expects a positive integer/);
  const command = await run(['frob']);
  t.is(command.code, 2);
});

test('the demo (npm start) runs the bundled examples and exits 0 with every step matched', async (t) => {
  const { code, stdout, stderr } = await run(['demo']);
  t.is(code, 0, `${stdout}\n${stderr}`);
  t.regex(stdout, /team\s+crashy\s+stdio\s+-\s+failed.*exited/);
  t.regex(stdout, /ops\s+legacy\s+stdio\s+-\s+failed.*timeout/);
  t.regex(stdout, /ops\s+remote\s+http\s+-\s+failed.*refused/);
  t.regex(stdout, /through 1 respawn/);
  t.regex(stdout, /demo passed/);
});

test('doctor --trace --call prints the trace tree: the discovery done in the worker and the call attempt, from the tracing channels', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t);
  const file = path.join(dir, 'work.json');
  await writeFile(file, JSON.stringify({ mcpServers: { fx: stdioFixtureConfig([], { tag }) } }));
  const { code, stdout } = await run(['doctor', file, '--call', 'fx/echo', '{"text":"hi"}', '--trace']);
  t.is(code, 0, stdout);
  t.regex(stdout, /trace \(mcp-supervisor:discover, mcp-supervisor:call\)/);
  t.regex(stdout, /profile work\n└─ fx\n {3}├─ discover \(stdio, generation 1\) {2}[\d.]+ ms {2}ready, \d+ tools\n {3}└─ tools\/call echo, attempt 1 {2}[\d.]+ ms {2}ok/);
  const json = await run(['doctor', file, '--json', '--trace']);
  const report = JSON.parse(json.stdout) as { trace: { kind: string; server: string; outcome: string }[] };
  t.like(report.trace[0], { kind: 'discover', server: 'fx' });
  t.regex(report.trace[0]!.outcome, /^ready, \d+ tools$/);
});

test('a profile file given without --profile is named after it, leading dots dropped: .mcp.json is "mcp", never a path', (t) => {
  t.deepEqual(parseDoctorArgs(['/work/.mcp.json', '/home/u/claude_desktop_config.json']).profiles.map((profile) => profile.name), ['mcp', 'claude_desktop_config']);
  t.is(profileNameOf('/x/.json'), 'default');
  t.false(isPathLikeRef(profileNameOf('/x/..hidden.JSON')), 'never read as a path');
  t.throws(() => parseDoctorArgs(['/a/.mcp.json', '/b/.mcp.json']), { message: /profile name "mcp" is used twice/ });
});
