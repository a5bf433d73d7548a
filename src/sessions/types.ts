/**
 * The types the session layer shares between its parts (the supervisor, its connect loop, its
 * call path and its list refresher) and with the host. None of them names a live session or a
 * timer: what the host sees of a supervisor is data, never one of its internal objects.
 */
import type { Prompt, Resource, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../clock.js';
import type { EraCache } from '../connection/era-cache.js';
import type { ClientSide } from '../connection/client-side.js';
import type { ToolRoute } from '../readiness/settlement.js';
import type { BreakerOptions, BreakerState } from './breaker.js';

/** Tuning of supervised sessions. */
export interface SessionOptions {
  /** How long a call waits for a fresh session after a respawn request (ms). Default 15 000. */
  respawnWaitMs: number;
  /** Connect attempts without a proven session before the supervisor parks. Default 5. */
  reconnectBudget: number;
  /** Backoff before the second connect attempt (ms), doubling after. Default 250. */
  backoffBaseMs: number;
  /** Backoff cap (ms). Default 30 000. */
  backoffMaxMs: number;
  /** Probe period of a parked server (ms). Default 60 000. */
  parkProbeIntervalMs: number;
  /** Which calls are replayed after a mid-call death. Default `idempotent`. */
  replay: 'idempotent' | 'always' | 'never';
  /** Calls in flight per server. Default 8. */
  maxConcurrentCalls: number;
  /** Default call timeout when neither the call nor the server sets one (ms). Default 60 000. */
  callTimeoutMs: number;
  /** Bounds `initialize` of a session (ms). Default: `discovery.connectTimeoutMs`. */
  connectTimeoutMs: number;
  /**
   * Warm sessions: connect right after discovery finds a server ready instead of on the first
   * call, so a first call costs what a call costs. A session that dies later is respawned by the
   * next call, not at once. Default true.
   */
  eager: boolean;
  /** Sessions warmed up at once after discovery, across the host. Default 4. */
  warmConcurrency?: number;
  /** Count tool results with `isError: true` as breaker failures. Default false. */
  countToolErrors: boolean;
  /** Debounce of `tools/list_changed` refreshes (ms). Default 200. */
  listChangedDebounceMs: number;
  /** The largest message accepted from a server (bytes). Default 10 MB. */
  maxMessageBytes?: number;
  /** Most items of one list a refresh may bring (over it, the old list stays). */
  maxCatalogItems?: number;
  /** Deepest schema a refreshed tool may have (over it, the old list stays). */
  maxSchemaDepth?: number;
  /** The host's lifeline marker, added to every spawned server's environment. */
  markerEnv?: Readonly<Record<string, string>>;
  breaker: BreakerOptions;
}

/** Where a supervisor's connect loop is, as `host.stats()` reports it. */
export type SupervisorStateKind = 'idle' | 'connecting' | 'ready' | 'backoff' | 'parked' | 'closed';

/** Events a supervisor reports. */
export interface SupervisorEvents {
  'server:connected': { server: string; profiles: string[]; sessionId: number; pid?: number; resumed: boolean };
  'server:exited': { server: string; profiles: string[]; code: number | null; signal: string | null };
  'server:disconnected': { server: string; profiles: string[] };
  'server:respawned': { server: string; profiles: string[]; pid?: number };
  'server:parked': { server: string; profiles: string[]; reason: string; nextProbeAt: number };
  'server:revived': { server: string; profiles: string[] };
  'breaker:open': { server: string; profiles: string[]; probeAt: number };
  'breaker:half-open': { server: string; profiles: string[] };
  'breaker:closed': { server: string; profiles: string[] };
}

/** The kinds of list a server announces changes of. */
export type ListKind = 'tools' | 'prompts' | 'resources';

/** A re-listed part of a server's catalogue. */
export interface CatalogLists {
  tools?: Tool[];
  prompts?: Prompt[];
  resources?: Resource[];
  resourceTemplates?: ResourceTemplate[];
}

/** What a supervisor needs from its manager. */
export interface SupervisorContext {
  clock: Clock;
  options: SessionOptions;
  random: () => number;
  /** Profiles currently using this supervisor (for events and error messages). */
  profiles(): string[];
  emit<Name extends keyof SupervisorEvents>(event: Name, payload: SupervisorEvents[Name]): void;
  /** Parked/revived: turns must be rebuilt. */
  exclusionChanged(): void;
  /** The server re-listed a kind after its `list_changed` (for the next turn). */
  listsChanged(lists: CatalogLists): void;
  /** The client side this server's sessions connect as (capabilities, handlers, OAuth). */
  side(): ClientSide;
  /** The authorization URL of a pending OAuth code flow of this server, if any. */
  pendingAuthorization?(): string | undefined;
  /** The host's era verdicts: a session adopts its server's instead of probing, and records its own. */
  eras?: EraCache;
}

/** What a supervised request does. */
export type Operation = (
  | { kind: 'tool'; route: ToolRoute; args: Record<string, unknown> }
  | { kind: 'resource'; uri: string }
  | { kind: 'prompt'; name: string; args?: Record<string, string> }
) & {
  /** The profile the request came from (for traces: a shared session serves several). */
  readonly profile?: string;
};

/** Counters of one supervisor. */
export interface SupervisorStats {
  server: string;
  profiles: string[];
  state: SupervisorStateKind;
  nextProbeAt?: number;
  parkReason?: string;
  connects: number;
  respawns: number;
  respawnRequests: number;
  calls: number;
  replays: number;
  reinitialisations: number;
  breaker: BreakerState;
  breakerFailures: number;
  attemptsSinceProven: number;
  pid?: number;
}

/** The counters a supervisor's parts add to (a plain record, reported as they are). */
export type SupervisorCounters = Pick<SupervisorStats, 'connects' | 'respawns' | 'respawnRequests' | 'calls' | 'replays' | 'reinitialisations'>;
