/**
 * A live session's bounded waits run on the injected clock: the DELETE that ends an unused HTTP
 * session, against a server that never answers, gives up when the clock says
 * {@link DELETE_TIMEOUT_MS} passed — not before, whatever the wall clock does.
 */
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseProfileConfig } from '../../src/config/parse.js';
import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import type { TrackedHttpTransport } from '../../src/connection/http-transport.js';
import { DELETE_TIMEOUT_MS, LiveSession, openStandaloneStream } from '../../src/sessions/live-session.js';
import { ManualClock, flush } from '../helpers/clock.js';

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

/** A stand-in for the one transport method the standalone stream needs: answers scripted statuses. */
function scriptedStream(statuses: number[]): { transport: TrackedHttpTransport; attempts: () => number } {
  let attempts = 0;
  const transport = {
    async resumeStream(): Promise<void> {
      const status = statuses[attempts++];
      // What the SDK's transport throws when the GET for the stream is refused.
      if (status !== undefined) throw new SdkHttpError(SdkErrorCode.ClientHttpFailedToOpenStream, `Failed to open SSE stream: ${status}`, { status });
    },
  } as unknown as TrackedHttpTransport;
  return { transport, attempts: () => attempts };
}

test('the standalone stream of a resumed session is retried while the server still holds the old one (409), and given up on 404/405', async (t) => {
  const clock = new ManualClock();
  const conflicted = scriptedStream([409, 409]);
  let done = false;
  const opening = openStandaloneStream(conflicted.transport, clock, () => true).then(() => (done = true));
  const waits: number[] = [];
  while (!done) {
    await flush();
    const next = clock.nextAt();
    if (next === undefined) continue;
    waits.push(next - clock.now());
    await clock.advance(next - clock.now());
  }
  await opening;
  t.is(conflicted.attempts(), 3, 'two conflicts, then the stream opened');
  t.deepEqual(waits, [25, 50], 'a short doubling delay between attempts');

  for (const status of [404, 405]) {
    const refused = scriptedStream([status]);
    await openStandaloneStream(refused.transport, clock, () => true);
    t.is(refused.attempts(), 1, `${status}: no standalone stream, nothing to retry`);
  }
});
