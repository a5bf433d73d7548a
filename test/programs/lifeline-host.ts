/**
 * A host-like program for the lifeline tests and bench: starts a `Lifeline`, spawns marked process
 * groups (see `test/helpers/lifeline-trees.ts`), prints one JSON line describing them, then ends
 * the way it is told:
 *
 *   node lifeline-host.js <ending> <tag> <tmpDir> [test|bench]
 *
 *   sigkill | sigterm | wait   stay alive; the caller sends the signal (no listener is installed).
 *   exit                       on stdin EOF: process.exit(3).
 *   throw                      on stdin EOF: an uncaught exception thrown from a timer.
 *   close                      on stdin EOF: SIGKILL the leaders' groups (what host.close() does),
 *                              `await lifeline.close()`, print a `closed` line and simply return
 *                              (Node must then exit by itself).
 * In the staying-alive endings, stdin EOF means the caller is gone: exit 0.
 *
 * Every spawned process gets `MCP_FIXTURE_TAG=<tag>` and the lifeline marker. An `exit` listener
 * registered after `Lifeline.start()` (listeners run in order) prints which tree processes were
 * still running once the lifeline's own exit hook had run.
 */
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { Lifeline } from '../../src/process/lifeline.js';
import { killGroups, spawnTree, type TreeLayout } from '../helpers/lifeline-trees.js';
import { pidsInGroup, pollUntil, procState } from '../helpers/processes.js';

const [ending = 'wait', tag = 'lifeline-host', dir = tmpdir(), layoutArg = 'test'] = process.argv.slice(2);
const layout: TreeLayout = layoutArg === 'bench' ? 'bench' : 'test';

const listenerCounts = () => ({
  SIGTERM: process.listenerCount('SIGTERM'),
  SIGINT: process.listenerCount('SIGINT'),
  SIGHUP: process.listenerCount('SIGHUP'),
  exit: process.listenerCount('exit'),
});
const beforeStart = listenerCounts();
const lifeline = Lifeline.start();
const afterStart = listenerCounts();
const tree = await spawnTree(layout, { env: { MCP_FIXTURE_TAG: tag, ...lifeline.env }, tmpDir: dir, label: `host-${process.pid}` });
const running = () => tree.processes.filter((entry) => procState(entry.pid) === 'alive').map((entry) => entry.pid);

process.on('exit', (code) => {
  process.stdout.write(`exit-hook ${JSON.stringify({ code, running: running() })}\n`);
});

process.stdout.write(
  `${JSON.stringify({
    host: process.pid,
    reaper: lifeline.pid,
    processes: tree.processes,
    leaderGroups: tree.leaderGroups,
    // What Lifeline.start() added, and what is installed now that the tree is up.
    listenersAdded: Object.fromEntries(Object.entries(afterStart).map(([name, count]) => [name, count - beforeStart[name as keyof typeof beforeStart]])),
    listeners: listenerCounts(),
  })}\n`,
);

process.stdin.resume();
process.stdin.once('end', () => {
  switch (ending) {
    case 'exit':
      process.exit(3);
      break;
    case 'throw':
      setTimeout(() => {
        throw new Error('lifeline-host: uncaught on purpose');
      }, 0);
      break;
    case 'close':
      void closeNormally();
      break;
    default:
      process.exit(0);
  }
});

async function closeNormally(): Promise<void> {
  killGroups(tree.leaderGroups);
  await Promise.all(tree.leaders.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : once(child, 'exit'))));
  // As the library's transport does, wait (bounded) until no member of those groups still runs.
  await pollUntil(() => tree.leaderGroups.every((pgid) => pidsInGroup(pgid).length === 0), { timeoutMs: 5000 });
  // The escaper left its group, so the group kills above missed it: the reaper's scan gets it.
  const beforeClose = running();
  await lifeline.close();
  process.stdout.write(`closed ${JSON.stringify({ runningBeforeClose: beforeClose, reaperRunning: lifeline.running })}\n`);
  // Diagnostics for the test if Node fails to exit now: what is still holding the loop.
  setTimeout(() => process.stderr.write(`still running: ${process.getActiveResourcesInfo().join(', ')}\n`), 10_000).unref();
}
