/**
 * MCP roots against the official `@modelcontextprotocol/server-filesystem` (2026.8.31), run as a
 * real stdio process (`node <its bin>`, spawned by the library), with and without a directory.
 *
 * What the server does (read in its dist/index.js and checked with a bare SDK client):
 * - Allowed directories come from argv; with none it still starts ("Started without allowed
 *   directories - waiting for client to provide roots via MCP protocol" on stderr).
 * - On `notifications/initialized`, if the client declared `roots`, it asks `roots/list` at once and
 *   the existing directories among the answer (realpath'd) REPLACE the allowed ones; it asks again
 *   on `notifications/roots/list_changed`. If the client declared no roots and it has no
 *   directory, it throws inside that notification handler — swallowed by the SDK: the server stays
 *   up, lists all 14 tools and refuses every path. That is the "ready but useless" server the
 *   doctor must not call a clean "ready".
 * - A path outside: a result with isError and "Access denied - path outside allowed directories:
 *   <path> not in <dirs>". list_allowed_directories answers "Allowed directories:\n<dirs>".
 * - A tools/call sent right behind `initialized` is handled before the roots answer is applied
 *   (refused, "not in " an empty list): the first call of a fresh session is the interesting one.
 */
import { runCli } from '../helpers/cli.js';
import test from 'ava';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, referenceServerConfig } from '../helpers/reference-servers.js';
import type { Turn } from '../../src/index.js';
import { referenceHost, tempDir, textOf, toolOf, waitUntil, waitUntilAsync } from './common.js';

guardOpenHandles(test);

const INFO = { name: 'mcp-supervisor-reference-tests', version: '1.0.0' };
const DENIED = /^Access denied - path outside allowed directories: /;

/** Two sibling directories with a file each: `inside` (the root) and `outside`. */
async function dirs(t: import('ava').ExecutionContext): Promise<{ inside: string; outside: string }> {
  const base = await tempDir(t, 'fs');
  const inside = path.join(base, 'inside');
  const outside = path.join(base, 'outside');
  await mkdir(inside);
  await mkdir(outside);
  await writeFile(path.join(inside, 'note.txt'), 'inside the root\n');
  await writeFile(path.join(outside, 'secret.txt'), 'outside the root\n');
  return { inside, outside };
}

/** Resolves once server-filesystem's list_allowed_directories names exactly `dirs`. */
async function allowedBecomes(turn: Turn, dirs: readonly string[]): Promise<void> {
  const list = toolOf(turn, 'fs', 'list_allowed_directories');
  const expected = `Allowed directories:\n${dirs.join('\n')}`;
  let last = '';
  await waitUntilAsync(async () => (last = textOf(await turn.callTool(list.name, {}))) === expected, `list_allowed_directories = ${JSON.stringify(expected)} (last: ${JSON.stringify(last)})`);
}

test.serial('without a directory and client.roots = [tmp]: the server takes tmp as its root; a file in tmp is read, a path outside is refused by the server', async (t) => {
  const tag = useFixtureTag(t);
  const { inside, outside } = await dirs(t);
  const host = referenceHost(t, {
    profiles: { default: { mcpServers: { fs: referenceServerConfig('filesystem', [], { tag }) } } },
    client: { info: INFO, roots: [{ uri: pathToFileURL(inside).href, name: 'inside' }] },
  });
  const turn = await host.beginTurn();
  t.deepEqual(turn.failed, []);
  const read = toolOf(turn, 'fs', 'read_text_file');
  t.like(read.annotations, { readOnlyHint: true });

  // The server asks roots/list on `initialized` and applies the answer asynchronously: wait
  // for its own account of its directories (see the next test for the first call).
  await allowedBecomes(turn, [inside]);
  const ok = await turn.callTool(read.name, { path: path.join(inside, 'note.txt') });
  t.not(ok.isError, true, textOf(ok));
  t.is(textOf(ok), 'inside the root\n');

  const refused = await turn.callTool(read.name, { path: path.join(outside, 'secret.txt') });
  t.true(refused.isError);
  t.regex(textOf(refused), DENIED);
  t.true(textOf(refused).endsWith(`not in ${inside}`), textOf(refused));
  t.false(textOf(refused).includes('outside the root'));
});

test.serial('without a directory and client.roots = [tmp]: a warm session counts as connected only once the server asked for its roots and was answered', async (t) => {
  // server-filesystem asks roots/list when `initialized` arrives and applies the answer
  // asynchronously (it validates each root on disk): a tools/call written right behind
  // `initialized` is refused, by a bare SDK client as by any. What the library guarantees: a
  // session of a server known to ask for roots (discovery saw it ask) is not handed to calls
  // before the ask was answered (plus one ping). Then reading a file in tmp works.
  const tag = useFixtureTag(t);
  const { inside } = await dirs(t);
  const events: string[] = [];
  const host = referenceHost(t, {
    profiles: { default: { mcpServers: { fs: referenceServerConfig('filesystem', [], { tag }) } } },
    client: {
      info: INFO,
      roots: () => {
        events.push('roots/list answered');
        return [{ uri: pathToFileURL(inside).href, name: 'inside' }];
      },
    },
  });
  const connected = new Promise<void>((resolve) => {
    const off = host.on('server:connected', (event) => {
      if (event.server !== 'fs') return;
      off();
      events.push('session connected');
      resolve();
    });
  });
  const turn = await host.beginTurn();
  await connected;
  t.deepEqual(events, ['roots/list answered', 'roots/list answered', 'session connected'], 'discovery\'s ask, then the session\'s ask, before the session took calls');
  const read = toolOf(turn, 'fs', 'read_text_file');
  await allowedBecomes(turn, [inside]);
  t.is(textOf(await turn.callTool(read.name, { path: path.join(inside, 'note.txt') })), 'inside the root\n');
});


test.serial('roots as a function get ctx { profile, server }; after rootsChanged() the server works in the new root only', async (t) => {
  const tag = useFixtureTag(t);
  const { inside, outside } = await dirs(t);
  let root = inside;
  const asked: { profile: string; server: string }[] = [];
  const host = referenceHost(t, {
    profiles: { default: { mcpServers: { fs: referenceServerConfig('filesystem', [], { tag }) } } },
    client: {
      info: INFO,
      roots: async (ctx) => {
        asked.push({ profile: ctx.profile, server: ctx.server });
        return [{ uri: pathToFileURL(root).href, name: path.basename(root) }];
      },
    },
  });
  const turn = await host.beginTurn();
  const read = toolOf(turn, 'fs', 'read_text_file');
  await allowedBecomes(turn, [inside]);
  t.is(textOf(await turn.callTool(read.name, { path: path.join(inside, 'note.txt') })), 'inside the root\n');
  t.true(asked.length >= 1);

  root = outside;
  const before = asked.length;
  t.is(await host.rootsChanged(), 1, 'one live server in the profile was told');
  await waitUntil(() => asked.length > before, 'roots/list asked again after rootsChanged()');
  // The server replaces its directories once our answer is in (realpath + stat, asynchronously).
  await allowedBecomes(turn, [outside]);
  t.is(textOf(await turn.callTool(read.name, { path: path.join(outside, 'secret.txt') })), 'outside the root\n');
  const refused = await turn.callTool(read.name, { path: path.join(inside, 'note.txt') });
  t.true(refused.isError);
  t.regex(textOf(refused), DENIED);
  for (const ctx of asked) t.deepEqual(ctx, { profile: 'default', server: 'fs' });
});

test.serial('with a directory argument and no roots configured: a file inside is read, a path outside is refused', async (t) => {
  const tag = useFixtureTag(t);
  const { inside, outside } = await dirs(t);
  const host = referenceHost(t, {
    profiles: { default: { mcpServers: { fs: referenceServerConfig('filesystem', [inside], { tag }) } } },
    client: { info: INFO },
  });
  const turn = await host.beginTurn();
  const view = host.status();
  t.is(view.servers['fs']?.status, 'ready');
  const read = toolOf(turn, 'fs', 'read_text_file');
  t.is(textOf(await turn.callTool(read.name, { path: path.join(inside, 'note.txt') })), 'inside the root\n');
  const refused = await turn.callTool(read.name, { path: path.join(outside, 'secret.txt') });
  t.true(refused.isError);
  t.regex(textOf(refused), DENIED);
});

test.serial('a tool filter makes server-filesystem read-only: include/exclude globs and disabledTools give exactly the expected tools; an excluded write is UNKNOWN_TOOL and writes nothing', async (t) => {
  const tag = useFixtureTag(t);
  const { inside } = await dirs(t);
  const WRITERS = ['create_directory', 'edit_file', 'move_file', 'write_file'];
  const host = referenceHost(t, {
    profiles: {
      default: {
        mcpServers: {
          // Globs match the server's own names, whole name, case-sensitive; exclude wins over include.
          fs: { ...referenceServerConfig('filesystem', [inside], { tag }), tools: { include: ['read_*', 'list_*', '*_file'], exclude: ['write_*', 'edit_*', 'move_*'] } },
          // Roo's disabledTools: an exclude of exact names.
          roo: { ...referenceServerConfig('filesystem', [inside], { tag }), disabledTools: WRITERS },
        },
      },
    },
    client: { info: INFO },
  });
  const turn = await host.beginTurn();
  t.deepEqual(turn.failed, []);
  const names = (server: string) => turn.tools.filter((tool) => tool.server === server).map((tool) => tool.tool).sort();
  // include keeps read_file, read_text_file, read_media_file, read_multiple_files, list_directory,
  // list_directory_with_sizes, list_allowed_directories, write_file, edit_file, move_file; the
  // excludes then drop the three writers.
  t.deepEqual(names('fs'), ['list_allowed_directories', 'list_directory', 'list_directory_with_sizes', 'read_file', 'read_media_file', 'read_multiple_files', 'read_text_file']);
  t.deepEqual(names('roo'), ['directory_tree', 'get_file_info', 'list_allowed_directories', 'list_directory', 'list_directory_with_sizes', 'read_file', 'read_media_file', 'read_multiple_files', 'read_text_file', 'search_files']);

  const target = path.join(inside, 'written.txt');
  for (const server of ['fs', 'roo']) {
    const error = await t.throwsAsync(host.callTool(undefined, server, 'write_file', { path: target, content: 'must not be written' }));
    t.is((error as { code?: string } | undefined)?.code, 'UNKNOWN_TOOL', `${server}: ${String(error)}`);
  }
  t.false(existsSync(target), 'an excluded write_file reached the server');
  // What the filter keeps still works.
  t.is(textOf(await host.callTool(undefined, 'roo', 'read_text_file', { path: path.join(inside, 'note.txt') })), 'inside the root\n');
});

/** Runs the doctor CLI as users do; resolves with its exit code and output. */
const doctor = (args: string[]) => runCli(['doctor', ...args]);

interface DoctorRow {
  profile: string;
  server: string;
  status: string;
  tools: number | null;
  [field: string]: unknown;
}

test.serial('the doctor does not call server-filesystem without a directory and without roots a clean "ready": it says roots', async (t) => {
  const tag = useFixtureTag(t);
  const base = await tempDir(t, 'doctor');
  const file = path.join(base, 'claude_desktop_config.json');
  await writeFile(file, JSON.stringify({ mcpServers: { fs: referenceServerConfig('filesystem', [], { tag }) } }));

  const json = await doctor([file, '--json']);
  const report = JSON.parse(json.stdout) as { rows: DoctorRow[]; allReady: boolean };
  const row = report.rows.find((entry) => entry.server === 'fs');
  t.truthy(row, json.stdout);
  // How the warning is carried is the lead's choice; today the row reads status "warning", kind
  // "warning", message "asked for roots (roots/list) and was given none: …". Asserted: not a
  // clean ready, and the row's text names roots.
  t.false(row!.status === 'ready' && row!['message'] == null, `a clean ready: ${JSON.stringify(row)}`);
  t.regex(JSON.stringify(row), /roots/i, `the doctor's row for fs says nothing about roots: ${JSON.stringify(row)}`);
  t.log(`doctor --json row: ${JSON.stringify(row)}; exit ${json.code}; allReady ${report.allReady}`);

  const table = await doctor([file]);
  const line = table.stdout.split('\n').find((text) => /\bfs\b/.test(text) && /stdio/.test(text));
  t.regex(line ?? '', /roots/i, table.stdout);
});

test.serial('the doctor on server-filesystem with a directory argument: 14 tools, and the honest roots warning (it asked; the doctor cannot know it needs none); --root silences it', async (t) => {
  // With a directory the server works whatever the client says about roots: when the client
  // declares roots it still asks roots/list on `initialized`, and an empty answer leaves its
  // directory in place. The doctor cannot tell that server from one that needs roots (both ask),
  // so it says what it saw, as a warning that says "may"; declaring a root (--root) silences it.
  const tag = useFixtureTag(t);
  const base = await tempDir(t, 'doctor');
  const file = path.join(base, 'claude_desktop_config.json');
  await writeFile(file, JSON.stringify({ mcpServers: { fs: referenceServerConfig('filesystem', [base], { tag }) } }));
  const warned = await doctor([file, '--json']);
  const row = (JSON.parse(warned.stdout) as { rows: DoctorRow[] }).rows.find((entry) => entry.server === 'fs');
  t.like(row, { server: 'fs', status: 'warning', tools: 14 }, JSON.stringify(row));
  t.regex(JSON.stringify(row), /asked for roots .* may refuse/);
  const declared = await doctor([file, '--json', '--root', base]);
  const report = JSON.parse(declared.stdout) as { rows: DoctorRow[]; allReady: boolean };
  t.like(report.rows.find((entry) => entry.server === 'fs'), { server: 'fs', status: 'ready', tools: 14 });
  t.true(report.allReady);
  t.is(declared.code, 0, declared.stdout);
});
