/**
 * Wiring the bind ledger into SDK `McpServer`s: tool handlers record a success when they
 * complete, and `mcp_probe` is added.
 *
 * Only documented `McpServer` surface is used. `attach` shadows the instance's `registerTool`
 * (and the deprecated `tool`) so every tool registered afterwards gets a recording callback, and
 * patches each resulting `RegisteredTool.update` so a callback swapped in later is wrapped too.
 * Tools registered *before* `attach` cannot be enumerated without the private `_registeredTools`
 * map, so the host passes their `RegisteredTool` handles (`{ tools }`); an `McpServer` that already
 * answers `tools/call` without handles is refused rather than left half-instrumented (detected
 * through the public `Server.assertCanSetRequestHandler`). Task-based tools (`registerToolTask`,
 * experimental) are not wrapped: their handler returns before the work runs.
 */
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { McpSupervisorError } from '../errors.js';
import { epochOfSession } from './epoch.js';
import type { BindLedger } from './ledger.js';

/** The context the SDK hands to every tool handler. */
export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * Maps a tool call's context to the calling agent, from what the host trusts: `extra.authInfo`
 * (set by the host's auth middleware) or `extra.sessionId` (a session the host opened for a known
 * agent). `undefined` means "unknown agent": nothing is recorded.
 */
export type IdentifyAgent = (extra: ToolExtra) => string | undefined | Promise<string | undefined>;

/** Options of `Gateway.attach`. */
export interface AttachOptions {
  /** Handles of tools registered before `attach`, to be wrapped in place. */
  tools?: Iterable<RegisteredTool>;
}

/** The result of attaching a gateway to an `McpServer`. */
export interface Attachment {
  /** The server attached. */
  readonly server: McpServer;
  /** The `mcp_probe` tool added to it (the host may disable or remove it). */
  readonly probe: RegisteredTool;
}

/** Name of the probe tool. */
export const PROBE_TOOL_NAME = 'mcp_probe';

const probeInput = {
  nonce: z.string().min(1).max(256).describe('The nonce you were asked to send back.'),
  launch_id: z.string().min(1).max(256).describe('The launch id you were given with the nonce.'),
};

const probeOutput = {
  agent: z.string(),
  nonce: z.string(),
  launchId: z.string(),
  gatewayEpoch: z.string(),
  observedAt: z.number(),
};

function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

type AnyFunction = (this: unknown, ...args: unknown[]) => unknown;

/** Wraps tool callbacks and attaches servers for one gateway; see the module comment. */
export class ToolBinder {
  readonly #ledger: BindLedger;
  readonly #identify: IdentifyAgent;
  readonly #onError: (error: unknown, context: string) => void;
  readonly #wrapped = new WeakSet<object>();
  readonly #adopted = new WeakSet<RegisteredTool>();
  readonly #attached = new WeakMap<McpServer, Attachment>();

  constructor(ledger: BindLedger, identify: IdentifyAgent, onError: (error: unknown, context: string) => void) {
    this.#ledger = ledger;
    this.#identify = identify;
    this.#onError = onError;
  }

  /**
   * The epoch a call belongs to: the one its session id carries, else the epoch current when its
   * handler started. A call through a session of an older epoch (a host that did not 404 it)
   * then proves nothing about the current one.
   */
  originEpoch(extra: ToolExtra | undefined): string {
    return epochOfSession(extra?.sessionId) ?? this.#ledger.epoch;
  }

  async #agentOf(extra: ToolExtra): Promise<string | undefined> {
    try {
      const agent = await this.#identify(extra);
      return typeof agent === 'string' && agent.length > 0 ? agent : undefined;
    } catch (error) {
      this.#onError(error, 'identifying the agent of a tool call');
      return undefined;
    }
  }

  async #recordCompletion(extra: ToolExtra | undefined, epoch: string): Promise<void> {
    // A cancelled request gets no response (the SDK drops it), so it proves nothing.
    if (typeof extra !== 'object' || extra === null || extra.signal?.aborted === true) return;
    const agent = await this.#agentOf(extra);
    if (agent === undefined) return;
    try {
      await this.#ledger.recordSuccess(agent, { epoch });
    } catch (error) {
      this.#onError(error, `recording a tool success for agent ${agent}`);
    }
  }

  /**
   * Wraps a tool callback so that its completion (a result or a thrown error: either way the
   * client reached the handler and gets an answer) records a success for the calling agent.
   * Works for callbacks with and without arguments (the SDK's `extra` is always last). Wrapping
   * twice is a no-op.
   */
  wrap<F>(callback: F): F {
    if (typeof callback !== 'function') {
      throw new McpSupervisorError('INVALID_CONFIG', `Expected a tool callback function, got \`${String(callback)}\` (${typeof callback})`);
    }
    if (this.#wrapped.has(callback)) return callback;
    const original = callback as unknown as AnyFunction;
    const binder = this;
    const wrapped = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const extra = args[args.length - 1] as ToolExtra | undefined;
      const epoch = binder.originEpoch(extra);
      try {
        return await original.apply(this, args);
      } finally {
        // Recorded before the result is returned, so a client that saw the answer is in the ledger.
        await binder.#recordCompletion(extra, epoch);
      }
    };
    this.#wrapped.add(wrapped);
    return wrapped as unknown as F;
  }

  /** Makes later `update({ callback })` calls on `tool` wrap their callback. */
  #adopt(tool: RegisteredTool): RegisteredTool {
    if (this.#adopted.has(tool)) return tool;
    const update = tool.update;
    const binder = this;
    tool.update = function (updates) {
      const next = updates.callback === undefined ? updates : { ...updates, callback: binder.wrap(updates.callback) };
      update.call(tool, next);
    } as RegisteredTool['update'];
    this.#adopted.add(tool);
    return tool;
  }

  #probeHandler = async (args: { nonce: string; launch_id: string }, extra: ToolExtra): Promise<CallToolResult> => {
    const epoch = this.originEpoch(extra);
    const agent = await this.#agentOf(extra);
    if (agent === undefined) {
      return errorResult(`${PROBE_TOOL_NAME}: the gateway could not identify the calling agent, so nothing was recorded.`);
    }
    if (extra.signal.aborted) return errorResult(`${PROBE_TOOL_NAME}: cancelled.`);
    let reply;
    try {
      reply = await this.#ledger.recordProbe(agent, { nonce: args.nonce, launchId: args.launch_id }, { epoch });
    } catch (error) {
      this.#onError(error, `recording ${PROBE_TOOL_NAME} for agent ${agent}`);
      return errorResult(`${PROBE_TOOL_NAME}: the gateway could not record the probe; try again shortly.`);
    }
    if (reply === undefined) {
      return errorResult(
        `${PROBE_TOOL_NAME}: this MCP session belongs to gateway epoch ${epoch}, but the gateway restarted (now ${this.#ledger.epoch}). ` +
          'Your MCP client must reconnect (re-initialise) before these tools work again.',
      );
    }
    return { content: [{ type: 'text', text: JSON.stringify(reply) }], structuredContent: { ...reply } };
  };

  /** Attaches to `server`; see the module comment. Attaching the same server again returns the first attachment. */
  attach(server: McpServer, options: AttachOptions = {}): Attachment {
    const existing = this.#attached.get(server);
    if (existing !== undefined) return existing;

    let answersToolCalls = false;
    try {
      server.server.assertCanSetRequestHandler('tools/call');
    } catch {
      answersToolCalls = true;
    }
    if (answersToolCalls && options.tools === undefined) {
      throw new McpSupervisorError(
        'INVALID_CONFIG',
        'This McpServer already has tools registered: attach the gateway before registering tools, or pass their handles as `attach(server, { tools })`',
      );
    }

    for (const tool of options.tools ?? []) {
      if (!('createTask' in tool.handler)) tool.handler = this.wrap(tool.handler);
      this.#adopt(tool);
    }

    const register = server.registerTool.bind(server);
    const probe = register(
      PROBE_TOOL_NAME,
      {
        title: 'Gateway bind probe',
        description:
          "Proves that this agent's MCP client is connected to the current gateway. Call it with the nonce and launch_id you were given; it echoes them with the gateway epoch.",
        inputSchema: probeInput,
        outputSchema: probeOutput,
        annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
      },
      this.#probeHandler,
    );

    const registerTool = ((name: string, config: Parameters<typeof register>[1], callback: Parameters<typeof register>[2]) =>
      this.#adopt(register(name, config, this.wrap(callback)))) as McpServer['registerTool'];
    const legacyTool = server.tool.bind(server) as unknown as (name: string, ...rest: unknown[]) => RegisteredTool;
    const tool = ((name: string, ...rest: unknown[]) => {
      // Every `tool(...)` overload ends with the callback.
      const callback = rest.pop();
      return this.#adopt(legacyTool(name, ...rest, this.wrap(callback)));
    }) as McpServer['tool'];
    // Own properties shadow the prototype methods for this instance only.
    Object.defineProperty(server, 'registerTool', { value: registerTool, configurable: true, writable: true });
    Object.defineProperty(server, 'tool', { value: tool, configurable: true, writable: true });

    const attachment: Attachment = Object.freeze({ server, probe });
    this.#attached.set(server, attachment);
    return attachment;
  }
}
