/**
 * The bounded write buffer of the Redis store, without Redis: per-key order (a key's later
 * writes wait behind one in flight), read-your-writes, accounting of writes in flight, and the
 * bound (oldest key dropped, reported).
 */
import test from 'ava';
import type { BindRecord } from '../../src/gateway/index.js';
import { applyChain, recordKey, WriteBuffer, type Mutation } from '../../src/redis/buffer.js';

/** A change that appends `mark` to `lastNonce`: order-sensitive, so order mistakes show. */
const append = (mark: string): Mutation => (current) => ({
  agent: current?.agent ?? 'a',
  epoch: current?.epoch ?? 'e',
  observedAt: undefined,
  lastNonce: `${current?.lastNonce ?? ''}${mark}`,
  lastLaunchId: undefined,
  probe: undefined,
});
const marks = (chain: readonly Mutation[] | undefined, base?: BindRecord) => applyChain(chain ?? [], base)?.lastNonce;

test('writes of one key are chained in order and applied to whatever is current', (t) => {
  const buffer = new WriteBuffer(10, () => t.fail());
  buffer.add('e', 'a', append('1'));
  buffer.add('e', 'a', append('2'));
  buffer.add('e', 'b', append('x'));
  t.is(buffer.size, 3);
  t.is(marks(buffer.chainOf(recordKey('e', 'a'))), '12');
  t.is(marks(buffer.chainOf(recordKey('e', 'a')), { agent: 'a', epoch: 'e', observedAt: 1, lastNonce: '0', lastLaunchId: undefined, probe: undefined }), '012');
  const first = buffer.take()!;
  t.is(first.agent, 'a', 'the longest-waiting key first');
  t.is(buffer.size, 3, 'writes in flight still count');
  t.true(buffer.holds(recordKey('e', 'a')), 'later writes of a key in flight must wait');
  buffer.add('e', 'a', append('3'));
  t.is(marks(buffer.chainOf(recordKey('e', 'a'))), '123', 'a read sees the writes in flight and those behind them');
  // The write failed: it goes back ahead of the one made meanwhile.
  buffer.restore(first);
  t.is(marks(buffer.chainOf(recordKey('e', 'a'))), '123');
  t.is(buffer.size, 4);
  const next = buffer.take()!;
  t.is(next.agent, 'b');
  buffer.done(next);
  const again = buffer.take()!;
  t.is(marks(again.chain), '123');
  buffer.done(again);
  t.is(buffer.size, 0);
  t.false(buffer.holds(recordKey('e', 'a')));
});

test('the bound counts writes; beyond it the oldest key is dropped with all its writes, and reported', (t) => {
  const dropped: number[] = [];
  const buffer = new WriteBuffer(3, (count) => dropped.push(count));
  buffer.add('e', 'old', append('1'));
  buffer.add('e', 'old', append('2'));
  buffer.add('e', 'mid', append('3'));
  t.deepEqual(dropped, []);
  buffer.add('e', 'new', append('4'));
  t.deepEqual(dropped, [2], 'both writes of the oldest key');
  t.is(buffer.size, 2);
  t.is(buffer.chainOf(recordKey('e', 'old')), undefined);
  t.is(buffer.clear(), 2);
  t.is(buffer.size, 0);
});
