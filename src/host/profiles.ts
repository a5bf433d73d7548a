/**
 * Profile loading of a host: the listed profiles (parsed up front, all or nothing), the host's
 * `loadProfile` for unlisted ones, and — without it — path-like references read from disk, but
 * only inside `profileRoots`: a reference that comes from a user must never make the host read,
 * and run, a planted file.
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import type { Environment } from '../config/expand.js';
import { loadProfileFile } from '../config/load.js';
import { parseProfileConfig } from '../config/parse.js';
import { canonicalProfileKey, isPathLikeRef, type ProfileKeyOptions } from '../config/profile-key.js';
import type { ProfileConfig, ServerConfig } from '../config/types.js';
import { McpSupervisorError } from '../errors.js';
import type { HostOptions } from './types.js';

/** The options of the canonical key function a host uses on every path. */
export function profileKeyOptions(options: HostOptions): ProfileKeyOptions {
  return {
    ...(options.defaultProfile === undefined ? {} : { defaultProfile: options.defaultProfile }),
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
  };
}

/**
 * Parses every listed profile (all or nothing), keyed by canonical key.
 * @throws McpSupervisorError `INVALID_CONFIG` naming the profile (and server and field)
 */
export function parseListedProfiles(profiles: Record<string, unknown>, keyOptions: ProfileKeyOptions, env: Environment): Map<string, ProfileConfig> {
  const parsed = new Map<string, ProfileConfig>();
  for (const [ref, document] of Object.entries(profiles)) {
    const key = canonicalProfileKey(ref, keyOptions);
    if (parsed.has(key)) {
      throw new McpSupervisorError('INVALID_CONFIG', `Invalid config: profile "${ref}" is listed twice (both spellings mean "${key}")`, { profile: key });
    }
    parsed.set(key, parseProfileConfig(document, { profile: ref, env }));
  }
  return parsed;
}

/** A server of a config by its own name (never an inherited property such as `constructor`). */
export function serverNamed(config: ProfileConfig | undefined, name: string): ServerConfig | undefined {
  return config && Object.hasOwn(config.servers, name) ? config.servers[name] : undefined;
}

/** True when `key` (a canonical path) is one of `roots` or inside one. */
function insideRoots(key: string, roots: readonly string[]): boolean {
  return roots.some((root) => key === root || key.startsWith(root.endsWith(path.sep) ? root : root + path.sep));
}

/** Where a path-like profile key's config lives: the file, or a directory's `.mcp.json`. */
function configFileFor(key: string): string {
  try {
    if (statSync(key).isDirectory()) return path.join(key, '.mcp.json');
  } catch {
    // Not there (yet): reading it reports the error with the file name.
  }
  return key;
}

/** How profile references are keyed and unlisted profiles found. */
export interface ProfileSourceOptions {
  env: Environment;
  keyOptions: ProfileKeyOptions;
  loadProfile?: HostOptions['loadProfile'];
  /** Real paths of the directories path-like references may be read from (without `loadProfile`). */
  profileRoots: readonly string[];
}

/** The profiles of a host: the listed ones, replaceable by a reload, and the way to load the rest. */
export class ProfileSource {
  constructor(
    private listed: Map<string, ProfileConfig>,
    private readonly options: ProfileSourceOptions,
  ) {}

  /** The canonical key of a profile reference (the one key function, on every path). */
  keyOf(ref?: string): string {
    return canonicalProfileKey(ref, this.options.keyOptions);
  }

  /** Parses profile documents as listed profiles would be (a reload's replacement). */
  parse(profiles: Record<string, unknown>): Map<string, ProfileConfig> {
    return parseListedProfiles(profiles, this.options.keyOptions, this.options.env);
  }

  /** Canonical keys of the listed profiles. */
  listedKeys(): IterableIterator<string> {
    return this.listed.keys();
  }

  /** The config of a profile key, or undefined for "no such profile" (readiness's loader). */
  readonly load = async (key: string, signal: AbortSignal): Promise<ProfileConfig | undefined> => {
    const known = this.listed.get(key);
    if (known) return known;
    const { env, loadProfile, profileRoots } = this.options;
    if (loadProfile) {
      const document = await loadProfile(key, signal);
      return document === undefined ? undefined : parseProfileConfig(document, { profile: key, env });
    }
    // Only inside the configured roots: a stray or hostile reference reads (and runs) nothing.
    if (isPathLikeRef(key) && insideRoots(key, profileRoots)) return loadProfileFile(configFileFor(key), { profile: key, env });
    return undefined;
  };

  /**
   * Runs a reload with `replacement` (if any) as the listed profiles. A failed reload restores the
   * profiles listed before it: nothing half-applied.
   */
  async reloadWith<T>(replacement: Map<string, ProfileConfig> | undefined, reload: () => Promise<T>): Promise<T> {
    const previous = this.listed;
    if (replacement) this.listed = replacement;
    try {
      return await reload();
    } catch (error) {
      this.listed = previous;
      throw error;
    }
  }
}
