/**
 * The canonical profile key: the one function that turns whatever a caller passes as a profile
 * reference into the key of its readiness entry. Every path (start-up kick-off, turns, retry,
 * reload, status) goes through it, so two spellings of one profile can never become two entries
 * with two discovery owners.
 *
 * - `''` / `undefined` → the default profile (itself canonicalised, so a default given as a path
 *   and that path spelled another way are one key);
 * - a path-like ref (`/…`, `~…`, `./…`, `../…`, anything with a separator or ending in `.json`) →
 *   `~` expanded, resolved against `cwd`, `realpath`ed as far as it exists, case-folded when the
 *   file system there is case-insensitive;
 * - any other string is a plain profile name and is returned unchanged.
 */
import { realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

/** Options of {@link canonicalProfileKey}. */
export interface ProfileKeyOptions {
  /** The profile that `''`/`undefined` mean. Default `'default'`. */
  defaultProfile?: string;
  /** Directory relative refs resolve against. Default `process.cwd()`. */
  cwd?: string;
  /** Home directory for `~`. Default `os.homedir()`. */
  homeDir?: string;
  /** Force case folding on or off; by default it is detected from the file system. */
  caseInsensitive?: boolean;
}

/** The name `''`/`undefined` resolve to when no `defaultProfile` is configured. */
export const DEFAULT_PROFILE_NAME = 'default';

/** True when a ref names a file or directory rather than a plain profile name. */
export function isPathLikeRef(ref: string): boolean {
  return (
    ref.startsWith('/') ||
    ref.startsWith('~') ||
    ref.startsWith('.') ||
    ref.includes('/') ||
    ref.includes('\\') ||
    ref.toLowerCase().endsWith('.json')
  );
}

/** realpath of the deepest existing ancestor, with the non-existing remainder appended. */
function realpathAsFarAsExists(absolute: string): { resolved: string; existing: string | undefined } {
  const missing: string[] = [];
  let current = absolute;
  for (;;) {
    try {
      const real = realpathSync.native(current);
      return { resolved: missing.length === 0 ? real : path.join(real, ...missing.reverse()), existing: real };
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return { resolved: absolute, existing: undefined };
      missing.push(path.basename(current));
      current = parent;
    }
  }
}

const caseInsensitivityByDirectory = new Map<string, boolean>();

function swapCase(text: string): string {
  return text.replace(/[a-zA-Z]/g, (char) => (char === char.toLowerCase() ? char.toUpperCase() : char.toLowerCase()));
}

/**
 * Detects case-insensitivity by looking the existing path up with its last lettered segment's
 * case swapped: the same inode means the file system folded the case. Cached per directory.
 */
function isCaseInsensitiveAt(existing: string): boolean {
  let probe = existing;
  while (!/[a-zA-Z]/.test(path.basename(probe))) {
    const parent = path.dirname(probe);
    if (parent === probe) return false;
    probe = parent;
  }
  const directory = path.dirname(probe);
  const cached = caseInsensitivityByDirectory.get(directory);
  if (cached !== undefined) return cached;
  let insensitive = false;
  try {
    const original = statSync(probe);
    const swapped = statSync(path.join(directory, swapCase(path.basename(probe))));
    insensitive = original.ino === swapped.ino && original.dev === swapped.dev;
  } catch {
    insensitive = false;
  }
  caseInsensitivityByDirectory.set(directory, insensitive);
  return insensitive;
}

function canonicalPath(ref: string, options: ProfileKeyOptions): string {
  const home = options.homeDir ?? homedir();
  let expanded = ref;
  if (ref === '~') expanded = home;
  else if (ref.startsWith('~/') || ref.startsWith('~\\')) expanded = path.join(home, ref.slice(2));
  const absolute = path.resolve(options.cwd ?? process.cwd(), expanded);
  const { resolved, existing } = realpathAsFarAsExists(absolute);
  const fold = options.caseInsensitive ?? (existing !== undefined && isCaseInsensitiveAt(existing));
  return fold ? resolved.toLowerCase() : resolved;
}

/**
 * The canonical key of a profile reference. Pure for plain names; touches the file system
 * (realpath, one cached case probe) for path-like refs.
 */
export function canonicalProfileKey(ref: string | undefined | null, options: ProfileKeyOptions = {}): string {
  const trimmed = ref?.trim() ?? '';
  if (trimmed === '') {
    const fallback = options.defaultProfile?.trim() || DEFAULT_PROFILE_NAME;
    return isPathLikeRef(fallback) ? canonicalPath(fallback, options) : fallback;
  }
  return isPathLikeRef(trimmed) ? canonicalPath(trimmed, options) : trimmed;
}
