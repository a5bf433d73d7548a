/**
 * `mcp-supervisor/gateway`: for hosts that also serve MCP to their agents through an in-process
 * gateway. Exports only; how a host wires it: the JSDoc of `createGateway` (and docs/fleet.md for replicas).
 */
export { createGateway } from './gateway.js';
export type { Gateway, GatewayOptions } from './gateway.js';
export { PROBE_TOOL_NAME } from './attach.js';
export type { Attachment, AttachOptions, IdentifyAgent, ToolExtra } from './attach.js';
export type { BindStatus, ProbeReply, ProbeRequest, ProbeStatus, WriteOrigin } from './ledger.js';
export { MemoryBindStore } from './store.js';
export type { BindRecord, BindStore, ProbeRecord } from './store.js';
export { epochOfSession } from './epoch.js';
export { createWatchdog } from './watchdog.js';
export type { RecoveryContext, SweepResult, Watchdog, WatchdogOptions } from './watchdog.js';
export { isStaleEpochError, StaleEpochError } from './fleet.js';
export type {
  ClaimOutcome,
  FleetCoordinator,
  FleetEpochs,
  FleetRecoveryView,
  GatewayCoordinator,
  Leadership,
  LeaseFence,
  RecoveryClaim,
  RecoveryLimiter,
  RecoveryTimings,
  WatchdogCoordinator,
} from './fleet.js';
export { afterRecovery, decide, deadlineMs, DEFAULT_POLICY, FRESH_WATCH, isCheckable, missedProbeDetail, policyConfig } from './policy.js';
export type {
  AgentWatch,
  Decision,
  FleetWatch,
  Observation,
  PolicyConfig,
  SessionInfo,
  StatusObservation,
  WatchedStatus,
} from './policy.js';
export { systemClock, systemScheduler } from './clock.js';
export type { Clock, IntervalScheduler } from './clock.js';
