/**
 * mcp-supervisor: keeps the MCP servers of busy multi-profile hosts discovered, alive and callable.
 * This module only re-exports the public surface.
 */
export { createHost, type Host, type HostOptions, type HostDiscoveryOptions, type HostEvents, type HostStats } from './host.js';
export { McpSupervisorError, isMcpSupervisorError, type ErrorCode, type SerializedError, type McpSupervisorErrorOptions } from './errors.js';
export type { ReadinessView, ReadinessStatus, ServerView, Turn, TurnTool, CallOptions, WaitOptions } from './readiness/types.js';
export type { ReloadResult, ProfileChanges, ReadinessEvents } from './readiness/registry.js';
export type { SessionOptions, SupervisorEvents, SupervisorStats, SupervisorState } from './sessions/supervisor.js';
export type { BreakerOptions, BreakerState } from './sessions/breaker.js';
export type { DiscoveryOptions, DiscoveryStats, QuiesceReport, QuiesceRung } from './discovery/coordinator.js';
export type { FailureKind, ServerFailure, ServerOutcome, DiscoveryTimings } from './discovery/types.js';
export { type Clock, type TimerHandle, systemClock } from './clock.js';
export * from './config/index.js';
