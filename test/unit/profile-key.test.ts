import test from 'ava';
import { mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { canonicalProfileKey, isPathLikeRef } from '../../src/index.js';

async function fakeHome(t: import('ava').ExecutionContext): Promise<{ root: string; home: string; profile: string }> {
  // realpath: on some systems the temp dir itself sits behind a symlink.
  const root = await realpath(await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-key-')));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const home = path.join(root, 'home', 'u');
  const profile = path.join(home, 'p');
  await mkdir(profile, { recursive: true });
  return { root, home, profile };
}

test('~/p, /home/u/p, /home/u/./p/, a symlink to it, and "" when the default is that path give one key', async (t) => {
  const { root, home, profile } = await fakeHome(t);
  const link = path.join(root, 'link-to-p');
  await symlink(profile, link);
  const options = { homeDir: home, cwd: root, defaultProfile: '~/p' };
  const spellings = ['~/p', profile, `${home}/./p/`, `${home}/../u/p`, link, '', undefined, '  '];
  const keys = new Set(spellings.map((ref) => canonicalProfileKey(ref, options)));
  t.deepEqual([...keys], [profile]);
});

test('relative refs resolve against cwd; a path that does not exist yet keeps its realpath-ed parent', async (t) => {
  const { root, home, profile } = await fakeHome(t);
  const link = path.join(root, 'homelink');
  await symlink(home, link);
  t.is(canonicalProfileKey('./p', { cwd: home }), profile);
  t.is(canonicalProfileKey('p/mcp.json', { cwd: home }), path.join(profile, 'mcp.json'));
  t.is(canonicalProfileKey(path.join(link, 'p', 'later.json')), path.join(profile, 'later.json'));
});

test('plain names stay as they are, and "" / undefined mean the default name', (t) => {
  t.is(canonicalProfileKey('Work'), 'Work');
  t.is(canonicalProfileKey('team-a'), 'team-a');
  t.is(canonicalProfileKey(''), 'default');
  t.is(canonicalProfileKey(undefined), 'default');
  t.is(canonicalProfileKey('', { defaultProfile: 'main' }), 'main');
  t.is(canonicalProfileKey('main', { defaultProfile: 'main' }), 'main');
});

test('case folding applies only where the file system is case-insensitive', async (t) => {
  const { profile } = await fakeHome(t);
  t.is(canonicalProfileKey(profile.toUpperCase(), { caseInsensitive: true }), profile.toLowerCase());
  t.is(canonicalProfileKey(profile, { caseInsensitive: true }), profile.toLowerCase());
  // This machine's file system is case-sensitive: detection must not fold.
  t.is(canonicalProfileKey(profile), profile);
});

test('isPathLikeRef tells paths from names', (t) => {
  for (const ref of ['/a', '~', '~/a', './a', '../a', 'a/b', 'a\\b', 'cfg.json', '.mcp.json']) t.true(isPathLikeRef(ref), ref);
  for (const ref of ['work', 'team-a', 'Default', 'a.b']) t.false(isPathLikeRef(ref), ref);
});
