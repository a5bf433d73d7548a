/**
 * What the readiness registry is configured with (timing, hooks, the config loader) and what it
 * reports (events, reload results). `ReadinessEvents`, `ProfileChanges` and `ReloadResult` are
 * public (re-exported through `registry.ts` by the package index).
 */
import type { ServerChanges } from '../config/diff.js';
import type { ProfileConfig } from '../config/types.js';
import type { QuiesceReport } from '../discovery/coordinator.js';
import type { SerializedError } from '../errors.js';
import type { ReadinessView } from './types.js';

/** Timing policy of readiness. */
export interface ReadinessOptions {
  /** A generation that has not settled after this long is retired and settled as failed (ms). */
  readinessCapMs: number;
  /** First cooldown before a failed server is re-discovered in the background (ms). */
  retryCooldownMs: number;
  /** Cap of the doubling cooldown (ms). */
  maxRetryCooldownMs: number;
  /** Unknown or unloadable profile references remembered at once; the oldest is forgotten first. */
  maxUnknownProfiles?: number;
}

/** What a reload changed in one profile. */
export interface ProfileChanges extends ServerChanges {
  key: string;
  /** The profile no longer exists. */
  profileRemoved?: boolean;
}

/** Events readiness emits (part of the host's event map). */
export interface ReadinessEvents {
  'discovery:start': { key: string; generation: number; servers: string[]; reason: string };
  'discovery:outcome': { key: string; generation: number; server: string; status: 'ready' | 'failed' | 'disabled'; kind?: string; tools?: number; ms: number };
  'discovery:settled': { key: string; generation: number; status: ReadinessView['status']; durationMs: number; failed: string[] };
  'discovery:retired': { key: string; generation: number | undefined; reason: string; quiesceMs: number; rung: QuiesceReport['rung']; quiesced: boolean };
  'reload:start': { keys: string[] };
  'tools:changed': { key: string; server: string; tools: number };
  'catalog:changed': { key: string; server: string; prompts: number; resources: number; resourceTemplates: number };
  'reload:done': { keys: string[]; changes: ProfileChanges[]; ok: boolean; error?: SerializedError };
}

/** The result of `reload()`. */
export interface ReloadResult {
  changes: ProfileChanges[];
  /** Errors thrown while shutting sessions down; the entries were invalidated regardless. */
  teardownErrors: SerializedError[];
}

/** What views need from outside readiness. */
export interface ReadinessHooks {
  /** The pending OAuth authorization URL of a server, shown in its `auth_required` view. */
  authorizationUrl?(key: string, server: string): string | undefined;
  /** What a ready server's view should warn about (it asked for roots and got none…). */
  warnings?(key: string, server: string): string[];
}

/** Loads (or re-reads) a profile's config. */
export type ProfileLoader = (key: string, signal: AbortSignal) => Promise<ProfileConfig | undefined>;
