/**
 * The raw-SDK baselines several scenarios compare against: what a host does without
 * mcp-supervisor — an SDK `Client` over the SDK's own `StdioClientTransport`, on the main thread.
 *
 * Two ways to list tools, because they cost the main thread very differently:
 *   - {@link listToolsSdk}: `client.listTools()`, what hosts call. Besides the request it compiles
 *     an Ajv validator for every output schema (`cacheToolMetadata`), on the main thread;
 *   - {@link listToolsInline}: the same `tools/list` requests (every page) parsed with the same
 *     `ListToolsResultSchema`, without Ajv: the work of discovery itself, done inline. The library
 *     does not compile output schemas at discovery (it does so lazily, on a tool's first call), so
 *     this is the like-for-like control for "what the worker design saves".
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { ListToolsResultSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { StdioServerConfig } from '../../test/helpers/fixtures.js';

/** Connects a raw SDK client to a stdio server (spawning it). */
export async function connectRaw(config: StdioServerConfig): Promise<Client> {
  const client = new Client({ name: 'bench-baseline', version: '1.0.0' });
  client.onerror = () => undefined;
  await client.connect(new StdioClientTransport({ command: config.command, args: config.args, env: { ...config.env, PATH: process.env['PATH'] ?? '' }, stderr: 'ignore' }));
  return client;
}

/**
 * Every tool of a server through `client.listTools()` (Ajv compiles each output schema), all pages.
 * `options` (e.g. a longer `timeout` than the SDK's 60 s) go to every request.
 */
export async function listToolsSdk(client: Client, options?: RequestOptions): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor }, options);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** Every tool of a server through plain `tools/list` requests (schema-parsed, no Ajv), all pages. */
export async function listToolsInline(client: Client, options?: RequestOptions): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.request({ method: 'tools/list', ...(cursor === undefined ? {} : { params: { cursor } }) }, ListToolsResultSchema, options);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** One per-turn discovery as hosts did it: connect, list tools, close. Returns the tool count. */
export async function discoverRaw(config: StdioServerConfig): Promise<number> {
  const client = await connectRaw(config);
  try {
    return (await client.listTools()).tools.length;
  } finally {
    await client.close();
  }
}

/** Milliseconds since `start` (performance.now()). */
export function since(start: number): number {
  return performance.now() - start;
}
