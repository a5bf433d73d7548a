/**
 * Bounded, unpoisonable profile resolution (docs/ARCHITECTURE.md §8):
 * - unlisted path-like references are read only inside `profileRoots` (none by default): a
 *   planted `.mcp.json` elsewhere is never read, so its command never runs;
 * - unknown references are remembered in a bounded cache (`limits.maxUnknownProfiles`);
 * - a stray reference never makes `reload()` fail;
 * - no error quotes a file's content.
 */
import { existsSync, realpathSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, tempDir } from '../sessions/helpers.js';

guardOpenHandles(test);

/** A `.mcp.json` whose one server, if it were ever started, would create `marker`. */
async function plant(dir: string, marker: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const server = { command: '/bin/sh', args: ['-c', `touch ${JSON.stringify(marker)}; exec sleep 600`] };
  await writeFile(path.join(dir, '.mcp.json'), JSON.stringify({ mcpServers: { planted: server } }));
}

test('an unlisted path outside profileRoots is UNKNOWN_PROFILE: nothing is read, nothing runs; inside a root it loads', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'roots');
  const outside = path.join(dir, 'elsewhere');
  const root = path.join(dir, 'root');
  await plant(outside, path.join(dir, 'ran-outside'));
  await mkdir(path.join(root, 'user1'), { recursive: true });
  await writeFile(path.join(root, 'user1', '.mcp.json'), JSON.stringify({ mcpServers: { fx: stdioFixtureConfig([], { tag }) } }));

  const closed = createHost({ discovery: { maxThreads: 1 } });
  t.teardown(() => closed.close());
  const refused = await closed.ready(outside);
  t.is(refused.status, 'failed');
  t.is(refused.error?.code, 'UNKNOWN_PROFILE');
  t.false(existsSync(path.join(dir, 'ran-outside')), 'the planted command never ran');

  const host = createHost({ profileRoots: [root], discovery: { maxThreads: 1 } });
  t.teardown(() => host.close());
  t.is((await host.ready(outside)).error?.code, 'UNKNOWN_PROFILE', 'outside the root, still refused');
  t.is((await host.ready(path.join(root, 'user1'))).status, 'ready');
  t.is((await host.ready(path.join(root, '..', 'elsewhere'))).error?.code, 'UNKNOWN_PROFILE', 'no escape with ..');
  t.false(existsSync(path.join(dir, 'ran-outside')));
});

test('inside profileRoots: a directory means its .mcp.json (a missing one is named), a file is read as it is, a symlink out of the root is refused; with loadProfile the disk is never read', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'disk');
  const root = path.join(dir, 'root');
  await mkdir(path.join(root, 'empty'), { recursive: true });
  await mkdir(path.join(root, 'proj', '.vscode'), { recursive: true });
  await writeFile(path.join(root, 'proj', '.mcp.json'), JSON.stringify({ mcpServers: { fromDotMcp: stdioFixtureConfig([], { tag }) } }));
  // A file reference in another format (VS Code, with a comment and trailing commas).
  await writeFile(path.join(root, 'proj', '.vscode', 'mcp.json'), `{ // mine\n "servers": { "fromVscode": ${JSON.stringify({ type: 'stdio', ...stdioFixtureConfig([], { tag }) })}, }, }`);
  await plant(path.join(dir, 'outside'), path.join(dir, 'ran-outside'));
  await symlink(path.join(dir, 'outside'), path.join(root, 'escape'));
  const real = (ref: string): string => realpathSync(ref);
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

  const host = createHost({ profileRoots: [root], discovery: { maxThreads: 1 } });
  t.teardown(() => host.close());
  const project = await host.ready(path.join(root, 'proj'));
  t.is(project.status, 'ready');
  t.deepEqual(Object.keys(project.servers), ['fromDotMcp'], 'a directory is its .mcp.json, nothing else in it');
  const file = await host.ready(path.join(root, 'proj', '.vscode', 'mcp.json'));
  t.is(file.status, 'ready');
  t.deepEqual(Object.keys(file.servers), ['fromVscode']);
  const empty = await host.ready(path.join(root, 'empty'));
  t.is(empty.error?.code, 'INVALID_CONFIG');
  t.regex(empty.error?.message ?? '', new RegExp(`${escape(path.join(real(root), 'empty', '.mcp.json'))}.*ENOENT`), 'the error names the .mcp.json it looked for');
  const escaped = await host.ready(path.join(root, 'escape'));
  t.is(escaped.error?.code, 'UNKNOWN_PROFILE', 'a symlink resolves outside the root: refused');
  t.false(existsSync(path.join(dir, 'ran-outside')), 'the planted command never ran');

  const asked: string[] = [];
  const withLoader = createHost({ profileRoots: [root], loadProfile: async (key) => void asked.push(key), discovery: { maxThreads: 1 } });
  t.teardown(() => withLoader.close());
  t.is((await withLoader.ready(path.join(root, 'proj'))).error?.code, 'UNKNOWN_PROFILE', 'loadProfile answered: no such profile');
  t.deepEqual(asked, [real(path.join(root, 'proj'))], 'loadProfile is asked, with the canonical key; the .mcp.json on disk is not read');
});

test('a file that is not a config: the error names the file, never its content', async (t) => {
  const dir = await tempDir(t, 'content');
  const root = path.join(dir, 'root');
  await mkdir(root, { recursive: true });
  const secret = 'SUPER-SECRET-TOKEN-0123456789';
  await writeFile(path.join(root, 'env'), `API_KEY=${secret}\nOTHER=1\n`);
  const host = createHost({ profileRoots: [root] });
  t.teardown(() => host.close());
  const view = await host.ready(path.join(root, 'env'));
  t.is(view.error?.code, 'INVALID_CONFIG');
  t.regex(view.error?.message ?? '', /root\/env.*not valid JSON/);
  t.notRegex(JSON.stringify(view), /SUPER-SECRET|API_KEY/);
});

test('12 000 unknown references: the cache stays within limits.maxUnknownProfiles and still answers each at once', async (t) => {
  const host = createHost({ limits: { maxUnknownProfiles: 100 }, profiles: { known: { mcpServers: {} } } });
  t.teardown(() => host.close());
  for (let index = 0; index < 12_000; index++) {
    const view = await host.ready(`tenant-${index}`);
    if (view.error?.code !== 'UNKNOWN_PROFILE') t.fail(`tenant-${index}: ${view.status}`);
  }
  t.true(host.stats().profiles <= 101, `${host.stats().profiles} entries kept`);
  t.is((await host.ready('known')).status, 'ready', 'listed profiles are never evicted');
  t.is((await host.ready('tenant-11999')).error?.code, 'UNKNOWN_PROFILE');
});

test('a stray reference never makes reload() fail; listed profiles reload as usual', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'stray');
  const host = createHost({ profiles: { main: { mcpServers: { fx: stdioFixtureConfig([], { tag }) } } }, profileRoots: [dir], discovery: { maxThreads: 1 } });
  t.teardown(() => host.close());
  t.is((await host.ready('main')).status, 'ready');
  // A path that does not exist (inside the root) and a file that is not JSON: both unloadable.
  await host.ready(path.join(dir, 'missing.json'));
  await writeFile(path.join(dir, 'broken.json'), '{ not json');
  await host.ready(path.join(dir, 'broken.json'));
  const result = await host.reload();
  t.true(result.changes.some((change) => change.key === 'main' && change.unchanged.includes('fx')));
  t.is((await host.ready('main')).status, 'ready');
  const again = await host.reload();
  t.true(again.changes.some((change) => change.key === 'main'));
});
