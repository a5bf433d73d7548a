/**
 * `node --import <dist/test/programs/delay-resumed-get.js>` preload for a Streamable HTTP server
 * run by the tests (test/helpers/reference-servers.ts): network latency on exactly one kind of
 * request — a GET (the standalone SSE stream) for an `Mcp-Session-Id` that already had a GET.
 *
 * A client that keeps one connection per session opens that stream once and never sees the
 * delay. A client that hands a session over from one connection to another (the library's
 * discovery worker → main thread) opens it a second time, and that second stream only comes up
 * `MCP_TEST_DELAY_SECOND_GET_MS` later: whatever the server sends on its standalone stream in
 * between lands in that window deterministically, instead of once in a while under load.
 *
 * Implemented on `http.Server`'s 'request' event (what express listens to), nothing of the server
 * itself is touched. Without the variable (or with 0) it does nothing.
 */
import http from 'node:http';

const delayMs = Number(process.env['MCP_TEST_DELAY_SECOND_GET_MS'] ?? 0);

if (Number.isFinite(delayMs) && delayMs > 0) {
  const sessionsWithGet = new Set<string>();
  const emit = http.Server.prototype.emit as (this: http.Server, event: string | symbol, ...args: unknown[]) => boolean;
  http.Server.prototype.emit = function delayingEmit(this: http.Server, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'request') {
      const request = args[0] as http.IncomingMessage;
      const session = request.headers['mcp-session-id'];
      if (request.method === 'GET' && typeof session === 'string') {
        if (sessionsWithGet.has(session)) {
          process.stderr.write(`delay-resumed-get: GET of session ${session} held ${delayMs} ms\n`);
          setTimeout(() => emit.call(this, event, ...args), delayMs);
          return true;
        }
        sessionsWithGet.add(session);
      }
    }
    return emit.call(this, event, ...args);
  } as typeof http.Server.prototype.emit;
}
