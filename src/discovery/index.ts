/** Discovery: bodies in piscina workers, generations in SharedArrayBuffers, the quiescence ladder. */
export {
  DiscoveryCoordinator,
  resolveDiscoveryOptions,
  type DiscoveryOptions,
  type ResolvedDiscoveryOptions,
  type RunHandlers,
  type QuiesceReport,
  type QuiesceRung,
  type DiscoveryStats,
} from './coordinator.js';
export type { FailureKind, ServerFailure, ServerOutcome, SettledOutcome, DiscoveryTimings, ResumableSession, BodyTestHooks } from './types.js';
