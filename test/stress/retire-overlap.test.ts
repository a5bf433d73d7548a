/**
 * retire-overlap: however retire (quiesce) and start calls interleave, a key never has two live
 * discovery bodies. fast-check's scheduler decides the order in which concurrent operations
 * begin and in which their awaits resume; the bodies and their processes are real.
 */
import test from 'ava';
import fc from 'fast-check';
import { DiscoveryCoordinator } from '../../src/discovery/index.js';
import { isMcpSupervisorError, parseProfileConfig, type ServerConfig } from '../../src/index.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil } from '../helpers/processes.js';

test('retire-then-start never overlaps: no two bodies of one key alive at once across 200 schedules', async (t) => {
  const tag = useFixtureTag(t);
  // A real process that never answers initialize keeps each body alive until it is retired.
  const hanging: ServerConfig[] = Object.values(
    parseProfileConfig({ mcpServers: { hang: { command: '/bin/sleep', args: ['120'], env: { MCP_FIXTURE_TAG: tag } } } }, { profile: 'k' }).servers,
  );
  const coordinator = new DiscoveryCoordinator({ maxThreads: 2, connectTimeoutMs: 600_000, quiesceGraceMs: 250 });
  t.teardown(() => coordinator.close().then(() => undefined));
  let maxLiveOwners = 0;
  let starts = 0;
  let refusedStarts = 0;
  let sawSpawn = false;
  const sample = (): void => {
    maxLiveOwners = Math.max(maxLiveOwners, coordinator.liveOwners('k'));
  };
  const sampler = setInterval(sample, 1);

  await fc.assert(
    fc.asyncProperty(fc.scheduler(), fc.array(fc.constantFrom('retry', 'retire', 'start', 'spawned'), { minLength: 1, maxLength: 5 }), async (s, ops) => {
      const operations = ops.map(async (op) => {
        await s.schedule(Promise.resolve(op));
        sample();
        if (op === 'spawned') {
          // Let the live body (if any) get as far as spawning its server before anything else runs.
          await pollUntil(() => !coordinator.hasOwner('k') || coordinator.stats().recordedChildren > 0, { timeoutMs: 10_000, intervalMs: 2 });
          sawSpawn ||= coordinator.stats().recordedChildren > 0;
          return;
        }
        if (op !== 'start') {
          const report = await s.schedule(coordinator.quiesce('k', op));
          if (!report.quiesced) throw new Error(`quiesce failed: ${JSON.stringify(report)}`);
        }
        sample();
        if (op === 'retire') return;
        try {
          coordinator.start('k', hanging, { onOutcome: () => undefined, onDone: () => undefined });
          starts++;
        } catch (error) {
          // The guard itself: a start while a body lives is refused, never run.
          if (!isMcpSupervisorError(error) || error.code !== 'QUIESCE_FAILED') throw error;
          refusedStarts++;
        }
        sample();
      });
      await s.waitAll();
      await Promise.all(operations);
      const report = await coordinator.quiesce('k', 'end of schedule');
      if (!report.quiesced) throw new Error(`final quiesce failed: ${JSON.stringify(report)}`);
      sample();
      return coordinator.liveOwners('k') === 0 && coordinator.stats().ownerOverlaps === 0 && maxLiveOwners <= 1;
    }),
    { numRuns: 200 },
  );
  clearInterval(sampler);
  t.is(maxLiveOwners, 1, 'bodies did run');
  t.is(coordinator.stats().ownerOverlaps, 0);
  t.true(starts > 100);
  t.true(sawSpawn, 'some schedules retired bodies that had live processes');
  t.log(`${starts} bodies started, ${refusedStarts} starts refused while a body was alive`);
  await coordinator.close();
  t.deepEqual(pidsWithTag(tag), []);
});
