/**
 * `node --import <dist/test/programs/listen-report.js>` preload for reference servers run by the
 * tests in their network modes (test/helpers/reference-servers.ts), which print no usable port:
 * server-everything's Streamable HTTP mode reads `PORT` from its environment and logs
 * "listening on port ${PORT}" — with `PORT=0` that says 0, not the port the kernel chose.
 *
 * 1. Once a TCP server of this process is listening, it writes one line to **stderr**:
 *    `mcp-listen-report {"port":<n>,"address":"<ip>","pid":<pid>}` (stdout is the server's own
 *    log, which starts before it listens). A pipe or an inherited descriptor is not reported.
 * 2. When stdin ends (the test runner closed its pipe, or died), the process exits: a server the
 *    tests started can never outlive them, even if no teardown ran.
 *
 * 3. It fails closed: loopback-only listening is ../conformance/preload.ts, which must be loaded
 *    first (`--import` order); if its `listen` patch is not in place when this file loads, the
 *    process exits (code 70) before anything listens, and a server that nonetheless ends up
 *    listening on anything but 127.0.0.1 is exited at once.
 */
import net from 'node:net';

export const LISTEN_REPORT_PREFIX = 'mcp-listen-report ';

const loopbackPatch = (net.Server.prototype as unknown as { _listen2?: { name?: string } })._listen2;
if (loopbackPatch?.name !== 'listenOnLoopback') {
  process.stderr.write('listen-report: the loopback preload (test/conformance/preload.ts) is not active; refusing to start\n');
  process.exit(70);
}

const listen = net.Server.prototype.listen as (this: net.Server, ...args: unknown[]) => net.Server;
net.Server.prototype.listen = function reportingListen(this: net.Server, ...args: unknown[]) {
  this.once('listening', () => {
    const address = this.address();
    if (address === null || typeof address === 'string') return;
    if (address.address !== '127.0.0.1') {
      process.stderr.write(`listen-report: listening on ${address.address}:${address.port}, not 127.0.0.1; exiting\n`);
      process.exit(70);
    }
    process.stderr.write(`${LISTEN_REPORT_PREFIX}${JSON.stringify({ port: address.port, address: address.address, pid: process.pid })}\n`);
  });
  return listen.apply(this, args);
} as typeof net.Server.prototype.listen;

process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
