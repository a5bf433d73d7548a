/**
 * The coordinator's quiescence ladder runs on the clock it is given: a real body, stuck in a
 * synchronous loop with a real server running, is terminated and its process group killed only as
 * the test moves a manual clock.
 */
import test from 'ava';
import { DiscoveryCoordinator } from '../../src/discovery/index.js';
import { parseProfileConfig } from '../../src/index.js';
import { ManualClock } from '../helpers/clock.js';
import { stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil } from '../helpers/processes.js';

test('a stuck body is terminated when the coordinator\'s clock passes the grace, then its processes are killed on that clock', async (t) => {
  const tag = useFixtureTag(t);
  // The ladder's waits never keep Node alive by themselves: the test does, until teardown.
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  const clock = new ManualClock();
  // A hard wait far beyond what the test will move the clock by: only the grace can expire.
  const coordinator = new DiscoveryCoordinator({ maxThreads: 1, connectTimeoutMs: 600_000, quiesceGraceMs: 100, quiesceHardWaitMs: 600_000 }, undefined, undefined, undefined, clock);
  t.teardown(() => coordinator.close().then(() => undefined));
  const servers = Object.values(parseProfileConfig({ mcpServers: { hang: stdioFixtureConfig(['--hang-initialize', '--wrapper'], { tag }) } }, { profile: 'p' }).servers);
  coordinator.start('p', servers, { onOutcome: () => undefined, onDone: () => undefined }, { blockAfterSpawnMs: -1 });
  t.true(await pollUntil(() => coordinator.stats().recordedChildren === 1 && pidsWithTag(tag).length >= 2, { timeoutMs: 10_000 }));

  let settled = false;
  const quiescing = coordinator.quiesce('p', 'stuck').finally(() => (settled = true));
  t.is(clock.pending(), 1, 'the cooperative grace is a timer on the manual clock');
  t.is(clock.nextAt(), clock.now() + 100);
  await clock.advance(99);
  t.false(settled);
  t.is(coordinator.stats().workers, 1, 'not terminated before the clock says so');

  // Past the grace: the worker is terminated (in real time); the kill rung then polls on the clock.
  while (!settled) await clock.advance(5);
  const report = await quiescing;
  t.is(report.rung, 'kill', JSON.stringify(report));
  t.true(report.quiesced);
  t.deepEqual(report.survivors, []);
  t.deepEqual(pidsWithTag(tag), []);
  t.is(coordinator.liveOwners('p'), 0);
});
