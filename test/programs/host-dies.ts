/**
 * A host that dies without close(): a live session on a server that ignores stdin EOF and
 * SIGTERM, under a shell wrapper with a grandchild, and a discovery stuck on a hanging server.
 * Once everything runs it prints `ready`, waits for a line on stdin, then ends as argv[3] says:
 *   sigkill | sigterm  wait to be killed by the test (no signal listener is installed)
 *   exit               process.exit(3)
 *   throw              an uncaught exception from a timer
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../helpers/fixtures.js';

const tag = process.argv[2] ?? 'host-dies';
const ending = process.argv[3] ?? 'sigkill';
const host = createHost({
  profiles: {
    live: { mcpServers: { stubborn: stdioFixtureConfig(['--ignore-stdin-eof', '--ignore-sigterm', '--wrapper'], { tag }) } },
    stuck: { mcpServers: { hang: stdioFixtureConfig(['--hang-initialize'], { tag }) } },
  },
  discovery: { maxThreads: 2, connectTimeoutMs: 600_000 },
});
const turn = await host.beginTurn('live');
await turn.callTool('mcp__stubborn__echo', { text: 'up' });
host.start();
// The stuck discovery has spawned its server once the stats record it.
while (host.stats().discovery.recordedChildren < 1) await new Promise((resolve) => setTimeout(resolve, 10));
process.stdout.write('ready\n');
// The test counts the processes first, then says go.
process.stdin.once('data', () => {
  if (ending === 'exit') process.exit(3);
  if (ending === 'throw') {
    setTimeout(() => {
      throw new Error('the host crashed');
    }, 1);
  }
});
// sigkill / sigterm: stay alive until the test kills us.
setInterval(() => undefined, 1 << 30);
