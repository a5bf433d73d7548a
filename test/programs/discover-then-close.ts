/**
 * A host-like program for the clean-exit test: discovers a healthy and a hanging server (under a
 * shell wrapper), closes, and then simply returns. The test passes only if Node exits by itself,
 * i.e. close() left no worker, process, port, socket or timer keeping the event loop alive.
 */
import { DiscoveryCoordinator } from '../../src/discovery/index.js';
import { parseProfileConfig } from '../../src/index.js';
import { stdioFixtureConfig } from '../helpers/fixtures.js';

const tag = process.argv[2] ?? 'clean-exit';
const { servers } = parseProfileConfig(
  {
    mcpServers: {
      healthy: stdioFixtureConfig(['--tools', '3'], { tag }),
      hang: stdioFixtureConfig(['--hang-initialize', '--wrapper'], { tag }),
    },
  },
  { profile: 'p' },
);
const coordinator = new DiscoveryCoordinator({ maxThreads: 2, connectTimeoutMs: 600_000 });
await new Promise<void>((resolve) => {
  coordinator.start('p', Object.values(servers), {
    onOutcome: (outcome) => {
      process.stdout.write(`${outcome.server} ${outcome.status}\n`);
      if (outcome.server === 'healthy') resolve();
    },
    onDone: () => undefined,
  });
});
// As the host's close() does: the coordinator's waits are unref'd, so on a loaded machine, with
// the body's port closed and its processes still dying, nothing else would keep the loop alive
// until close() resolves (Node would exit 13, "unsettled top-level await").
const keepAlive = setInterval(() => undefined, 1 << 30);
const [report] = await coordinator.close();
clearInterval(keepAlive);
process.stdout.write(`closed quiesced=${String(report?.quiesced)}\n`);
// Diagnostics for the test if the process fails to exit: what is still holding the loop.
setTimeout(() => process.stderr.write(`still running: ${process.getActiveResourcesInfo().join(', ')}\n`), 10_000).unref();
