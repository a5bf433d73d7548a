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
 */
import { describeError } from '../errors.js';
import { systemClock, systemScheduler, type Clock, type IntervalScheduler } from './clock.js';
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
import { isFunction, positiveNumber } from './validate.js';

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
  /** Relaunches the agent. `signal` aborts when the watchdog is stopped. */
  recoverAgent: (agent: string, reason: string, context: { signal: AbortSignal }) => unknown;
  /** Policy tunables (see `DEFAULT_POLICY`). */
  policy?: Partial<PolicyConfig>;
  /** Runner period (default 60 000 ms). */
  intervalMs?: number;
  /** Runner timers (default: unref'd Node timers). */
  scheduler?: IntervalScheduler;
  /** Receives failures that a sweep swallows (listing agents, a sweep that threw). */
  onError?: (error: unknown, context: string) => void;
}

/** A watchdog; see the module comment. */
export interface Watchdog {
  /** The `recover` flag it was built with. */
  readonly recover: boolean;
  /** Whether the runner's interval is scheduled. */
  readonly running: boolean;
  /** Sweeps every agent once. Never rejects. With `recover` off, resolves `[]` without any lookup. */
  sweep(): Promise<SweepResult[]>;
  /** Starts the runner (a no-op when already running or when `recover` is off). */
  start(): void;
  /** Stops the runner, aborts a recovery in flight, and waits for the current sweep to settle. */
  stop(): Promise<void>;
  /** The policy's memory of `agent` (for status pages and tests). */
  watch(agent: string): AgentWatch | undefined;
}

const DEFAULT_INTERVAL_MS = 60_000;

/** Creates a {@link Watchdog}. */
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

  const watches = new Map<string, AgentWatch>();
  let fleet: FleetWatch = { lastRecoveryAt: undefined };
  let inflight: Promise<SweepResult[]> | undefined;
  let handle: unknown;
  let stopping = new AbortController();

  async function sweepAgent(agent: string, signal: AbortSignal): Promise<SweepResult> {
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
    try {
      await recoverAgent(agent, decision.reason, { signal });
    } catch (error) {
      // Nothing is recorded: the rate limit and the grace stay unspent, the clock stays armed.
      return { agent, action: 'failed', reason: `${decision.reason}; recovery failed: ${describeError(error)}` };
    }
    const after = afterRecovery(watches.get(agent) ?? decision.next, fleet, clock.now(), config);
    watches.set(agent, after.watch);
    fleet = after.fleet;
    return { agent, action: 'recovered', reason: decision.reason };
  }

  async function runSweep(signal: AbortSignal): Promise<SweepResult[]> {
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
    const results: SweepResult[] = [];
    for (const agent of ids) {
      if (signal.aborted) break;
      results.push(Object.freeze(await sweepAgent(agent, signal)));
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
    sweep,
    start(): void {
      if (!recover || handle !== undefined) return;
      if (stopping.signal.aborted) stopping = new AbortController();
      handle = scheduler.setInterval(() => {
        if (inflight === undefined) void sweep();
      }, intervalMs);
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
    },
    watch: (agent: string) => watches.get(agent),
  });
}
