/**
 * The gateway's fleet mode against an in-memory fake coordinator (no Redis): what the watchdog
 * does with and without a lease, how fleet-held state and claim refusals reach the pure policy,
 * fencing between claim and hook, and the ledger following a fleet epoch that can move under it
 * and a store that refuses stale writes. Manual clock and scheduler; barriers, no sleeps.
 */
import test from 'ava';
import {
  createGateway,
  createWatchdog,
  StaleEpochError,
  type BindRecord,
  type ClaimOutcome,
  type FleetEpochs,
  type FleetRecoveryView,
  type Leadership,
  type LeaseFence,
  type RecoveryClaim,
  type SweepResult,
  type WatchdogCoordinator,
  type WatchdogOptions,
} from '../../src/gateway/index.js';
import { MemoryBindStore } from '../../src/gateway/index.js';
import { deferred, ManualClock, ManualScheduler } from './helpers.js';

const S = 1000;
const actions = (results: readonly SweepResult[]) => results.map((r) => `${r.agent}:${r.action}`);

/** A coordinator whose lease and fleet state the test sets by hand. */
class FakeFleet implements WatchdogCoordinator {
  readonly replicaId = 'r1';
  token = 0;
  held = false;
  controller = new AbortController();
  view: FleetRecoveryView = { intervalRemainingMs: undefined, graceRemainingMs: new Map() };
  viewError: Error | undefined;
  claimAnswer: ((agent: string) => ClaimOutcome | Promise<ClaimOutcome>) | undefined;
  readonly calls: string[] = [];
  started = 0;

  /** Takes a new lease (a new token). */
  lead(): void {
    this.token++;
    this.held = true;
    this.controller = new AbortController();
  }

  /** Loses it (the fence's signal aborts). */
  lose(): void {
    this.held = false;
    this.controller.abort();
  }

  leadership(): Leadership {
    return {
      start: () => {
        this.started++;
      },
      stop: async () => {
        this.held = false;
      },
      fence: () => (this.held ? this.#fence() : undefined),
    };
  }

  #fence(): LeaseFence {
    const token = this.token;
    return { token, signal: this.controller.signal, valid: () => this.held && this.token === token };
  }

  readonly recoveries = {
    view: async (agents: readonly string[]): Promise<FleetRecoveryView> => {
      this.calls.push(`view:${agents.join(',')}`);
      if (this.viewError) throw this.viewError;
      return this.view;
    },
    claim: async (agent: string, fence: LeaseFence): Promise<ClaimOutcome> => {
      this.calls.push(`claim:${agent}:${fence.token}`);
      if (this.claimAnswer) return this.claimAnswer(agent);
      return { granted: true, claim: { agent, id: `c-${agent}` } };
    },
    commit: async (claim: RecoveryClaim) => {
      this.calls.push(`commit:${claim.agent}`);
    },
    release: async (claim: RecoveryClaim) => {
      this.calls.push(`release:${claim.agent}`);
    },
  };
}

function setup(agents: string[], over: Partial<WatchdogOptions> = {}) {
  const fleet = new FakeFleet();
  const clock = new ManualClock();
  const recovered: Array<{ agent: string; token: number | undefined }> = [];
  let lookups = 0;
  const dog = createWatchdog({
    recover: true,
    clock,
    scheduler: new ManualScheduler(),
    coordinator: fleet,
    agents: () => {
      lookups++;
      return agents;
    },
    session: () => ({ connected: true, heartbeatIntervalMs: 30 * S }),
    status: () => ({ bound: false, epoch: 'e' }),
    recoverAgent: (agent, _reason, context) => {
      recovered.push({ agent, token: context.leaseToken });
    },
    ...over,
  });
  return { fleet, clock, dog, recovered, lookups: () => lookups };
}

test('without a lease a sweep does nothing at all; start() starts the campaign', async (t) => {
  const { fleet, dog, lookups } = setup(['a']);
  t.false(dog.leader);
  t.deepEqual(await dog.sweep(), []);
  t.is(lookups(), 0);
  t.deepEqual(fleet.calls, []);
  dog.start();
  t.is(fleet.started, 1);
  fleet.lead();
  t.true(dog.leader);
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  await dog.stop();
  t.false(dog.leader, 'stop() releases the lease');
});

test('clocks armed under an earlier lease are forgotten when the lease changes hands', async (t) => {
  const { fleet, clock, dog } = setup(['a']);
  fleet.lead();
  t.deepEqual(actions(await dog.sweep()), ['a:armed']);
  fleet.lose();
  clock.advance(300 * S);
  t.deepEqual(await dog.sweep(), []);
  fleet.lead();
  t.deepEqual(actions(await dog.sweep()), ['a:armed'], 'armed afresh, not due: it may have been bound meanwhile');
  clock.advance(240 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:recovered']);
});

test('the fleet-held interval and grace reach the pure policy as remaining time on this replica\'s clock', async (t) => {
  const { fleet, clock, dog, recovered } = setup(['a', 'b']);
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  fleet.view = { intervalRemainingMs: 45 * S, graceRemainingMs: new Map([['a', 500 * S]]) };
  const results = await dog.sweep();
  t.deepEqual(actions(results), ['a:deferred', 'b:deferred']);
  t.regex(results[0]!.reason, /in post-recovery grace for 500 s more/);
  t.regex(results[1]!.reason, /fleet recovery rate limit, next recovery in 45 s/);
  t.deepEqual(recovered, []);
  t.false(fleet.calls.some((call) => call.startsWith('claim')), 'no claim for what the view already forbids');
});

test('a refused claim defers, and teaches the local memory so the next sweep defers without asking', async (t) => {
  const { fleet, clock, dog } = setup(['a', 'b']);
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  fleet.claimAnswer = () => ({ granted: false, why: 'interval', remainingMs: 30 * S });
  const results = await dog.sweep();
  t.deepEqual(actions(results), ['a:deferred', 'b:deferred']);
  t.regex(results[0]!.reason, /fleet recovery rate limit \(held by the fleet\), next recovery in 30 s/);
  t.regex(results[1]!.reason, /fleet recovery rate limit, next recovery in 30 s/, 'b was deferred by the local memory');
  t.deepEqual(fleet.calls.filter((c) => c.startsWith('claim')), ['claim:a:1']);
});

test('a fenced claim ends the sweep: no hook, no further claims', async (t) => {
  const { fleet, clock, dog, recovered } = setup(['a', 'b']);
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  fleet.claimAnswer = () => ({ granted: false, why: 'fenced', remainingMs: 0 });
  const results = await dog.sweep();
  t.deepEqual(actions(results), ['a:deferred']);
  t.regex(results[0]!.reason, /no longer holds the watchdog lease \(fenced\)/);
  t.deepEqual(recovered, []);
});

test('a lease lost between the claim and the hook: the claim is released and the hook never runs', async (t) => {
  const { fleet, clock, dog, recovered } = setup(['a']);
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  fleet.claimAnswer = (agent) => {
    fleet.lose(); // expires while the claim's reply is on its way
    return { granted: true, claim: { agent, id: 'c' } };
  };
  t.deepEqual(actions(await dog.sweep()), ['a:deferred']);
  t.deepEqual(recovered, []);
  t.deepEqual(fleet.calls.slice(-2), ['claim:a:1', 'release:a']);
});

test('the hook gets the fencing token, and its signal aborts when the lease is lost mid-recovery', async (t) => {
  const entered = deferred<AbortSignal>();
  const { fleet, clock, dog } = setup(['a'], {
    recoverAgent: (_agent, _reason, context) => {
      t.is(context.leaseToken, 1);
      entered.resolve(context.signal);
      return new Promise<void>((_resolve, reject) => context.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    },
  });
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  const sweeping = dog.sweep();
  const signal = await entered.promise;
  fleet.lose();
  t.true(signal.aborted);
  t.deepEqual(actions(await sweeping), ['a:failed']);
  t.deepEqual(fleet.calls.slice(-2), ['claim:a:1', 'release:a'], 'a failed recovery spends nothing');
});

test('a successful recovery is committed to the fleet', async (t) => {
  const { fleet, clock, dog, recovered } = setup(['a']);
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  t.deepEqual(actions(await dog.sweep()), ['a:recovered']);
  t.deepEqual(recovered, [{ agent: 'a', token: 1 }]);
  t.deepEqual(fleet.calls.slice(-2), ['claim:a:1', 'commit:a']);
});

test('fleet state unreachable: a sweep does nothing, a failed claim defers; both are reported, neither recovers', async (t) => {
  const errors: string[] = [];
  const { fleet, clock, dog, recovered } = setup(['a'], { onError: (error, context) => errors.push(`${context}: ${String(error)}`) });
  fleet.lead();
  await dog.sweep();
  clock.advance(240 * S);
  fleet.viewError = new Error('redis down');
  t.deepEqual(await dog.sweep(), []);
  t.deepEqual(errors, ['reading the fleet recovery state: Error: redis down']);
  fleet.viewError = undefined;
  fleet.claimAnswer = () => Promise.reject(new Error('timeout'));
  const results = await dog.sweep();
  t.deepEqual(actions(results), ['a:deferred']);
  t.regex(results[0]!.reason, /could not be reached \(timeout\)/);
  t.deepEqual(recovered, []);
});

test('onSweep receives every sweep\'s results; a throwing listener is reported, not thrown', async (t) => {
  const seen: string[][] = [];
  const errors: string[] = [];
  const { fleet, dog } = setup(['a'], {
    onSweep: (results) => {
      seen.push(actions(results));
      throw new Error('log sink down');
    },
    onError: (_error, context) => errors.push(context),
  });
  fleet.lead();
  await dog.sweep();
  t.deepEqual(seen, [['a:armed']]);
  t.deepEqual(errors, ['reporting a sweep']);
});

/** A fleet epoch the test moves by hand, and a store that refuses writes of other epochs. */
function fleetLedger() {
  const listeners = new Set<(epoch: string, previous: string) => void>();
  let current = '1-aaaaaaaaaaaa';
  const epochs: FleetEpochs = {
    get current() {
      return current;
    },
    bump: async () => {
      const previous = current;
      current = `${Number(current.split('-')[0]) + 1}-bbbbbbbbbbbb`;
      for (const listener of listeners) listener(current, previous);
      return current;
    },
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  const memory = new MemoryBindStore();
  let fleetEpoch = current; // what "Redis" holds: may be ahead of what this replica knows
  let moves = 8;
  const store = {
    get: (epoch: string, agent: string) => memory.get(epoch, agent),
    retainOnly: (epoch: string) => memory.retainOnly(epoch),
    update: (epoch: string, agent: string, mutate: (c: BindRecord | undefined) => BindRecord) => {
      if (epoch !== fleetEpoch) {
        current = fleetEpoch; // the refusal teaches the replica the current epoch
        return Promise.reject(new StaleEpochError(epoch, fleetEpoch));
      }
      return memory.update(epoch, agent, mutate);
    },
  };
  return {
    gw: createGateway({ identify: () => undefined, coordinator: { epochs, store } }),
    epochs,
    /** Another replica bumped; this one has not heard yet. */
    moveBehindItsBack(): string {
      fleetEpoch = `${++moves}-cccccccccccc`;
      return fleetEpoch;
    },
  };
}

test('a fleet ledger follows the fleet epoch; bump() goes through the fleet', async (t) => {
  const { gw, epochs } = fleetLedger();
  t.is(gw.epoch, epochs.current);
  const before = gw.epoch;
  const after = await gw.bump();
  t.not(after, before);
  t.is(gw.epoch, after);
  t.false(gw.isCurrentSession(`${before}.6f1c1f59-3f56-4b8a-9b4e-8d7c2a1e0b11`));
});

test('writes refused as stale by the fleet store are dropped; a probe request moves to the current epoch', async (t) => {
  const { gw, moveBehindItsBack } = fleetLedger();
  const newer = moveBehindItsBack();
  t.false(await gw.recordSuccess('a'), 'dropped, as a write of an old epoch');
  t.is(gw.epoch, newer, 'and the replica now knows the current epoch');
  const old = gw.epoch;
  const newest = moveBehindItsBack();
  const probe = await gw.requestProbe('a', { nonce: 'n', launchId: 'L' });
  t.is(probe.epoch, newest, 'delivered now, so recorded in the epoch current now (after one refusal)');
  t.not(old, newest);
  t.is((await gw.status('a')).probe?.nonce, 'n');
});

test('createGateway refuses a coordinator together with a store or an epoch generator; both refuse a non-coordinator', (t) => {
  const { epochs } = fleetLedger();
  const coordinator = { epochs, store: new MemoryBindStore() };
  t.throws(() => createGateway({ identify: () => undefined, coordinator, store: new MemoryBindStore() }), { message: /either `coordinator` or `store`\/`newEpoch`/ });
  t.throws(() => createGateway({ identify: () => undefined, coordinator: {} as never }), { message: /`coordinator` to be a fleet coordinator/ });
  t.throws(() => createWatchdog({ recover: true, agents: () => [], session: () => ({ connected: false }), status: () => ({ bound: true, epoch: 'e' }), recoverAgent: () => {}, coordinator: {} as never }), {
    message: /`coordinator` to be a fleet coordinator \(with `leadership` and `recoveries`\)/,
  });
});
