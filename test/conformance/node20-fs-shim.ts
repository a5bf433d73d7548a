/**
 * Stand-in for `node:fs`, served by ./node20-fs-hook.ts to the MCP conformance CLIs
 * (@modelcontextprotocol/conformance 0.1.16 and its 0.2.0 pre-release installed as
 * @modelcontextprotocol/conformance-next) and to nothing else.
 *
 * Why: each CLI's single bundle does `import { globSync, ... } from "fs"` at top level, and Node 20's
 * fs has no `globSync` (added in Node 22), so on Node 20 the whole CLI fails at link time with
 * "The requested module 'fs' does not provide an export named 'globSync'". In both versions only
 * the `tier-check` command calls globSync (to collect its own `checks.json` files); the `client`
 * and `list` commands we run never do. This module is all of `node:fs`
 * (every named export and the default) plus a `globSync` that fails loudly if it is ever reached.
 */
import fs from 'node:fs';

export * from 'node:fs';
export default fs;

/** Never called by `conformance client`; throws instead of pretending to glob. */
export function globSync(..._args: unknown[]): never {
  throw new Error('globSync requires Node >= 22; mcp-supervisor only runs the `client` command');
}
