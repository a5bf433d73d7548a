/**
 * close() a host can rely on (docs/ARCHITECTURE.md §9): one promise for every caller, resolved only once every
 * process is gone; every network step bounded (an HTTP server that never answers DELETE cannot
 * hold it); and the event loop kept alive until it is done.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { startHttpFixture, stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag } from '../helpers/processes.js';
import { guardOpenHandles, newHost, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

const PROGRAM = fileURLToPath(new URL('../programs/close-then-print.js', import.meta.url));

test('close() with an HTTP server that never answers DELETE resolves (the DELETE is bounded)', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const host = newHost(t, { web: { url: fixture.url } });
  const turn = await host.beginTurn();
  t.is(textOf(await turn.callTool('mcp__web__echo', { text: 'live' })), 'live');
  await fixture.setHangDelete(true);
  const started = performance.now();
  await host.close();
  const took = performance.now() - started;
  t.log(`close() took ${Math.round(took)} ms with a DELETE that is never answered`);
  t.true((await fixture.stats()).deletesHeld >= 1, 'the DELETE was sent and held');
  // Generous: the bound is 2 s per DELETE; the old code waited for the socket's 300 s timeout.
  t.true(took < 15_000);
});

test('two concurrent close() calls are one promise, resolved after every server process is gone', async (t) => {
  const tag = useFixtureTag(t);
  const host = newHost(t, { stubborn: stdioFixtureConfig(['--ignore-stdin-eof', '--ignore-sigterm'], { tag }), plain: stdioFixtureConfig([], { tag }) });
  const turn = await host.beginTurn();
  await turn.callTool('mcp__stubborn__echo', { text: 'a' });
  await turn.callTool('mcp__plain__echo', { text: 'b' });
  t.true(pidsWithTag(tag).length >= 2);
  const first = host.close();
  const second = host.close();
  t.is(first, second, 'one memoised promise');
  await second;
  t.deepEqual(pidsWithTag(tag), [], 'nothing the host started is left when close() resolves');
  t.is(host.close(), first, 'a later close() is the same promise');
});

test('a program that awaits close() and then prints a line always prints it', async (t) => {
  const tag = useFixtureTag(t);
  const child = spawn(process.execPath, [PROGRAM, tag], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // Only a guard against hanging the suite.
  const guard = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(guard);
  t.is(signal, null, stderr);
  t.is(code, 0, stderr);
  t.is(stdout, 'after close\n');
  t.deepEqual(pidsWithTag(tag), []);
});
