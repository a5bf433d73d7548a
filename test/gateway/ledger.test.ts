/**
 * The bind ledger without MCP traffic: epochs, probe fulfilment, passive successes, the status
 * view, and the gateway's epoch-carrying session ids.
 */
import test from 'ava';
import { createGateway, epochOfSession, MemoryBindStore, type BindStore } from '../../src/gateway/index.js';
import { BindLedger } from '../../src/gateway/ledger.js';
import { isMcpSupervisorError } from '../../src/errors.js';
import { ManualClock } from './helpers.js';

function setup(store: BindStore = new MemoryBindStore()) {
  const clock = new ManualClock();
  let n = 0;
  const errors: string[] = [];
  const ledger = new BindLedger({
    store,
    clock,
    newEpoch: () => `ep${++n}`,
    onError: (error, context) => errors.push(`${context}: ${String(error)}`),
  });
  return { ledger, clock, store, errors };
}

test('status of an agent never seen: unbound, current epoch, nothing else', async (t) => {
  const { ledger } = setup();
  t.deepEqual(await ledger.status('a'), {
    agent: 'a',
    bound: false,
    epoch: 'ep1',
    lastNonce: undefined,
    lastLaunchId: undefined,
    observedAt: undefined,
    ageMs: undefined,
    probe: undefined,
  });
});

test('a delivered probe request does not bind; a matching probe fulfils it and binds', async (t) => {
  const { ledger, clock } = setup();
  const requestedAt = clock.now();
  t.like(await ledger.requestProbe('a', { nonce: 'n1', launchId: 'L1' }), { nonce: 'n1', fulfilled: false, ageMs: 0 });
  t.false((await ledger.status('a')).bound);
  clock.advance(5_000);
  t.deepEqual(await ledger.recordProbe('a', { nonce: 'n1', launchId: 'L1' }), {
    agent: 'a',
    nonce: 'n1',
    launchId: 'L1',
    gatewayEpoch: 'ep1',
    observedAt: requestedAt + 5_000,
  });
  clock.advance(1_000);
  t.deepEqual(await ledger.status('a'), {
    agent: 'a',
    bound: true,
    epoch: 'ep1',
    lastNonce: 'n1',
    lastLaunchId: 'L1',
    observedAt: requestedAt + 5_000,
    ageMs: 1_000,
    probe: {
      nonce: 'n1',
      launchId: 'L1',
      epoch: 'ep1',
      requestedAt,
      fulfilledAt: requestedAt + 5_000,
      fulfilled: true,
      ageMs: 6_000,
    },
  });
});

test('a nonce or launch-id mismatch does not fulfil the request (but still proves the agent reached a handler)', async (t) => {
  const { ledger } = setup();
  await ledger.requestProbe('a', { nonce: 'n1', launchId: 'L1' });
  await ledger.recordProbe('a', { nonce: 'n2', launchId: 'L1' });
  let status = await ledger.status('a');
  t.false(status.probe?.fulfilled);
  t.true(status.bound);
  t.is(status.lastNonce, 'n2');
  await ledger.recordProbe('a', { nonce: 'n1', launchId: 'L0' });
  status = await ledger.status('a');
  t.false(status.probe?.fulfilled);
  t.is(status.lastLaunchId, 'L0');
  await ledger.recordProbe('a', { nonce: 'n1', launchId: 'L1' });
  t.true((await ledger.status('a')).probe?.fulfilled);
});

test('a probe is fulfilled only in the epoch it was delivered in', async (t) => {
  const { ledger } = setup();
  await ledger.requestProbe('a', { nonce: 'n1', launchId: 'L1' });
  await ledger.bump();
  await ledger.recordProbe('a', { nonce: 'n1', launchId: 'L1' });
  const status = await ledger.status('a');
  t.is(status.probe, undefined, 'the request of the old epoch is gone');
  t.is(status.lastNonce, 'n1');
});

test('a passive success refreshes observedAt and keeps the nonce within an epoch, and starts fresh across epochs', async (t) => {
  const { ledger, clock } = setup();
  await ledger.recordProbe('a', { nonce: 'n1', launchId: 'L1' });
  clock.advance(30_000);
  t.true(await ledger.recordSuccess('a'));
  let status = await ledger.status('a');
  t.is(status.observedAt, clock.now());
  t.is(status.lastNonce, 'n1');
  t.is(status.lastLaunchId, 'L1');
  await ledger.bump();
  t.true(await ledger.recordSuccess('a'));
  status = await ledger.status('a');
  t.true(status.bound);
  t.is(status.epoch, 'ep2');
  t.is(status.lastNonce, undefined);
  t.is(status.lastLaunchId, undefined);
});

test('an epoch bump unbinds every agent at once and purges the old epoch from the store', async (t) => {
  const { ledger, store } = setup();
  await ledger.recordSuccess('a');
  await ledger.requestProbe('b', { nonce: 'n', launchId: 'L' });
  const bumped = ledger.bump();
  t.is(ledger.epoch, 'ep2', 'the switch is synchronous');
  t.false((await ledger.status('a')).bound);
  t.is(await bumped, 'ep2');
  t.is(await store.get('ep1', 'a'), undefined);
  t.is((await ledger.status('b')).probe, undefined);
});

test('a write that started in an older epoch is dropped', async (t) => {
  const { ledger } = setup();
  await ledger.bump();
  t.false(await ledger.recordSuccess('a', { epoch: 'ep1' }));
  t.is(await ledger.recordProbe('a', { nonce: 'n', launchId: 'L' }, { epoch: 'ep1' }), undefined);
  t.false((await ledger.status('a')).bound);
  t.true(await ledger.recordSuccess('a', { epoch: 'ep2' }));
});

test('a failed purge is reported, never thrown', async (t) => {
  const store = new MemoryBindStore();
  store.retainOnly = () => Promise.reject(new Error('store down'));
  const { ledger, errors } = setup(store);
  t.is(await ledger.bump(), 'ep2');
  t.deepEqual(errors, ['purging the bind ledger of older epochs: Error: store down']);
});

test('bad arguments and a repeating epoch generator are refused with INVALID_CONFIG', async (t) => {
  const { ledger } = setup();
  const error = await t.throwsAsync(ledger.requestProbe('a', { nonce: '', launchId: 'L' }));
  t.true(isMcpSupervisorError(error));
  t.is(error?.message, 'Expected `nonce` to be a non-empty string, got `` (string)');
  await t.throwsAsync(ledger.status(''), { message: /`agent`/ });
  const stuck = new BindLedger({ store: new MemoryBindStore(), clock: new ManualClock(), newEpoch: () => 'same', onError: () => {} });
  t.throws(() => stuck.bump(), { message: /returned the current epoch `same` again/ });
  t.throws(() => new BindLedger({ store: new MemoryBindStore(), clock: new ManualClock(), newEpoch: () => 'has.dot', onError: () => {} }), {
    message: /epoch id/,
  });
});

test('session ids carry the epoch: current until the next bump, foreign ids are never current', async (t) => {
  const gw = createGateway({ identify: () => undefined });
  const mint = gw.sessionIdGenerator();
  const id = mint();
  t.regex(id, /^[0-9a-z]+-[0-9a-f]{12}\.[0-9a-f-]{36}$/);
  t.is(epochOfSession(id), gw.epoch);
  t.true(gw.isCurrentSession(id));
  t.not(mint(), id);
  const old = gw.epoch;
  t.not(await gw.bump(), old);
  t.false(gw.isCurrentSession(id));
  t.true(gw.isCurrentSession(mint()), 'the same generator mints ids of the new epoch');
  for (const foreign of [undefined, '', 'abc.def', '6f1c1f59-3f56-4b8a-9b4e-8d7c2a1e0b11', `${gw.epoch}.`, `${gw.epoch}.not-a-uuid`]) {
    t.false(gw.isCurrentSession(foreign), String(foreign));
  }
  t.is(gw.originEpoch({ sessionId: 'abc.def' }), gw.epoch, 'a foreign id belongs to the current epoch');
  t.is(gw.originEpoch({ sessionId: id }), old);
});

test('createGateway validates its resolver', (t) => {
  t.throws(() => createGateway({ identify: 'x' as never }), { message: 'Expected `identify` to be a function, got `x` (string)' });
});
