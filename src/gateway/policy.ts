/**
 * The watchdog's recovery policy, as pure functions of (state, observation, now, config).
 *
 * Per agent, in this order (the first rule that applies decides):
 *  1. not connected            → clear its clock (a relaunch in progress is not "unbound")
 *  2. status lookup failed     → swallowed: nothing changes, nothing happens
 *  3. not checkable            → clear (checkable: heartbeat interval > 0, or an agent-origin
 *                                heartbeat within 30 min; synthetic presence never counts)
 *  4. bound                    → clear
 *  5. first unbound sighting   → arm the clock
 *  6. before the deadline      → wait; deadline = max(3 × heartbeat interval, 240 s)
 *  7. in post-recovery grace   → defer
 *  8. fleet-wide minimum interval since the last recovery not over → defer
 *  9. otherwise                → recover
 * A missed probe (current, unfulfilled, old enough) only adds detail to the reason.
 *
 * The runner ({@link ./watchdog.ts}) performs the lookups and the recovery; it applies
 * {@link afterRecovery} only when the host's hook succeeded, which is why a failed recovery
 * consumes neither the rate limit nor the grace.
 */
import { describeError } from '../errors.js';
import type { ProbeRecord } from './store.js';
import { nonNegativeMs, positiveNumber } from './validate.js';

/** What the host knows about an agent's session (its process and its MCP client). */
export interface SessionInfo {
  /** The agent is running and attached to the host. */
  connected: boolean;
  /** How often the agent calls a heartbeat tool, if it does (ms; 0 or absent: it does not). */
  heartbeatIntervalMs?: number | undefined;
  /**
   * When the agent itself last sent a heartbeat (clock ms). Presence the host synthesised must
   * not be reported here; use {@link lastHeartbeat} if the host records the origin instead.
   */
  lastAgentHeartbeatAt?: number | undefined;
  /** The latest heartbeat with its origin; only `origin: 'agent'` counts. */
  lastHeartbeat?: { at: number; origin: 'agent' | 'synthetic' } | undefined;
  /** The agent's current launch; when given, a probe of another launch is not "current". */
  launchId?: string | undefined;
}

/** The part of a bind status the policy reads. */
export interface WatchedStatus {
  /** A tool handler completed for this agent in the current epoch. */
  readonly bound: boolean;
  /** The current gateway epoch. */
  readonly epoch: string;
  /** The latest probe request, if any. */
  readonly probe?: ProbeRecord | undefined;
}

/** The outcome of the status lookup. */
export type StatusObservation = { ok: true; status: WatchedStatus } | { ok: false; error: unknown };

/** One agent as observed in one sweep. */
export interface Observation {
  /** From the host's session lookup. */
  session: SessionInfo;
  /** From the status lookup; absent when not looked up (the agent is not connected). */
  status?: StatusObservation | undefined;
}

/** The policy's memory of one agent. */
export interface AgentWatch {
  /** When the agent was first seen unbound (the armed clock), if it is armed. */
  readonly unboundSince: number | undefined;
  /** Until when a recent recovery protects it from another one. */
  readonly graceUntil: number | undefined;
}

/** The policy's memory of the whole fleet. */
export interface FleetWatch {
  /** When the last successful recovery of any agent happened. */
  readonly lastRecoveryAt: number | undefined;
}

/** Tunables of the policy (all in ms except `deadlineHeartbeats`). */
export interface PolicyConfig {
  /** Lower bound of the deadline (240 s). */
  deadlineFloorMs: number;
  /** The deadline is at least this many heartbeat intervals (3). */
  deadlineHeartbeats: number;
  /** After a recovery, the same agent is not recovered again for this long (600 s). */
  graceMs: number;
  /** Fleet-wide minimum interval between two recoveries (120 s). */
  minRecoveryIntervalMs: number;
  /** An agent-origin heartbeat this recent makes an agent checkable (30 min). */
  checkableWindowMs: number;
  /** An unfulfilled probe this old counts as missed (120 s). */
  missedProbeMs: number;
}

/** The defaults named in the design. */
export const DEFAULT_POLICY: Readonly<PolicyConfig> = Object.freeze({
  deadlineFloorMs: 240_000,
  deadlineHeartbeats: 3,
  graceMs: 600_000,
  minRecoveryIntervalMs: 120_000,
  checkableWindowMs: 30 * 60_000,
  missedProbeMs: 120_000,
});

/** Validates `overrides` and merges them over {@link DEFAULT_POLICY}. */
export function policyConfig(overrides: Partial<PolicyConfig> = {}): Readonly<PolicyConfig> {
  const config = { ...DEFAULT_POLICY, ...overrides };
  nonNegativeMs('deadlineFloorMs', config.deadlineFloorMs);
  positiveNumber('deadlineHeartbeats', config.deadlineHeartbeats);
  nonNegativeMs('graceMs', config.graceMs);
  nonNegativeMs('minRecoveryIntervalMs', config.minRecoveryIntervalMs);
  nonNegativeMs('checkableWindowMs', config.checkableWindowMs);
  nonNegativeMs('missedProbeMs', config.missedProbeMs);
  return Object.freeze(config);
}

/** What the policy wants done for one agent, and its memory afterwards. */
export interface Decision {
  /** `recover` asks the runner to call the host's hook. */
  readonly action: 'none' | 'armed' | 'deferred' | 'recover';
  /** Why, in words a person reads in a log or a status page. */
  readonly reason: string;
  /** The agent's memory after this decision (before any recovery outcome). */
  readonly next: AgentWatch;
}

/** A never-seen agent. */
export const FRESH_WATCH: AgentWatch = Object.freeze({ unboundSince: undefined, graceUntil: undefined });

const seconds = (ms: number): string => `${Math.round(ms / 1000)} s`;
/** Waits are rounded up, so a log never says "in 0 s" for a wait that is not over. */
const secondsUp = (ms: number): string => `${Math.ceil(ms / 1000)} s`;

function usableInterval(session: SessionInfo): number {
  const interval = session.heartbeatIntervalMs;
  return typeof interval === 'number' && Number.isFinite(interval) && interval > 0 ? interval : 0;
}

function agentHeartbeatAt(session: SessionInfo): number | undefined {
  if (typeof session.lastAgentHeartbeatAt === 'number') return session.lastAgentHeartbeatAt;
  const beat = session.lastHeartbeat;
  return beat !== undefined && beat.origin === 'agent' ? beat.at : undefined;
}

/** Whether the bind status of this agent can be judged at all (rule 3). */
export function isCheckable(session: SessionInfo, now: number, config: PolicyConfig = DEFAULT_POLICY): boolean {
  if (usableInterval(session) > 0) return true;
  const at = agentHeartbeatAt(session);
  return at !== undefined && Number.isFinite(at) && now - at <= config.checkableWindowMs;
}

/** How long an armed agent may stay unbound: max(3 × heartbeat interval, 240 s). */
export function deadlineMs(session: SessionInfo, config: PolicyConfig = DEFAULT_POLICY): number {
  return Math.max(config.deadlineHeartbeats * usableInterval(session), config.deadlineFloorMs);
}

/**
 * The missed-probe detail, or `''`: only for a probe of the current epoch (and of the current
 * launch, when the session names one), not fulfilled, requested at least `missedProbeMs` ago.
 */
export function missedProbeDetail(
  status: WatchedStatus,
  session: SessionInfo,
  now: number,
  config: PolicyConfig = DEFAULT_POLICY,
): string {
  const probe = status.probe;
  if (probe === undefined || probe.epoch !== status.epoch) return '';
  if (session.launchId !== undefined && probe.launchId !== session.launchId) return '';
  if (probe.fulfilledAt !== undefined) return '';
  const age = now - probe.requestedAt;
  if (age < config.missedProbeMs) return '';
  return `; probe ${probe.nonce} (launch ${probe.launchId}) unanswered for ${seconds(age)}`;
}

/** Decides for one agent; see the module comment for the rules. Pure. */
export function decide(
  previous: AgentWatch | undefined,
  fleet: FleetWatch,
  observation: Observation,
  now: number,
  config: PolicyConfig = DEFAULT_POLICY,
): Decision {
  const watch = previous ?? FRESH_WATCH;
  const cleared: AgentWatch = watch.unboundSince === undefined ? watch : { ...watch, unboundSince: undefined };
  const { session, status } = observation;

  if (!session.connected) return { action: 'none', reason: 'not connected', next: cleared };
  if (status === undefined || !status.ok) {
    const why = status === undefined ? 'not looked up' : describeError(status.error);
    // Neither arm nor clear: a flaky status source must not move anybody's deadline.
    return { action: 'none', reason: `status lookup failed (ignored): ${why}`, next: watch };
  }
  const detail = missedProbeDetail(status.status, session, now, config);
  if (!isCheckable(session, now, config)) {
    return {
      action: 'none',
      reason: `not checkable: no heartbeat interval and no agent heartbeat in the last ${seconds(config.checkableWindowMs)}${detail}`,
      next: cleared,
    };
  }
  if (status.status.bound) return { action: 'none', reason: `bound to epoch ${status.status.epoch}${detail}`, next: cleared };

  if (watch.unboundSince === undefined) {
    return {
      action: 'armed',
      reason: `not bound to epoch ${status.status.epoch}: clock armed${detail}`,
      next: { ...watch, unboundSince: now },
    };
  }
  const unboundFor = now - watch.unboundSince;
  const deadline = deadlineMs(session, config);
  const unbound = `not bound to epoch ${status.status.epoch} for ${seconds(unboundFor)} (deadline ${seconds(deadline)})`;
  if (unboundFor < deadline) return { action: 'armed', reason: `${unbound}${detail}`, next: watch };
  if (watch.graceUntil !== undefined && now < watch.graceUntil) {
    return {
      action: 'deferred',
      reason: `${unbound}; in post-recovery grace for ${secondsUp(watch.graceUntil - now)} more${detail}`,
      next: watch,
    };
  }
  if (fleet.lastRecoveryAt !== undefined && now - fleet.lastRecoveryAt < config.minRecoveryIntervalMs) {
    const wait = config.minRecoveryIntervalMs - (now - fleet.lastRecoveryAt);
    return {
      action: 'deferred',
      reason: `${unbound}; fleet recovery rate limit, next recovery in ${secondsUp(wait)}${detail}`,
      next: watch,
    };
  }
  return { action: 'recover', reason: `${unbound}${detail}`, next: watch };
}

/**
 * State after the host's recovery hook succeeded at `now`: the agent's clock is cleared (its new
 * launch gets a full deadline of its own), its grace starts, and the fleet's rate limit is spent.
 * There is deliberately no counterpart for a failed hook: failure changes nothing.
 */
export function afterRecovery(
  watch: AgentWatch,
  fleet: FleetWatch,
  now: number,
  config: PolicyConfig = DEFAULT_POLICY,
): { watch: AgentWatch; fleet: FleetWatch } {
  return {
    watch: { unboundSince: undefined, graceUntil: now + config.graceMs },
    fleet: { ...fleet, lastRecoveryAt: now },
  };
}
