/**
 * `createWatchdog`: runs the recovery policy ({@link ./policy.ts}) over the host's agents.
 *
 * `sweep()` is async because the host's lookups and its recovery hook may be. Agents are swept
 * one after another, awaiting each recovery, so the fleet-wide rate limit is decided on settled
 * facts: when a hook fails, the next due agent in the same sweep may still be recovered.
 * Concurrent `sweep()` calls share the one in flight. The runner (`start`/`stop`) is a separate,
 * optional layer: an unref'd interval (60 s by default) that skips a tick while a sweep is still
 * running. With `recover` off (the default) nothing runs and no lookup is ever made; no other
 * switch turns it on.
 *
 * With a `coordinator`, the replicas of a fleet campaign for one lease ({@link ./fleet-watch.ts}):
 * a sweep without a valid lease does nothing at all, the rate limit and the grace are the fleet's,
 * and every recovery must first win a claim fenced by the lease.
 */
import { describeError, McpSupervisorError } from '../errors.js';
import { systemClock, systemScheduler, type Clock, type IntervalScheduler } from './clock.js';
import type { RecoveryClaim, WatchdogCoordinator } from './fleet.js';
import { FleetWatchdog, refusal, unreachable, type FleetTurn } from './fleet-watch.js';
import {
  afterRecovery,
  decide,
  policyConfig,
  type AgentWatch,
  type FleetWatch,
  type PolicyConfig,
  type SessionInfo,
  type StatusObservation,
  type WatchedStatus,
} from './policy.js';
import { isFunction, nonNegativeMs, positiveNumber } from './validate.js';

/** What a sweep did for one agent. */
export interface SweepResult {
  /** The agent. */
  readonly agent: string;
  /**
   * `none`: nothing to watch or nothing wrong; `armed`: unbound, deadline not reached;
   * `deferred`: due, held back by grace or the rate limit; `recovered`: the hook succeeded;
   * `failed`: the hook threw (it will be tried again on a later sweep).
   */
  readonly action: 'none' | 'armed' | 'deferred' | 'recovered' | 'failed';
  /** Why; for `recovered` this is the reason the hook was given. */
  readonly reason: string;
}

/** Options of {@link createWatchdog}. */
export interface WatchdogOptions {
  /** Whether the watchdog may recover agents at all. Off by default. */
  recover?: boolean;
  /** Time source (default: `Date.now`). */
  clock?: Clock;
  /** The agents to watch. */
  agents: () => Iterable<string> | Promise<Iterable<string>>;
  /** The host's view of an agent's session. */
  session: (agent: string) => SessionInfo | Promise<SessionInfo>;
  /** The agent's bind status, typically `(agent) => gw.status(agent)`. Failures are swallowed. */
  status: (agent: string) => WatchedStatus | Promise<WatchedStatus>;
  /**
   * Relaunches the agent. `signal` aborts when the watchdog is stopped (in a fleet: also when the
   * lease is lost). In a fleet, `leaseToken` is the fencing token the recovery was claimed under:
   * a relaunch system that remembers the highest token it has seen can refuse a late call from an
   * ex-leader that was paused between its claim and this call.
   */
  recoverAgent: (agent: string, reason: string, context: RecoveryContext) => unknown;
  /** Policy tunables (see `DEFAULT_POLICY`). */
  policy?: Partial<PolicyConfig>;
  /** Runner period (default 60 000 ms). */
  intervalMs?: number;
  /** Runner timers (default: unref'd Node timers). */
  scheduler?: IntervalScheduler;
  /** Receives failures that a sweep swallows (listing agents, a sweep that threw). */
  onError?: (error: unknown, context: string) => void;
  /** Receives the results of every sweep that ran (for logs and status pages). */
  onSweep?: (results: readonly SweepResult[]) => void;
  /**
   * Shares leadership, the rate limit and the grace with the other replicas of a fleet (e.g.
   * `redisCoordinator` from `mcp-supervisor/redis`); see `docs/fleet.md`. `start()` then also
   * starts the campaign for the lease, and only the lease holder sweeps.
   */
  coordinator?: WatchdogCoordinator;
  /** With a `coordinator`: the lease's time to live (default 15 000 ms; a dead leader is replaced within it). */
  leaseTtlMs?: number;
}

/** What the recovery hook is given besides the agent and the reason. */
export interface RecoveryContext {
  /** Aborts when the watchdog stops (in a fleet: also when this replica loses the lease). */
  signal: AbortSignal;
  /** In a fleet: the fencing token of the lease the recovery was claimed under. */
  leaseToken?: number;
}

/** A watchdog; see the module comment. */
export interface Watchdog {
  /** The `recover` flag it was built with. */
  readonly recover: boolean;
  /** Whether the runner's interval is scheduled. */
  readonly running: boolean;
  /** Whether a sweep would act now: `recover` is on and, in a fleet, this replica holds the lease. */
  readonly leader: boolean;
  /**
   * Sweeps every agent once. Never rejects. With `recover` off — or in a fleet without the
   * lease — resolves `[]` without any lookup.
   */
  sweep(): Promise<SweepResult[]>;
  /** Starts the runner and, in a fleet, the lease campaign (a no-op when already running or when `recover` is off). */
  start(): void;
  /** Stops the runner, aborts a recovery in flight, waits for the current sweep to settle and, in a fleet, releases the lease. */
  stop(): Promise<void>;
  /** The policy's memory of `agent` (for status pages and tests). */
  watch(agent: string): AgentWatch | undefined;
}

const DEFAULT_INTERVAL_MS = 60_000;
const DEFAULT_LEASE_TTL_MS = 15_000;
/** Below this a lease cannot be renewed reliably over a network round trip. */
const MIN_LEASE_TTL_MS = 30;

/**
 * Creates a {@link Watchdog}. Long because it is a factory of closures: the watchdog's timers,
 * lease and sweep state live in this scope and its methods close over them; the decisions
 * themselves are the pure functions of `policy.ts`.
 */
export function createWatchdog(options: WatchdogOptions): Watchdog {
  const recover = options?.recover === true;
  const agents = isFunction('agents', options.agents);
  const session = isFunction('session', options.session);
  const status = isFunction('status', options.status);
  const recoverAgent = isFunction('recoverAgent', options.recoverAgent);
  const clock = options.clock ?? systemClock;
  const scheduler = options.scheduler ?? systemScheduler;
  const config = policyConfig(options.policy);
  const intervalMs = positiveNumber('intervalMs', options.intervalMs ?? DEFAULT_INTERVAL_MS);
  const onError = options.onError ?? (() => {});
  const onSweep = options.onSweep === undefined ? undefined : isFunction('onSweep', options.onSweep);
  const leaseTtlMs = nonNegativeMs('leaseTtlMs', options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS, MIN_LEASE_TTL_MS);
  const coordinator = options.coordinator;
  if (coordinator !== undefined && (typeof coordinator?.leadership !== 'function' || typeof coordinator?.recoveries !== 'object')) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`coordinator\` to be a fleet coordinator (with \`leadership\` and \`recoveries\`), got \`${String(coordinator)}\` (${typeof coordinator})`);
  }
  const fleetWatch =
    recover && coordinator !== undefined
      ? new FleetWatchdog(coordinator, leaseTtlMs, { minRecoveryIntervalMs: config.minRecoveryIntervalMs, graceMs: config.graceMs })
      : undefined;

  const watches = new Map<string, AgentWatch>();
  let fleet: FleetWatch = { lastRecoveryAt: undefined };
  let inflight: Promise<SweepResult[]> | undefined;
  let handle: unknown;
  let stopping = new AbortController();

  async function sweepAgent(agent: string, signal: AbortSignal, turn: FleetTurn | undefined): Promise<SweepResult> {
    let info: SessionInfo;
    try {
      info = await session(agent);
      if (typeof info !== 'object' || info === null) throw new TypeError(`session lookup returned ${String(info)}`);
    } catch (error) {
      return { agent, action: 'none', reason: `session lookup failed (ignored): ${describeError(error)}` };
    }
    let observed: StatusObservation | undefined;
    // Rule 1 comes before the lookup, so a disconnected agent costs the status source nothing.
    if (info.connected) {
      try {
        observed = { ok: true, status: await status(agent) };
      } catch (error) {
        observed = { ok: false, error };
      }
    }
    const decision = decide(watches.get(agent), fleet, { session: info, status: observed }, clock.now(), config);
    watches.set(agent, decision.next);
    if (decision.action !== 'recover') return { agent, action: decision.action, reason: decision.reason };
    let context: RecoveryContext = { signal };
    let claim: RecoveryClaim | undefined;
    if (turn !== undefined) {
      const claimed = await claimInFleet(agent, decision.reason, turn, signal);
      if (!('claim' in claimed)) return claimed;
      claim = claimed.claim;
      context = claimed.context;
    }
    try {
      await recoverAgent(agent, decision.reason, context);
    } catch (error) {
      // Nothing is recorded: the rate limit and the grace stay unspent, the clock stays armed.
      if (turn !== undefined && claim !== undefined) await settleClaim(() => turn.release(claim), 'releasing a recovery claim');
      return { agent, action: 'failed', reason: `${decision.reason}; recovery failed: ${describeError(error)}` };
    }
    // Recorded even if the lease was lost meanwhile: the recovery did happen.
    if (turn !== undefined && claim !== undefined) await settleClaim(() => turn.commit(claim), 'recording a recovery in the fleet');
    const after = afterRecovery(watches.get(agent) ?? decision.next, fleet, clock.now(), config);
    watches.set(agent, after.watch);
    fleet = after.fleet;
    return { agent, action: 'recovered', reason: decision.reason };
  }

  /**
   * Wins the fleet's recovery slot for `agent` (fenced by the lease, atomic in the store), or says
   * why not. A refusal teaches the local memory what the fleet knows, so the next decisions defer
   * by themselves.
   */
  async function claimInFleet(
    agent: string,
    reason: string,
    turn: FleetTurn,
    stopped: AbortSignal,
  ): Promise<SweepResult | { claim: RecoveryClaim; context: RecoveryContext }> {
    // Checked again right before the store round trip: a replica paused since the sweep began
    // must not even ask.
    if (!turn.valid()) return { agent, action: 'deferred', reason: `${reason}; ${refusal({ granted: false, why: 'fenced', remainingMs: 0 })}` };
    let outcome;
    try {
      outcome = await turn.claim(agent, reason);
    } catch (error) {
      return { agent, action: 'deferred', reason: `${reason}; ${unreachable(error)}` };
    }
    if (!outcome.granted) {
      const now = clock.now();
      if (outcome.why === 'interval') {
        fleet = { ...fleet, lastRecoveryAt: now - (config.minRecoveryIntervalMs - outcome.remainingMs) };
      } else if (outcome.why === 'grace') {
        const watch = watches.get(agent);
        if (watch !== undefined) watches.set(agent, { ...watch, graceUntil: now + outcome.remainingMs });
      }
      return { agent, action: 'deferred', reason: `${reason}; ${refusal(outcome)}` };
    }
    // The reply took a round trip: a leader paused in between must not call the hook now.
    if (!turn.valid()) {
      await settleClaim(() => turn.release(outcome.claim), 'releasing a recovery claim');
      return { agent, action: 'deferred', reason: `${reason}; ${refusal({ granted: false, why: 'fenced', remainingMs: 0 })}` };
    }
    const signal = AbortSignal.any([stopped, turn.fence.signal]);
    return { claim: outcome.claim, context: { signal, leaseToken: turn.fence.token } };
  }

  async function settleClaim(step: () => Promise<void>, context: string): Promise<void> {
    try {
      await step();
    } catch (error) {
      // A commit that did not land leaves the reservation (made at claim time) in place: still safe.
      onError(error, context);
    }
  }

  async function runSweep(signal: AbortSignal): Promise<SweepResult[]> {
    let turn: FleetTurn | undefined;
    if (fleetWatch !== undefined) {
      turn = fleetWatch.begin();
      // Without a lease this replica does nothing at all, not even a lookup.
      if (turn === undefined) return [];
      // Clocks armed under an earlier lease are not evidence: the agents may have been bound in between.
      if (turn.fresh) watches.clear();
    }
    let ids: string[];
    try {
      ids = [...new Set(await agents())];
    } catch (error) {
      onError(error, 'listing agents');
      return [];
    }
    const listed = new Set(ids);
    const now = clock.now();
    for (const [agent, watch] of watches) {
      // Forget agents that left, but not while their grace runs: a relaunch may briefly unlist one.
      if (!listed.has(agent) && (watch.graceUntil === undefined || watch.graceUntil <= now)) watches.delete(agent);
    }
    if (turn !== undefined) {
      try {
        fleet = await turn.merge(ids, watches, fleet, clock.now());
      } catch (error) {
        // Fail safe: without the fleet's rate limit and grace, this sweep does nothing.
        onError(error, 'reading the fleet recovery state');
        return [];
      }
    }
    const results: SweepResult[] = [];
    for (const agent of ids) {
      if (signal.aborted) break;
      // A lease lost mid-sweep (expired by this replica's own clock) ends the sweep at once.
      if (turn !== undefined && !turn.valid()) break;
      results.push(Object.freeze(await sweepAgent(agent, signal, turn)));
    }
    return results;
  }

  function sweep(): Promise<SweepResult[]> {
    if (!recover) return Promise.resolve([]);
    if (inflight !== undefined) return inflight;
    const current = runSweep(stopping.signal)
      .catch((error: unknown) => {
        onError(error, 'sweeping');
        return [] as SweepResult[];
      })
      .then((results) => {
        if (onSweep !== undefined) {
          try {
            onSweep(results);
          } catch (error) {
            onError(error, 'reporting a sweep');
          }
        }
        return results;
      })
      .finally(() => {
        if (inflight === current) inflight = undefined;
      });
    inflight = current;
    return current;
  }

  return Object.freeze({
    recover,
    get running() {
      return handle !== undefined;
    },
    get leader() {
      return recover && (fleetWatch === undefined || fleetWatch.leader);
    },
    sweep,
    start(): void {
      if (!recover || handle !== undefined) return;
      if (stopping.signal.aborted) stopping = new AbortController();
      handle = scheduler.setInterval(() => {
        if (inflight === undefined) void sweep();
      }, intervalMs);
      fleetWatch?.start();
    },
    async stop(): Promise<void> {
      if (handle !== undefined) {
        scheduler.clearInterval(handle);
        handle = undefined;
      }
      const settling = inflight;
      stopping.abort();
      stopping = new AbortController();
      await settling;
      await fleetWatch?.stop();
    },
    watch: (agent: string) => watches.get(agent),
  });
}
