/**
 * `mcp-supervisor/redis`: several gateway replicas coordinated through Redis (node-redis, an
 * optional peer dependency: only hosts that import this subpath need `redis` installed).
 * Exports only; the design is in `docs/fleet.md`.
 */
export { redisCoordinator } from './coordinator.js';
export type { RedisCoordinator } from './coordinator.js';
export type { RedisCoordinatorOptions } from './options.js';
export type { RecoveryLogEntry, RedisCoordinatorEvents, RedisCoordinatorStats, WriteStats } from './events.js';
