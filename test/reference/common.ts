/**
 * Shared pieces of the reference-server tests (test/reference/*.test.ts): a host closed with the
 * test, tool lookup in a turn, result text, recorded handler calls and awaited events — all
 * through the library's public API (src/index.ts), nothing internal.
 */
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import type { CallToolResult, CreateMessageRequest, CreateMessageResult, ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { createHost } from '../../src/index.js';
import type { Host, HostEvents, HostOptions, Turn, TurnTool } from '../../src/index.js';

/** A host (profiles as given) closed when the test ends; discovery bounded for slow machines. */
export function referenceHost(t: ExecutionContext, options: HostOptions): Host {
  const host = createHost({
    ...options,
    discovery: { maxThreads: 2, connectTimeoutMs: 20_000, ...options.discovery },
  });
  t.teardown(() => host.close());
  return host;
}

/** The tool `tool` of `server` in a turn; fails with the turn's tool list when absent. */
export function toolOf(turn: Turn, server: string, tool: string): TurnTool {
  const found = turn.tools.find((entry) => entry.server === server && entry.tool === tool);
  if (!found) throw new Error(`no tool ${server}/${tool} in the turn; it has: ${turn.tools.map((entry) => `${entry.server}/${entry.tool}`).join(', ')}`);
  return found;
}

/** The server's own names of the turn's tools of `server`. */
export function toolNames(turn: Turn, server: string): string[] {
  return turn.tools.filter((entry) => entry.server === server).map((entry) => entry.tool);
}

/** Every text block of a result, joined by newlines. */
export function textOf(result: CallToolResult): string {
  return result.content
    .filter((block): block is Extract<CallToolResult['content'][number], { type: 'text' }> => block.type === 'text')
    .map((block) => block.text)
    .join('\n');
}

/** The context a handler was called with, as recorded (the signal reduced to what it is). */
export interface SeenContext {
  profile: string;
  server: string;
  signalIsAbortSignal: boolean;
}

/** One recorded handler call. */
export interface Seen<P> {
  params: P;
  ctx: SeenContext;
}

type Ctx = { profile: string; server: string; signal: AbortSignal };

function record(ctx: Ctx): SeenContext {
  return { profile: ctx.profile, server: ctx.server, signalIsAbortSignal: ctx.signal instanceof AbortSignal };
}

export type SamplingParams = CreateMessageRequest['params'];
export type ElicitParams = ElicitRequest['params'];

/** The text of the first message of a sampling request (its content may be one block or a list). */
export function firstMessageText(params: SamplingParams): string {
  const content: unknown = params.messages[0]?.content;
  const blocks = Array.isArray(content) ? content : [content];
  return blocks.map((block) => (block && typeof block === 'object' && (block as { type?: unknown }).type === 'text' ? String((block as { text?: unknown }).text) : '')).join('');
}

/** A sampling handler that records its calls and answers `answer(params, ctx)` as the model's text. */
export function recordingSampler(answer: (params: SamplingParams, ctx: Ctx) => string | Promise<string>) {
  const calls: Seen<SamplingParams>[] = [];
  const handler = async (params: SamplingParams, ctx: Ctx): Promise<CreateMessageResult> => {
    calls.push({ params, ctx: record(ctx) });
    const text = await answer(params, ctx);
    return { role: 'assistant', content: { type: 'text', text }, model: 'test-model', stopReason: 'endTurn' };
  };
  return { calls, handler };
}

/** An elicitation handler that records its calls and answers `result`. */
export function recordingElicitor(result: ElicitResult) {
  const calls: Seen<ElicitParams>[] = [];
  const handler = async (params: ElicitParams, ctx: Ctx): Promise<ElicitResult> => {
    calls.push({ params, ctx: record(ctx) });
    return result;
  };
  return { calls, handler };
}

/** Every emission of `event` from now on. */
export function collect<Name extends keyof HostEvents>(t: ExecutionContext, host: Host, event: Name): HostEvents[Name][] {
  const seen: HostEvents[Name][] = [];
  const off = host.on(event, (payload) => seen.push(payload));
  t.teardown(off);
  return seen;
}

/** Resolves once `list` holds an entry matching `match`; rejects at `timeoutMs`, saying what it holds. */
export async function waitForEntry<T>(list: readonly T[], match: (entry: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const found = list.find(match);
    if (found !== undefined) return found;
    if (performance.now() >= deadline) throw new Error(`no ${what} within ${timeoutMs} ms; seen: ${JSON.stringify(list).slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Resolves once `check()` holds; rejects at `timeoutMs` naming `what`. */
export async function waitUntil(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  await waitUntilAsync(async () => check(), what, timeoutMs);
}

/** Resolves once the async `check()` holds (tried every 20 ms); rejects at `timeoutMs` naming `what`. */
export async function waitUntilAsync(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A private temporary directory (realpath'd: servers compare resolved paths), removed when the test ends. */
export async function tempDir(t: ExecutionContext, label: string): Promise<string> {
  const dir = await realpath(await mkdtemp(path.join(tmpdir(), `mcp-supervisor-ref-${label}-`)));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** True when a value and everything reachable from it is frozen. */
export function deeplyFrozen(value: unknown): boolean {
  const stack: unknown[] = [value];
  const seen = new Set<unknown>();
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === null || typeof item !== 'object' || seen.has(item)) continue;
    seen.add(item);
    if (!Object.isFrozen(item)) return false;
    for (const child of Object.values(item)) stack.push(child);
  }
  return true;
}
