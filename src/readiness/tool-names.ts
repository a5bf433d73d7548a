/**
 * Model-facing tool names: `mcp__<server>__<tool>`, restricted to `[A-Za-z0-9_-]{1,64}` (the
 * limit most model APIs enforce) and unique within a turn.
 *
 * Sanitising can make two different tools collide (`a.b` and `a_b`) and truncation can make long
 * names collide; both are resolved with a short hash of the original `server/tool` pair, so a
 * given tool keeps the same name across turns no matter which other tools are present.
 */
import { createHash } from 'node:crypto';

/** The longest name model APIs accept. */
export const MAX_TOOL_NAME_LENGTH = 64;

const DISALLOWED = /[^A-Za-z0-9_-]/g;

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}

/** The sanitised name before collision handling. */
export function baseToolName(server: string, tool: string): string {
  const raw = `mcp__${server}__${tool}`.replace(DISALLOWED, '_');
  if (raw.length <= MAX_TOOL_NAME_LENGTH) return raw;
  return `${raw.slice(0, MAX_TOOL_NAME_LENGTH - 9)}_${shortHash(`${server}/${tool}`)}`;
}

function withHash(server: string, tool: string, base: string, salt = ''): string {
  const suffix = `_${shortHash(`${server}/${tool}${salt}`)}`;
  return `${base.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length)}${suffix}`;
}

/**
 * Assigns a unique model-facing name to every `(server, tool)` pair, in order. Pairs whose base
 * name is shared get a hash suffix (all of them, so no tool's name depends on listing order).
 */
export function assignToolNames(pairs: readonly { server: string; tool: string }[]): string[] {
  const bases = pairs.map(({ server, tool }) => baseToolName(server, tool));
  const counts = new Map<string, number>();
  for (const base of bases) counts.set(base, (counts.get(base) ?? 0) + 1);
  const used = new Set<string>();
  return pairs.map(({ server, tool }, index) => {
    const base = bases[index]!;
    let name = (counts.get(base) ?? 0) > 1 ? withHash(server, tool, base) : base;
    // A hash suffix can in theory hit another tool's literal name: salt until unique.
    for (let salt = 1; used.has(name); salt++) name = withHash(server, tool, base, String(salt));
    used.add(name);
    return name;
  });
}
