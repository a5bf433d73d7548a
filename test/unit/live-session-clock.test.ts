/**
 * A live session's bounded waits run on the injected clock: the DELETE that ends an unused HTTP
 * session, against a server that never answers, gives up when the clock says
 * {@link DELETE_TIMEOUT_MS} passed — not before, whatever the wall clock does.
 */
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseProfileConfig } from '../../src/config/parse.js';
import { DELETE_TIMEOUT_MS, LiveSession } from '../../src/sessions/live-session.js';
import { ManualClock } from '../helpers/clock.js';

test('LiveSession.discard: a DELETE nobody answers is abandoned at DELETE_TIMEOUT_MS of the injected clock', async (t) => {
  const deletes: string[] = [];
  const held: http.ServerResponse[] = [];
  const silent = http.createServer((request, response) => {
    deletes.push(request.method ?? '');
    held.push(response);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const response of held) response.destroy();
    silent.close();
  });
  const { port } = silent.address() as AddressInfo;
  const server = parseProfileConfig({ mcpServers: { fx: { type: 'http', url: `http://127.0.0.1:${port}/mcp` } } }, { profile: 'clock' }).servers['fx'];
  if (!server) throw new Error('no server');
  const clock = new ManualClock();
  let done = false;
  const discarding = LiveSession.discard(server, { sessionId: 'abc', protocolVersion: '2025-06-18' }, clock).then(() => {
    done = true;
  });
  // Real time passes well beyond the bound's worth of event-loop turns: the DELETE is held.
  for (let turn = 0; turn < 50 && deletes.length === 0; turn++) await new Promise((resolve) => setTimeout(resolve, 10));
  t.deepEqual(deletes, ['DELETE']);
  await clock.advance(DELETE_TIMEOUT_MS - 1);
  t.false(done, 'still waiting one millisecond before the bound');
  await clock.advance(1);
  // At once, not when a wall-clock timer of DELETE_TIMEOUT_MS would fire.
  const started = Date.now();
  while (!done && Date.now() - started < DELETE_TIMEOUT_MS / 2) await new Promise((resolve) => setTimeout(resolve, 10));
  t.true(done, 'given up as soon as the injected clock reached the bound');
  await discarding;
});
