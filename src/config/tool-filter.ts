/**
 * Per-server tool filters: `"tools": { "include": [globs], "exclude": [globs] }` in a profile
 * document, and Roo's `"disabledTools": [names]` read as an exclude. A filter is a security
 * control, not a display option: a filtered tool is absent from turns *and* refused by calls.
 *
 * Globs match the server's own tool name (not the `mcp__` name), as a whole and case-sensitively;
 * `*` is any run of characters (tool names may contain `/`, so it crosses slashes). Include
 * narrows first, then exclude wins: an explicit deny always holds. Matching is picomatch's, with
 * bash semantics so a single star crosses `/` — a glob matcher is not something to write by hand.
 */
import picomatch from 'picomatch';

/** A server's tool filter, as normalised by config parsing. */
export interface ToolFilter {
  /** When present, only tools matching one of these globs are kept. */
  readonly include?: readonly string[];
  /** Tools matching one of these globs are dropped (always wins over include). */
  readonly exclude: readonly string[];
}

type Matcher = (name: string) => boolean;

const compiled = new WeakMap<ToolFilter, { include: Matcher | undefined; exclude: Matcher }>();

function matcher(globs: readonly string[]): Matcher {
  if (globs.length === 0) return () => false;
  return picomatch([...globs], { bash: true, dot: true, nocase: false, nobrace: true, noextglob: true });
}

/** True when `tool` passes `filter` (no filter: every tool passes). */
export function toolAllowed(filter: ToolFilter | undefined, tool: string): boolean {
  if (!filter) return true;
  let matchers = compiled.get(filter);
  if (!matchers) {
    matchers = { include: filter.include ? matcher(filter.include) : undefined, exclude: matcher(filter.exclude) };
    compiled.set(filter, matchers);
  }
  if (matchers.include && !matchers.include(tool)) return false;
  return !matchers.exclude(tool);
}
