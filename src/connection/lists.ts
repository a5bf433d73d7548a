/**
 * Reading lists: every page of a paginated list, bounded; and a server's whole tool list, which in
 * the 2026-07-28 era leaves out the tools whose `x-mcp-header` declarations are invalid (SEP-2243:
 * a client MUST exclude them; a call could never carry their headers). Discovery and the sessions' list refresh both read tools
 * here, so a tool excluded once is excluded everywhere.
 *
 * Why the SDK's `listTools()` in the new era and not our own pagination: the exclusion rules
 * (RFC 9110 tokens, primitive types, case-insensitive uniqueness, reachability through
 * `properties`) are the SDK's and it does not export its scanner. In the old era the pages are
 * read with plain requests: a resumed HTTP session never saw `initialize`, so the SDK client does
 * not know the server lists tools and its `listTools()` would answer an empty list.
 */
import { ListToolsResultSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { McpClient } from './connect.js';
import { MAX_LIST_PAGES } from './limits.js';

/** What a tool listing brought: the tools and how long the server vouches for them. */
export interface ToolListing {
  tools: Tool[];
  /** The list's `ttlMs` (2026-07-28), when positive; a day at most. */
  freshForMs?: number;
}

/** The longest `ttlMs` taken from a server (a day): a hint, not an instruction to never look again. */
const MAX_TTL_MS = 86_400_000;

/** A list result's positive `ttlMs`, bounded; undefined when absent, zero or not a number. */
function ttlOf(result: unknown): number | undefined {
  const ttl = (result as { ttlMs?: unknown }).ttlMs;
  return typeof ttl === 'number' && Number.isFinite(ttl) && ttl > 0 ? Math.min(Math.round(ttl), MAX_TTL_MS) : undefined;
}

/**
 * Lists every tool of the server, always asking it (in the new era `cacheMode: 'refresh'`, which
 * also refreshes what the client's header mirroring reads). At most {@link MAX_LIST_PAGES} pages.
 */
export async function listTools(client: McpClient, options: { timeout: number; signal?: AbortSignal; maxTotalTimeout?: number }): Promise<ToolListing> {
  if (client.getProtocolEra() !== 'modern') {
    const tools = await listAllPages('tools/list', async (cursor) => {
      const page = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, options);
      return { items: page.tools, nextCursor: page.nextCursor };
    });
    return { tools };
  }
  const result = await client.listTools(undefined, { ...options, cacheMode: 'refresh' });
  const freshForMs = ttlOf(result);
  // The host's types are the v1 SDK's; the JSON is the same (v2 only widens `properties`).
  return { tools: result.tools as unknown as Tool[], ...(freshForMs === undefined ? {} : { freshForMs }) };
}

type Page<T> = { items: T[]; nextCursor?: string | undefined };

/** Collects every page of a paginated MCP list; a repeated cursor or too many pages is an error. */
export async function listAllPages<T>(what: string, fetchPage: (cursor: string | undefined) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const result = await fetchPage(cursor);
    items.push(...result.items);
    if (result.nextCursor === undefined || result.nextCursor === '') return items;
    if (seen.has(result.nextCursor)) throw new Error(`${what} pagination repeated cursor ${JSON.stringify(result.nextCursor)}`);
    seen.add(result.nextCursor);
    cursor = result.nextCursor;
  }
  throw new Error(`${what} returned more than ${MAX_LIST_PAGES} pages`);
}
