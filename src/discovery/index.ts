/** Discovery: bodies in piscina workers, generations in SharedArrayBuffers, the quiescence ladder. */
export { DiscoveryCoordinator, type RunHandlers, type DiscoveryStats } from './coordinator.js';
export { resolveDiscoveryOptions, type DiscoveryOptions, type ResolvedDiscoveryOptions } from './options.js';
export type { QuiesceReport, QuiesceRung, QuiesceStats } from './quiesce.js';
export type { FailureKind, ServerFailure, ServerOutcome, SettledOutcome, DiscoveryTimings, ResumableSession, BodyTestHooks } from './types.js';
