/**
 * A host program for the close test: a live session on a server that ignores stdin EOF and
 * SIGTERM (so close() walks the whole ladder, seconds of waiting on the library's unref'd
 * timers), and a discovery stuck on a hanging server. It awaits close() and then prints a line:
 * that line must always appear — the process may not exit in the middle of close().
 */
import { createHost } from '../../src/index.js';
import { stdioFixtureConfig } from '../helpers/fixtures.js';

const tag = process.argv[2] ?? 'close-then-print';
const host = createHost({
  profiles: {
    live: { mcpServers: { stubborn: stdioFixtureConfig(['--ignore-stdin-eof', '--ignore-sigterm'], { tag }) } },
    stuck: { mcpServers: { hang: stdioFixtureConfig(['--hang-initialize'], { tag }) } },
  },
  discovery: { maxThreads: 2, connectTimeoutMs: 600_000 },
});
const turn = await host.beginTurn('live');
await turn.callTool('mcp__stubborn__echo', { text: 'up' });
host.start();
await host.close();
process.stdout.write('after close\n');
