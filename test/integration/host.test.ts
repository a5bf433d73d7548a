/**
 * The public host API over real fixture processes: one key per profile whatever its spelling,
 * isolation of same-named servers, cooldown recovery without a restart, frozen turns.
 */
import test from 'ava';
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createHost, isMcpSupervisorError } from '../../src/index.js';
import { ManualClock, flush } from '../helpers/clock.js';
import { STDIO_FIXTURE, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil } from '../helpers/processes.js';

test('one key: the start-up kick-off and the first default-profile turn share one entry; "", the default name and the default path are one key', async (t) => {
  const tag = useFixtureTag(t);
  const root = await realpath(await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-host-')));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const dir = path.join(root, 'profiles', 'main');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, '.mcp.json'), JSON.stringify({ mcpServers: { fs: stdioFixtureConfig(['--tools', '1'], { tag }) } }));
  await symlink(dir, path.join(root, 'alias'));
  const host = createHost({ defaultProfile: dir, profiles: { [`${root}/profiles/./main/`]: JSON.parse(JSON.stringify({ mcpServers: { fs: stdioFixtureConfig(['--tools', '1'], { tag }) } })) }, cwd: root });
  t.teardown(() => host.close());
  const starts: string[] = [];
  host.on('discovery:start', ({ key }) => starts.push(key));
  host.start();
  const turns = await Promise.all([host.beginTurn(), host.beginTurn(''), host.beginTurn(dir), host.beginTurn('./alias'), host.beginTurn(`${dir}/`)]);
  t.deepEqual(starts, [dir], 'one discovery for every spelling');
  t.true(turns.every((turn) => turn.key === dir && turn.generation === turns[0]!.generation));
  t.true(turns[0]!.tools.some((tool) => tool.name === 'mcp__fs__gen_0'));
  t.is(host.profileKey('~/x'), path.join(process.env['HOME'] ?? '', 'x'));
});

test('isolation: two profiles with a same-named server but different commands never see each other\'s tools or errors', async (t) => {
  const tag = useFixtureTag(t);
  const host = createHost({
    profiles: {
      alpha: { mcpServers: { srv: stdioFixtureConfig(['--tools', '2'], { tag }) } },
      beta: { mcpServers: { srv: stdioFixtureConfig(['--exit-at-start', '7'], { tag }) } },
    },
  });
  t.teardown(() => host.close());
  const [alpha, beta] = await Promise.all([host.beginTurn('alpha'), host.beginTurn('beta')]);
  t.is(alpha.status, 'ready');
  t.deepEqual(alpha.failed, []);
  t.true(alpha.tools.some((tool) => tool.name === 'mcp__srv__gen_1'));
  t.is(beta.status, 'failed');
  t.deepEqual(beta.tools, []);
  t.like(beta.failed[0], { server: 'srv', kind: 'exited' });
  const result = await alpha.callTool('mcp__srv__echo', { text: 'from alpha' });
  t.deepEqual(result.content, [{ type: 'text', text: 'from alpha' }]);
  const error = await t.throwsAsync(beta.callTool('mcp__srv__echo', { text: 'x' }));
  t.true(isMcpSupervisorError(error) && error.code === 'UNKNOWN_TOOL');
});

test('cooldown recovery: a server that failed recovers on refresh without a host restart and without a second owner', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await mkdtemp(path.join(tmpdir(), 'mcp-supervisor-cooldown-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // The server's script does not exist yet: node exits at once ("Cannot find module").
  const script = path.join(dir, 'server.js');
  const clock = new ManualClock();
  const host = createHost({
    clock,
    discovery: { retryCooldownMs: 5000 },
    profiles: { p: { mcpServers: { late: { command: process.execPath, args: [script, '--tools', '1'], env: { MCP_FIXTURE_TAG: tag } } } } },
  });
  t.teardown(() => host.close());
  const first = await host.beginTurn('p');
  t.is(first.status, 'failed');
  t.like(first.failed[0], { server: 'late', kind: 'exited' });
  t.regex((host.status('p').servers['late'] as { stderrTail?: string }).stderrTail ?? '', /Cannot find module/);
  // The failure "returned normally"; now the server becomes available.
  await symlink(STDIO_FIXTURE, script);
  const settled = new Promise<void>((resolve) => host.on('discovery:settled', () => resolve()));
  await clock.advance(5000);
  await settled;
  await flush();
  const second = await host.beginTurn('p');
  t.is(second.status, 'ready');
  t.true(second.tools.some((tool) => tool.name === 'mcp__late__gen_0'));
  t.is(first.tools.length, 0, 'the earlier turn is untouched');
  t.is(host.stats().discovery.ownerOverlaps, 0);
});

test('turns are deeply frozen snapshots: tools that arrive later never change a turn already returned', async (t) => {
  const tag = useFixtureTag(t);
  const host = createHost({ profiles: { p: { mcpServers: { fs: stdioFixtureConfig([], { tag }) } } }, sessions: { listChangedDebounceMs: 0 } });
  t.teardown(() => host.close());
  const before = await host.beginTurn('p');
  t.true(Object.isFrozen(before) && Object.isFrozen(before.tools) && Object.isFrozen(before.tools[0]) && Object.isFrozen(before.tools[0]!.inputSchema));
  t.throws(() => (before.tools as unknown as unknown[]).push({}));
  const changed = new Promise<void>((resolve) => host.on('tools:changed', () => resolve()));
  await before.callTool('mcp__fs__add_tool', { name: 'late_tool' });
  await changed;
  const after = await host.beginTurn('p');
  t.true(after.tools.some((tool) => tool.name === 'mcp__fs__late_tool'));
  t.false(before.tools.some((tool) => tool.name === 'mcp__fs__late_tool'));
});

test('bad input: createHost with an invalid profile throws INVALID_CONFIG naming it, and options are validated', (t) => {
  const error = t.throws(() => createHost({ profiles: { work: { mcpServers: { fs: { command: 42 } } } } }));
  t.true(isMcpSupervisorError(error) && error.code === 'INVALID_CONFIG');
  t.regex(error!.message, /profile "work", server "fs", field `command`: expected a string, got `42` \(number\)/);
  const option = t.throws(() => createHost({ discovery: { readinessCapMs: -5 } }));
  t.regex(option!.message, /Expected `discovery.readinessCapMs` to be a positive integer, got `-5` \(number\)/);
  const replay = t.throws(() => createHost({ sessions: { replay: 'sometimes' as 'always' } }));
  t.regex(replay!.message, /sessions.replay/);
});

test('close(): every process is gone and later calls fail with HOST_CLOSED', async (t) => {
  const tag = useFixtureTag(t);
  const host = createHost({ profiles: { p: { mcpServers: { fs: stdioFixtureConfig(['--wrapper'], { tag }), hang: stdioFixtureConfig(['--hang-initialize'], { tag }) } } }, discovery: { connectTimeoutMs: 600_000 } });
  // A turn is left waiting on the hanging server while the host closes under it.
  const waiting = host.beginTurn('p');
  t.true(await pollUntil(() => host.status('p').servers['fs']?.status === 'ready', { timeoutMs: 30_000 }));
  t.true(pidsWithTag(tag).length >= 1, 'the hanging server is running');
  await host.close();
  t.deepEqual(pidsWithTag(tag), []);
  const pending = await t.throwsAsync(waiting);
  t.true(isMcpSupervisorError(pending) && pending.code === 'HOST_CLOSED');
  const error = await t.throwsAsync(host.beginTurn('p'));
  t.true(isMcpSupervisorError(error) && error.code === 'HOST_CLOSED');
});
