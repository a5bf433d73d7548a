/**
 * What a config change does to a profile's servers, as a reload reports it. Pure: it compares two
 * server maps and touches nothing.
 *
 * A server counts as changed when its connection fingerprint (see `fingerprint.ts`) differs, or
 * when it was enabled or disabled: the fingerprint leaves `disabled` out on purpose (it does not
 * change *what* is connected to), but it does change what discovery looks at.
 */
import { serverFingerprint } from './fingerprint.js';
import type { ServerConfig } from './types.js';

/** Server names of a profile, sorted by what a config change did to them (each in config order). */
export interface ServerChanges {
  /** Only in the new config. */
  added: string[];
  /** Only in the old config. */
  removed: string[];
  /** In both, with another fingerprint or another `disabled`. */
  changed: string[];
  /** In both, connected to exactly as before. */
  unchanged: string[];
}

/**
 * Compares the servers of two configs of one profile. Names are looked up as own keys only, so a
 * server called `constructor` or `toString` is an ordinary name, as everywhere else in the config.
 */
export function diffServers(before: Readonly<Record<string, ServerConfig>>, after: Readonly<Record<string, ServerConfig>>): ServerChanges {
  const changes: ServerChanges = { added: [], removed: [], changed: [], unchanged: [] };
  for (const [name, next] of Object.entries(after)) {
    const previous = Object.hasOwn(before, name) ? before[name] : undefined;
    if (!previous) changes.added.push(name);
    else if (serverFingerprint(previous) !== serverFingerprint(next) || previous.disabled !== next.disabled) changes.changed.push(name);
    else changes.unchanged.push(name);
  }
  for (const name of Object.keys(before)) if (!Object.hasOwn(after, name)) changes.removed.push(name);
  return changes;
}
