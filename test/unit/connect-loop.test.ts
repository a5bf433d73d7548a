/**
 * The connect loop, state by event: every (state, event) pair is a row of the table below, with
 * the guard variants that make one pair lead to different states (the budget spent, the breaker
 * open). A completeness test checks the table names every pair. The loop runs on a manual clock
 * with a fake opener, so each transition is observed exactly, continuations included: an open
 * that settles after the loop left `connecting` only kills its session.
 */
import test, { type ExecutionContext } from 'ava';
import type { ServerFailure } from '../../src/discovery/types.js';
import { DEADLINE } from '../../src/deadline.js';
import { CircuitBreaker } from '../../src/sessions/breaker.js';
import { type AttemptResult, ConnectLoop, type ConnectState } from '../../src/sessions/connect-loop.js';
import { type Barrier, ManualClock, barrier, flush } from '../helpers/clock.js';

class FakeSession {
  alive = true;
  killed = false;
  constructor(readonly id: number) {}
  async kill(): Promise<void> {
    this.alive = false;
    this.killed = true;
  }
}

const BUDGET = 2;
const BREAKER = { failureThreshold: 3, cooldownMs: 30_000 };
const PARK_PROBE_MS = 60_000;
/** Longer than any backoff and than the park probe interval: every timer the loop set falls due. */
const LONG = 100_000;
/** A waiter's bound that no test reaches. */
const FOREVER = 1e9;

/** A loop on a manual clock, whose opens the test settles by hand. */
class Harness {
  readonly clock = new ManualClock();
  readonly breaker = new CircuitBreaker(BREAKER, this.clock);
  readonly opens: { result: Barrier<FakeSession>; signal: AbortSignal }[] = [];
  readonly log: string[] = [];
  readonly heard: AttemptResult<FakeSession>[] = [];
  /** Every session an open brought, in order. */
  readonly made: FakeSession[] = [];
  /** What the last `close` returned. */
  closed: ReturnType<ConnectLoop<FakeSession>['close']> | undefined;
  readonly loop: ConnectLoop<FakeSession>;

  constructor(budget = BUDGET) {
    this.loop = new ConnectLoop<FakeSession>({
      clock: this.clock,
      random: () => 0.5,
      options: { reconnectBudget: budget, backoffBaseMs: 1000, backoffMaxMs: 8000, parkProbeIntervalMs: PARK_PROBE_MS },
      breaker: this.breaker,
      hooks: {
        open: (signal) => {
          const result = barrier<FakeSession>();
          this.opens.push({ result, signal });
          return result.promise;
        },
        // An open that fails with "exited" is an exit; anything else a refusal.
        classify: (error): ServerFailure => {
          const message = error instanceof Error ? error.message : String(error);
          return { kind: message === 'exited' ? 'exited' : 'refused', message };
        },
        budgetSpent: (attempts): ServerFailure => ({ kind: 'exited', message: `${attempts} sessions in a row ended` }),
        established: (session, facts) => this.log.push(`established ${session.id}${facts.first ? ' first' : ''}${facts.revival ? ' revival' : ''}`),
        parked: (state) => this.log.push(`parked (${state.reason})`),
      },
    });
  }

  get state(): Readonly<ConnectState<FakeSession>> {
    return this.loop.state;
  }

  /** Opens started and not settled yet. */
  get inFlight(): number {
    return this.opens.filter((open) => !open.result.settled).length;
  }

  /** The ready state's session. */
  get session(): FakeSession | undefined {
    return this.state.kind === 'ready' ? this.state.session : undefined;
  }

  /** Settles the open in flight with a new session. */
  async succeed(): Promise<FakeSession> {
    const open = this.opens.at(-1);
    if (!open || open.result.settled) throw new Error('no open in flight');
    const session = new FakeSession(this.made.length + 1);
    this.made.push(session);
    open.result.resolve(session);
    await flush();
    return session;
  }

  /** Fails the open in flight. */
  async fail(message = 'connection refused'): Promise<void> {
    const open = this.opens.at(-1);
    if (!open || open.result.settled) throw new Error('no open in flight');
    open.result.reject(new Error(message));
    await flush();
  }

  /** Records what the next attempt brings (bounded far beyond any test). */
  listen(): void {
    void this.loop.nextAttempt(FOREVER, undefined).then((result) => {
      if (result !== DEADLINE) this.heard.push(result);
    });
  }

  openBreaker(): void {
    for (let failure = 0; failure < BREAKER.failureThreshold; failure++) this.breaker.recordFailure();
  }
}

type StateKind = ConnectState<unknown>['kind'];
type EventName = 'request' | 'warm-up' | 'open succeeds' | 'open fails' | 'time passes' | 'session ends' | 'proven' | 'close';

const STATES: StateKind[] = ['idle', 'connecting', 'ready', 'backoff', 'parked', 'closed'];
const EVENTS: EventName[] = ['request', 'warm-up', 'open succeeds', 'open fails', 'time passes', 'session ends', 'proven', 'close'];

/** The usual way into each state. */
const reach: Record<StateKind, (h: Harness) => Promise<void>> = {
  idle: async () => undefined,
  connecting: async (h) => h.loop.request('call'),
  ready: async (h) => {
    h.loop.request('call');
    await h.succeed();
  },
  backoff: async (h) => {
    h.loop.request('call');
    await h.fail();
  },
  parked: async (h) => {
    // Two failed attempts spend the budget of two.
    h.loop.request('call');
    await h.fail();
    h.loop.request('call');
    await h.fail();
  },
  // Closed with an attempt in flight, so that its late end is an event of the closed state.
  closed: async (h) => {
    h.loop.request('call');
    h.loop.close('host');
  },
};

/** Into `idle` through a session that came up and ended unproven (one attempt of budget spent). */
async function idleAfterSession(h: Harness): Promise<void> {
  await reach.ready(h);
  h.loop.sessionEnded(h.session!);
}

const events: Record<EventName, (h: Harness) => Promise<void>> = {
  request: async (h) => h.loop.request('call'),
  'warm-up': async (h) => h.loop.request('warm-up'),
  'open succeeds': async (h) => {
    await h.succeed();
  },
  'open fails': (h) => h.fail(),
  'time passes': (h) => h.clock.advance(LONG),
  'session ends': async (h) => {
    h.loop.sessionEnded(h.session ?? new FakeSession(-1));
  },
  proven: async (h) => h.loop.proven(),
  close: async (h) => {
    h.closed = h.loop.close('host');
    await flush();
  },
};

interface Row {
  state: StateKind;
  event: EventName;
  /** The variant of the pair this row pins, when a guard decides. */
  guard?: string;
  /** The pair cannot happen in this state; `check` asserts why (before the event is applied). */
  impossible?: string;
  budget?: number;
  /** Another way into the state (for a guard). */
  via?: (h: Harness) => Promise<void>;
  /** Runs in the state, before the event. */
  setup?: (h: Harness) => void | Promise<void>;
  /** Applies the event another way than usual (for a guard). */
  apply?: (h: Harness) => Promise<void>;
  expect: StateKind;
  check?: (t: ExecutionContext, h: Harness) => void;
}

const NO_ATTEMPT = 'no attempt is in flight outside `connecting` (only `close` leaves it while one runs)';
function noTimers(t: ExecutionContext, h: Harness): void {
  t.is(h.clock.pending(), 0, 'no timer of the loop is left');
}
function opensStarted(count: number): (t: ExecutionContext, h: Harness) => void {
  return (t, h) => {
    t.is(h.opens.length, count, `${count} open(s) started`);
  };
}

const rows: Row[] = [
  // idle
  { state: 'idle', event: 'request', expect: 'connecting', check: (t, h) => t.like(h.state, { kind: 'connecting', attempt: 1 }) },
  {
    state: 'idle',
    event: 'request',
    guard: 'the budget is spent (a session came up and ended before a call proved it)',
    budget: 1,
    via: idleAfterSession,
    expect: 'parked',
    check: (t, h) => {
      opensStarted(1)(t, h);
      t.deepEqual(h.log.at(-1), 'parked (exited: 1 sessions in a row ended)');
    },
  },
  { state: 'idle', event: 'warm-up', expect: 'connecting', check: opensStarted(1) },
  { state: 'idle', event: 'open succeeds', impossible: NO_ATTEMPT, expect: 'idle' },
  { state: 'idle', event: 'open fails', impossible: NO_ATTEMPT, expect: 'idle' },
  { state: 'idle', event: 'time passes', expect: 'idle', check: (t, h) => (noTimers(t, h), opensStarted(0)(t, h)) },
  { state: 'idle', event: 'session ends', expect: 'idle' },
  { state: 'idle', event: 'proven', via: idleAfterSession, expect: 'idle', check: (t, h) => t.is(h.loop.attemptsSinceProven, 0) },
  { state: 'idle', event: 'close', setup: (h) => h.listen(), expect: 'closed', check: (t, h) => t.deepEqual(h.heard, [{ kind: 'closed' }]) },

  // connecting
  { state: 'connecting', event: 'request', expect: 'connecting', check: opensStarted(1) },
  { state: 'connecting', event: 'warm-up', expect: 'connecting', check: opensStarted(1) },
  {
    state: 'connecting',
    event: 'open succeeds',
    setup: (h) => h.listen(),
    expect: 'ready',
    check: (t, h) => {
      t.deepEqual(h.log, ['established 1 first']);
      t.deepEqual(h.heard, [{ kind: 'session', session: h.session }]);
      t.is(h.loop.established, 1);
    },
  },
  {
    state: 'connecting',
    event: 'open succeeds',
    guard: 'the breaker is open',
    setup: (h) => h.openBreaker(),
    expect: 'ready',
    check: (t, h) => t.is(h.breaker.state.kind, 'closed', 'a session established closes the breaker'),
  },
  {
    state: 'connecting',
    event: 'open fails',
    guard: 'budget left, breaker closed',
    setup: (h) => h.listen(),
    expect: 'backoff',
    check: (t, h) => {
      // backoffDelay(2, base 1000) with random 0.5: 500 + 250.
      t.like(h.state, { kind: 'backoff', attempt: 1, until: h.clock.now() + 750 });
      t.is(h.clock.nextAt(), h.clock.now() + 750);
      t.is(h.heard.length, 1);
      t.like(h.heard[0], { kind: 'failure', failure: { kind: 'refused', message: 'connection refused' }, exitedAfterSession: false });
    },
  },
  {
    state: 'connecting',
    event: 'open fails',
    guard: 'the budget is spent by this attempt',
    via: async (h) => {
      await reach.backoff(h);
      h.loop.request('call');
    },
    setup: (h) => h.listen(),
    expect: 'parked',
    check: (t, h) => {
      t.like(h.state, { kind: 'parked', reason: 'refused: connection refused', nextProbeAt: h.clock.now() + PARK_PROBE_MS });
      t.deepEqual(h.log, ['parked (refused: connection refused)']);
      t.is(h.heard[0]?.kind, 'failure', 'waiters hear the attempt failed');
      t.is(h.clock.nextAt(), h.clock.now() + PARK_PROBE_MS, 'the probe is scheduled');
    },
  },
  {
    state: 'connecting',
    event: 'open fails',
    guard: 'the breaker is open: its cooldown replaces the backoff',
    setup: (h) => h.openBreaker(),
    expect: 'idle',
    check: noTimers,
  },
  {
    state: 'connecting',
    event: 'open fails',
    guard: 'a half-open probe asked for this attempt: its failure is the verdict',
    setup: async (h) => {
      h.openBreaker();
      await h.clock.advance(BREAKER.cooldownMs);
      h.breaker.admit();
    },
    expect: 'idle',
    check: (t, h) => t.is(h.breaker.state.kind, 'open', 're-armed'),
  },
  { state: 'connecting', event: 'time passes', expect: 'connecting', check: (t, h) => (noTimers(t, h), opensStarted(1)(t, h)) },
  { state: 'connecting', event: 'session ends', expect: 'connecting' },
  { state: 'connecting', event: 'proven', expect: 'connecting', check: (t, h) => t.is(h.loop.attemptsSinceProven, 0) },
  {
    state: 'connecting',
    event: 'close',
    setup: (h) => h.listen(),
    expect: 'closed',
    check: (t, h) => {
      t.true(h.opens[0]?.signal.aborted, 'the attempt is cut short');
      t.deepEqual(h.heard, [{ kind: 'closed' }]);
    },
  },

  // ready
  { state: 'ready', event: 'request', guard: 'the session is alive', expect: 'ready', check: opensStarted(1) },
  {
    state: 'ready',
    event: 'request',
    guard: 'the session is no longer alive (its end not reported yet)',
    setup: (h) => {
      h.session!.alive = false;
    },
    expect: 'connecting',
    check: opensStarted(2),
  },
  { state: 'ready', event: 'warm-up', expect: 'ready', check: opensStarted(1) },
  { state: 'ready', event: 'open succeeds', impossible: NO_ATTEMPT, expect: 'ready' },
  { state: 'ready', event: 'open fails', impossible: NO_ATTEMPT, expect: 'ready' },
  { state: 'ready', event: 'time passes', expect: 'ready', check: noTimers },
  { state: 'ready', event: 'session ends', guard: 'its own session', expect: 'idle', check: (t, h) => (opensStarted(1)(t, h), noTimers(t, h)) },
  {
    state: 'ready',
    event: 'session ends',
    guard: 'another (older) session',
    apply: async (h) => {
      h.loop.sessionEnded(new FakeSession(99));
    },
    expect: 'ready',
  },
  { state: 'ready', event: 'proven', expect: 'ready', check: (t, h) => t.is(h.loop.attemptsSinceProven, 0) },
  {
    state: 'ready',
    event: 'close',
    expect: 'closed',
    check: (t, h) => {
      t.is(h.closed?.session, h.made[0], 'the session is handed back to be closed');
      t.is(h.loop.close('host').session, undefined, 'a second close has nothing to end');
    },
  },

  // backoff
  {
    state: 'backoff',
    event: 'request',
    guard: 'breaker closed: the wait is cut short',
    expect: 'connecting',
    check: (t, h) => {
      t.like(h.state, { kind: 'connecting', attempt: 2 });
      noTimers(t, h);
    },
  },
  { state: 'backoff', event: 'request', guard: 'the breaker is open', setup: (h) => h.openBreaker(), expect: 'idle', check: (t, h) => (noTimers(t, h), opensStarted(1)(t, h)) },
  { state: 'backoff', event: 'warm-up', expect: 'backoff', check: (t, h) => (t.is(h.clock.pending(), 1, 'the wait goes on'), opensStarted(1)(t, h)) },
  { state: 'backoff', event: 'open succeeds', impossible: NO_ATTEMPT, expect: 'backoff' },
  { state: 'backoff', event: 'open fails', impossible: NO_ATTEMPT, expect: 'backoff' },
  { state: 'backoff', event: 'time passes', guard: 'breaker closed', expect: 'connecting', check: (t, h) => t.like(h.state, { kind: 'connecting', attempt: 2 }) },
  { state: 'backoff', event: 'time passes', guard: 'the breaker is open', setup: (h) => h.openBreaker(), expect: 'idle', check: opensStarted(1) },
  { state: 'backoff', event: 'session ends', expect: 'backoff' },
  { state: 'backoff', event: 'proven', expect: 'backoff', check: (t, h) => t.is(h.loop.attemptsSinceProven, 0) },
  { state: 'backoff', event: 'close', expect: 'closed', check: noTimers },

  // parked
  {
    state: 'parked',
    event: 'request',
    expect: 'connecting',
    check: (t, h) => {
      t.is(h.loop.attemptsSinceProven, BUDGET, 'one attempt of budget');
      noTimers(t, h);
    },
  },
  { state: 'parked', event: 'warm-up', expect: 'connecting', check: opensStarted(3) },
  { state: 'parked', event: 'open succeeds', impossible: NO_ATTEMPT, expect: 'parked' },
  { state: 'parked', event: 'open fails', impossible: NO_ATTEMPT, expect: 'parked' },
  { state: 'parked', event: 'time passes', guard: 'the probe falls due', expect: 'connecting', check: opensStarted(3) },
  { state: 'parked', event: 'session ends', expect: 'parked' },
  { state: 'parked', event: 'proven', expect: 'parked', check: (t, h) => t.is(h.loop.attemptsSinceProven, 0) },
  { state: 'parked', event: 'close', expect: 'closed', check: noTimers },

  // closed (with the attempt that was in flight at close)
  { state: 'closed', event: 'request', expect: 'closed', check: opensStarted(1) },
  { state: 'closed', event: 'warm-up', expect: 'closed', check: opensStarted(1) },
  {
    state: 'closed',
    event: 'open succeeds',
    guard: 'the attempt cut short still brings a session',
    expect: 'closed',
    check: (t, h) => {
      t.true(h.made[0]?.killed, 'the late session is killed');
      t.deepEqual(h.log, [], 'nothing established');
      t.is(h.loop.established, 0);
    },
  },
  { state: 'closed', event: 'open fails', expect: 'closed', check: (t, h) => (t.deepEqual(h.log, []), noTimers(t, h)) },
  { state: 'closed', event: 'time passes', expect: 'closed', check: noTimers },
  { state: 'closed', event: 'session ends', expect: 'closed' },
  { state: 'closed', event: 'proven', expect: 'closed' },
  { state: 'closed', event: 'close', expect: 'closed', check: (t, h) => t.deepEqual(h.state, { kind: 'closed', reason: 'host' }) },
];

for (const row of rows) {
  const title = `${row.state} × ${row.event}${row.guard ? ` [${row.guard}]` : ''} → ${row.impossible ? 'cannot happen' : row.expect}`;
  test(title, async (t) => {
    const h = new Harness(row.budget);
    await (row.via ?? reach[row.state])(h);
    t.is(h.state.kind, row.state, 'reached the state');
    await row.setup?.(h);
    if (row.impossible) {
      t.is(h.inFlight, 0, row.impossible);
      return;
    }
    await (row.apply ?? events[row.event])(h);
    t.is(h.state.kind, row.expect);
    row.check?.(t, h);
  });
}

test('the table names every (state, event) pair', (t) => {
  const missing = STATES.flatMap((state) => EVENTS.filter((event) => !rows.some((row) => row.state === state && row.event === event)).map((event) => `${state} × ${event}`));
  t.deepEqual(missing, []);
});

test('a revival: parked → request → ready reports it once; the next session does not', async (t) => {
  const h = new Harness();
  await reach.parked(h);
  h.loop.request('signal');
  const revived = await h.succeed();
  h.loop.sessionEnded(revived);
  h.loop.proven();
  h.loop.request('call');
  await h.succeed();
  t.deepEqual(h.log, ['parked (refused: connection refused)', 'established 1 first revival', 'established 2']);
});

test('a revival survives a backoff: the session after it is still reported as a revival', async (t) => {
  const h = new Harness(3);
  for (let attempt = 0; attempt < 3; attempt++) {
    h.loop.request('call');
    await h.fail();
  }
  t.is(h.state.kind, 'parked');
  h.loop.request('signal');
  // A call proved an older session meanwhile: the budget is refilled, so the failure backs off.
  h.loop.proven();
  await h.fail();
  t.is(h.state.kind, 'backoff');
  await h.clock.advance(LONG);
  await h.succeed();
  t.is(h.log.at(-1), 'established 1 first revival');
});

test('exitedAfterSession: an exit while opening is "exited again" only once a session was established', async (t) => {
  const h = new Harness(10);
  h.listen();
  h.loop.request('call');
  await h.fail('exited');
  t.like(h.heard[0], { kind: 'failure', failure: { kind: 'exited' }, exitedAfterSession: false }, 'never connected: a start-up exit');
  h.loop.request('call');
  await h.succeed();
  h.loop.sessionEnded(h.session!);
  h.listen();
  h.loop.request('call');
  await h.fail('exited');
  t.like(h.heard.at(-1), { kind: 'failure', failure: { kind: 'exited' }, exitedAfterSession: true });
});

test('nextAttempt: bounded on the clock (DEADLINE), rejects when its signal aborts, leaves no timer behind', async (t) => {
  const h = new Harness();
  const timedOut = h.loop.nextAttempt(1000, undefined);
  await h.clock.advance(1000);
  t.is(await timedOut, DEADLINE);
  const abort = new AbortController();
  const cancelled = h.loop.nextAttempt(FOREVER, abort.signal);
  abort.abort(new Error('caller gave up'));
  await t.throwsAsync(cancelled, { message: 'caller gave up' });
  t.is(h.clock.pending(), 0, 'no deadline timer left');
});

test('backoff grows with each attempt and is capped', async (t) => {
  const h = new Harness(10);
  const delays: number[] = [];
  for (let attempt = 0; attempt < 6; attempt++) {
    h.loop.request('call');
    await h.fail();
    const state = h.state;
    if (state.kind === 'backoff') delays.push(state.until - h.clock.now());
  }
  // Equal jitter with random 0.5: three quarters of min(8000, 1000 · 2^(n-1)).
  t.deepEqual(delays, [750, 1500, 3000, 6000, 6000, 6000]);
});
