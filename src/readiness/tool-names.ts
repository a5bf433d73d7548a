/**
 * Model-facing tool names: `mcp__<server>__<tool>`, restricted to `[A-Za-z0-9_-]{1,64}` (the
 * limit most model APIs enforce) and unique within a turn.
 *
 * The rule (README, "Use it"): **a tool's name depends only on its own server and tool names,
 * never on which other tools are present.** It is `mcp__<server>__<tool>` exactly when that is
 * already a valid name (only `A-Z a-z 0-9 _ -`, at most 64 characters) and the server name
 * neither contains `__` nor ends in `_`; otherwise it is that text with every other character
 * replaced by `_`, cut to 55 characters, then `_` and the first 8 hex digits of the SHA-256 of
 * `<server>/<tool>`.
 *
 * Why this is unique without looking at the other tools: sanitising (`a.b` and `a_b` both give
 * `a_b`) and truncation lose information, so every altered name carries the hash of the original
 * pair; and two unaltered names of different pairs can only be equal when one server name is the
 * other's followed by `_…` (`a`/`b__c` and `a__b`/`c`, `a`/`__b` and `a_`/`_b`), which the server
 * condition sends to the hashed form. The previous rule gave only *colliding* names a hash, so a
 * tool was renamed the moment a colliding one appeared (`a.b` was `mcp__s__a_b` until `a_b` was
 * added) — exactly what a host that keeps names across turns cannot have.
 *
 * Only a clash no rule can prevent — a server listing one tool twice, or a 32-bit hash
 * collision — is resolved by order: the later entry gets a re-salted hash.
 */
import { createHash } from 'node:crypto';

/** The longest name model APIs accept. */
export const MAX_TOOL_NAME_LENGTH = 64;

const VALID = /^[A-Za-z0-9_-]+$/;
const DISALLOWED = /[^A-Za-z0-9_-]/g;
const HASH_LENGTH = 8;

function shortHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, HASH_LENGTH);
}

function hashed(server: string, tool: string, salt = ''): string {
  const sanitised = `mcp__${server}__${tool}`.replace(DISALLOWED, '_');
  return `${sanitised.slice(0, MAX_TOOL_NAME_LENGTH - HASH_LENGTH - 1)}_${shortHash(`${server}/${tool}${salt}`)}`;
}

/** The model-facing name of one tool, by the rule above (before the clash fallback). */
export function baseToolName(server: string, tool: string): string {
  const plain = `mcp__${server}__${tool}`;
  const unambiguous = !server.includes('__') && !server.endsWith('_');
  return plain.length <= MAX_TOOL_NAME_LENGTH && VALID.test(plain) && unambiguous ? plain : hashed(server, tool);
}

/**
 * Assigns a unique model-facing name to every `(server, tool)` pair, in order: each pair's
 * {@link baseToolName}, which does not depend on the other pairs; a name already taken (see the
 * module comment) gets a re-salted hash.
 */
export function assignToolNames(pairs: readonly { server: string; tool: string }[]): string[] {
  const used = new Set<string>();
  return pairs.map(({ server, tool }) => {
    let name = baseToolName(server, tool);
    for (let salt = 1; used.has(name); salt++) name = hashed(server, tool, String(salt));
    used.add(name);
    return name;
  });
}
