/**
 * mcp-supervisor: keeps the MCP servers of busy multi-profile hosts discovered, alive and callable.
 * This module only re-exports the public surface: what a host passes in, gets back or listens to.
 * The internals those types are built from (a supervisor's state and its live session, the
 * coordinator's quiescence reports, discovery's raw outcomes) stay inside.
 */
export { createHost, type Host, type HostOptions, type HostDiscoveryOptions, type HostSessionOptions, type HostEvents, type HostStats } from './host.js';
export { McpSupervisorError, isMcpSupervisorError, type ErrorCode, type SerializedError, type McpSupervisorErrorOptions } from './errors.js';
export type { ReadinessView, ReadinessStatus, ServerView, Turn, TurnTool, CallOptions, WaitOptions } from './readiness/types.js';
export type { ReloadResult, ProfileChanges, ReadinessEvents } from './readiness/registry.js';
export type { SupervisorEvents, SupervisorStats } from './sessions/supervisor.js';
export type { BreakerOptions, BreakerState } from './sessions/breaker.js';
export type { DiscoveryOptions, DiscoveryStats, QuiesceRung } from './discovery/coordinator.js';
export type { FailureKind, ServerFailure, DiscoveryTimings } from './discovery/types.js';
export type { EraCacheStats } from './connection/era-cache.js';
export { type Clock, type TimerHandle, systemClock } from './clock.js';
export * from './config/index.js';
