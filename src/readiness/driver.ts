/**
 * The seams readiness is built on. The real implementations are the discovery coordinator (bodies
 * in piscina workers) and the session manager (supervised tool calls); unit tests of readiness's
 * pure coordination logic may substitute scripted ones and force interleavings with barriers.
 */
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { ProfileConfig, ServerConfig } from '../config/types.js';
import type { DiscoveryStats, QuiesceReport, RunHandlers } from '../discovery/coordinator.js';
import type { ServerOutcome } from '../discovery/types.js';
import type { ToolRoute } from './settlement.js';
import type { CallOptions, RequestOptions } from './types.js';

/** What readiness needs from discovery. Implemented by `DiscoveryCoordinator`. */
export interface DiscoveryDriver {
  /** Starts a generation over `servers`; `reuse` allows a recent result another profile's discovery produced. */
  start(key: string, servers: readonly ServerConfig[], handlers: RunHandlers, options?: { reuse?: boolean }): { generation: number };
  /** A server of `key` announced new lists (a result remembered for sharing is stale). */
  listsChanged?(key: string, server: ServerConfig): void;
  /** Retires the key's generation synchronously (before the first await), then walks the ladder. */
  quiesce(key: string, reason: string): Promise<QuiesceReport>;
  hasOwner(key: string): boolean;
  liveOwners(key: string): number;
  stats(): DiscoveryStats;
  close(): Promise<QuiesceReport[]>;
}

/** A tool call as readiness routes it to the session layer. */
export interface ToolCallRequest {
  key: string;
  server: ServerConfig;
  route: ToolRoute;
  args: Record<string, unknown>;
  options: CallOptions;
}

/** A resource read or a prompt fetch as readiness routes it to the session layer. */
export type ReadRequest =
  | { kind: 'resource'; key: string; server: ServerConfig; uri: string; options: RequestOptions }
  | { kind: 'prompt'; key: string; server: ServerConfig; name: string; args?: Record<string, string>; options: RequestOptions };

/** What readiness needs from the session layer. Implemented by `SessionManager`. */
export interface SessionLayer {
  callTool(request: ToolCallRequest): Promise<CallToolResult>;
  /** Reads a resource or fetches a prompt, supervised like a tool call. */
  read(request: ReadRequest): Promise<ReadResourceResult | GetPromptResult>;
  /** Whether a server's tools should be left out of new turns (it is parked). */
  isExcluded(key: string, server: string): boolean;
  /** Changes whenever a server is parked or revived, so cached catalogs can be rebuilt. */
  exclusionVersion(): number;
  /** A profile's discovery settled with these outcomes (resume HTTP sessions, eager warm-up). */
  published(key: string, config: ProfileConfig, outcomes: ReadonlyMap<string, ServerOutcome>): void;
  /** Signals every parked server of a profile to revive now (retry). */
  revive(key: string): void;
  /** Ends every session of a profile (reload). May throw; readiness invalidates regardless. */
  shutdownProfile(key: string, reason: string): Promise<void>;
  close(): Promise<void>;
}
