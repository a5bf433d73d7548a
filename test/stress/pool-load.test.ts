/**
 * A discovery pool closed while its worker is still loading must never abort the host process.
 *
 * Piscina loads a worker's module with `require()`, and on Node ≥ 20.19 `require()` of an ES
 * module instantiates it synchronously: terminating the worker in that window aborted the whole
 * process (FATAL ERROR: v8::Module::IsGraphAsync …), about once in 200 pools destroyed 0–300 ms
 * after creation. The worker entry is CommonJS and imports the body asynchronously. This test
 * closes coordinators at delays spread over a worker's start-up; had the window come back, the
 * test process would die of SIGABRT (ava reports the file as crashed) in a fair share of runs.
 */
import test from 'ava';
import { DiscoveryCoordinator } from '../../src/discovery/index.js';

test('coordinators closed at every moment of their worker\'s start-up all close, and the process lives on', async (t) => {
  const POOLS = 80;
  let closed = 0;
  for (let index = 0; index < POOLS; index++) {
    const coordinator = new DiscoveryCoordinator({ maxThreads: 1 });
    // 0–316 ms in 4 ms steps, in a scrambled order: across the worker's whole start-up.
    await new Promise((resolve) => setTimeout(resolve, ((index * 37) % POOLS) * 4));
    await coordinator.close();
    closed++;
  }
  t.is(closed, POOLS);
});
