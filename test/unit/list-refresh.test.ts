/**
 * `list_changed` refreshes on a manual clock with a fake client: notifications within the
 * debounce make one refresh, one that arrives while a refresh runs makes it run once more, a list
 * over the limits or a failed listing keeps the old list, and `stop()` ends it all.
 */
import test from 'ava';
import type { McpClient as Client } from '../../src/connection/connect.js';
import { type ListRefreshDeps, ListRefresher, withinLimits } from '../../src/sessions/list-refresh.js';
import type { CatalogLists } from '../../src/sessions/types.js';
import { type Barrier, ManualClock, barrier, flush } from '../helpers/clock.js';

const DEBOUNCE = 200;

/** A client whose list requests the test answers by hand, one at a time. */
class FakeClient {
  readonly requests: { method: string; cursor: string | undefined; answer: Barrier<Record<string, unknown>> }[] = [];

  request(request: { method: string; params?: { cursor?: string } }): Promise<Record<string, unknown>> {
    const answer = barrier<Record<string, unknown>>();
    this.requests.push({ method: request.method, cursor: request.params?.cursor, answer });
    return answer.promise;
  }

  /** The old era: tool lists are read page by page with plain requests. */
  getProtocolEra(): 'legacy' {
    return 'legacy';
  }

  /** Answers the oldest unanswered request. */
  async answer(result: Record<string, unknown>): Promise<void> {
    const pending = this.requests.find((request) => !request.answer.settled);
    if (!pending) throw new Error('no request waiting');
    pending.answer.resolve(result);
    await flush();
  }

  async fail(): Promise<void> {
    const pending = this.requests.find((request) => !request.answer.settled);
    if (!pending) throw new Error('no request waiting');
    pending.answer.reject(new Error('connection closed'));
    await flush();
  }
}

function refresher(options: Partial<ListRefreshDeps['options']> = {}): { clock: ManualClock; client: FakeClient; published: CatalogLists[]; lists: ListRefresher } {
  const clock = new ManualClock();
  const client = new FakeClient();
  const published: CatalogLists[] = [];
  const lists = new ListRefresher({
    clock,
    options: { listChangedDebounceMs: DEBOUNCE, callTimeoutMs: 1000, ...options },
    client: () => client as unknown as Client,
    publish: (changed) => published.push(changed),
  });
  return { clock, client, published, lists };
}

const tool = (name: string) => ({ name, inputSchema: { type: 'object' as const } });

test('notifications within the debounce make one refresh, which lists every page', async (t) => {
  const { clock, client, published, lists } = refresher();
  lists.schedule('tools');
  await clock.advance(DEBOUNCE - 1);
  lists.schedule('tools');
  await clock.advance(DEBOUNCE - 1);
  t.is(client.requests.length, 0, 'still debouncing');
  await clock.advance(1);
  t.deepEqual(
    client.requests.map((request) => request.method),
    ['tools/list'],
  );
  await client.answer({ tools: [tool('a')], nextCursor: 'page2' });
  t.is(client.requests[1]?.cursor, 'page2');
  await client.answer({ tools: [tool('b')] });
  t.deepEqual(published, [{ tools: [tool('a'), tool('b')] }]);
});

test('a notification while a refresh runs makes it run once more afterwards', async (t) => {
  const { clock, client, published, lists } = refresher();
  lists.schedule('prompts');
  await clock.advance(DEBOUNCE);
  lists.schedule('prompts');
  await clock.advance(DEBOUNCE);
  t.is(client.requests.length, 1, 'one refresh at a time');
  await client.answer({ prompts: [{ name: 'old' }] });
  await clock.advance(DEBOUNCE);
  t.is(client.requests.length, 2, 'the refresh runs again');
  await client.answer({ prompts: [{ name: 'new' }] });
  t.deepEqual(published, [{ prompts: [{ name: 'old' }] }, { prompts: [{ name: 'new' }] }]);
});

test('resources bring their templates along; a server without templates still refreshes its resources', async (t) => {
  const { clock, client, published, lists } = refresher();
  lists.schedule('resources');
  await clock.advance(DEBOUNCE);
  await client.answer({ resources: [{ uri: 'file:///a', name: 'a' }] });
  await client.answer({ resourceTemplates: [{ uriTemplate: 'file:///{x}', name: 'x' }] });
  lists.schedule('resources');
  await clock.advance(DEBOUNCE);
  await client.answer({ resources: [{ uri: 'file:///b', name: 'b' }] });
  await client.fail();
  t.deepEqual(published, [
    { resources: [{ uri: 'file:///a', name: 'a' }], resourceTemplates: [{ uriTemplate: 'file:///{x}', name: 'x' }] },
    { resources: [{ uri: 'file:///b', name: 'b' }] },
  ]);
});

test('a list over the limits or a failed listing keeps the old list', async (t) => {
  const { clock, client, published, lists } = refresher({ maxCatalogItems: 1 });
  lists.schedule('tools');
  await clock.advance(DEBOUNCE);
  await client.answer({ tools: [tool('a'), tool('b')] });
  lists.schedule('tools');
  await clock.advance(DEBOUNCE);
  await client.fail();
  t.deepEqual(published, []);
});

test('stop() cancels a pending refresh and schedules none after', async (t) => {
  const { clock, client, lists } = refresher();
  lists.schedule('tools');
  lists.stop();
  lists.schedule('prompts');
  await clock.advance(DEBOUNCE * 10);
  t.is(client.requests.length, 0);
  t.is(clock.pending(), 0);
});

test('withinLimits: items per list and the depth of tool schemas', (t) => {
  t.true(withinLimits({ tools: [tool('a')], prompts: [] }, 1, 5));
  t.false(withinLimits({ resources: [{ uri: 'a', name: 'a' }, { uri: 'b', name: 'b' }] }, 1, 5));
  const deep = { name: 'deep', inputSchema: { type: 'object' as const, properties: { a: { type: 'object', properties: { b: { type: 'object', properties: { c: { type: 'string' } } } } } } } };
  t.false(withinLimits({ tools: [deep] }, 10, 2));
  t.true(withinLimits({ tools: [deep] }, 10, 20));
});
