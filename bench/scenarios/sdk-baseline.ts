/**
 * The raw-SDK baselines several scenarios compare against: what a host does without
 * mcp-supervisor — an SDK `Client` over the SDK's own `StdioClientTransport`, on the main thread.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StdioServerConfig } from '../../test/helpers/fixtures.js';

/** Connects a raw SDK client to a stdio server (spawning it). */
export async function connectRaw(config: StdioServerConfig): Promise<Client> {
  const client = new Client({ name: 'bench-baseline', version: '1.0.0' });
  client.onerror = () => undefined;
  await client.connect(new StdioClientTransport({ command: config.command, args: config.args, env: { ...config.env, PATH: process.env['PATH'] ?? '' }, stderr: 'ignore' }));
  return client;
}

/** One per-turn discovery as hosts do it today: connect, list tools, close. Returns the tool count. */
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
