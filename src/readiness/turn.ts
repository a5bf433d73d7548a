/**
 * The frozen {@link Turn} handed to a chat turn: the tools of one settlement (or of the servers
 * ready when the caller's `maxWaitMs` ran out), the pending and failed servers, and a `callTool`
 * bound to that snapshot. Nothing discovered later changes a turn already returned.
 */
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { ProfileConfig } from '../config/types.js';
import { McpSupervisorError, isMcpSupervisorError } from '../errors.js';
import type { SessionLayer } from './driver.js';
import type { TurnCatalog } from './settlement.js';
import { checkArguments } from './arguments.js';
import type { CallOptions, ReadinessView, RequestOptions, Turn } from './types.js';

/** A tool-call failure as the model sees it when `errorsAsResults` is set. */
export function errorAsResult(error: McpSupervisorError): CallToolResult {
  return {
    content: [{ type: 'text', text: error.modelText }],
    isError: true,
    _meta: { 'mcp-supervisor/error': { code: error.code, retryable: error.retryable, ...(error.server ? { server: error.server } : {}) } },
  };
}

/** Runs a call, turning McpSupervisorError into an `isError` result when asked to. */
export async function withErrorsAsResults(options: CallOptions, call: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await call();
  } catch (error) {
    if (options.errorsAsResults && isMcpSupervisorError(error)) return errorAsResult(error);
    throw error;
  }
}

/** A resource URI: a non-empty string. @throws McpSupervisorError INVALID_ARGUMENTS */
export function checkUri(uri: unknown, profile: string, server: string): string {
  if (typeof uri !== 'string' || uri === '') {
    throw new McpSupervisorError('INVALID_ARGUMENTS', `Expected a resource URI (a non-empty string) to read from "${server}", got ${typeof uri}`, { profile, server, retryable: false });
  }
  return uri;
}

/** A prompt name and its arguments (strings only, as MCP says). @throws McpSupervisorError INVALID_ARGUMENTS */
export function checkPrompt(name: unknown, args: unknown, profile: string, server: string): { name: string; args?: Record<string, string> } {
  const fail = (problem: string): McpSupervisorError => new McpSupervisorError('INVALID_ARGUMENTS', `The prompt request to "${server}" was not sent: ${problem}`, { profile, server, retryable: false });
  if (typeof name !== 'string' || name === '') throw fail('expected a prompt name (a non-empty string)');
  if (args === undefined) return { name };
  if (typeof args !== 'object' || args === null || Array.isArray(args) || Object.getPrototypeOf(args) !== Object.prototype) throw fail('expected the arguments to be an object of strings');
  for (const [key, value] of Object.entries(args)) if (typeof value !== 'string') throw fail(`argument \`${key}\` is not a string`);
  return { name, args: { ...(args as Record<string, string>) } };
}

/** Routes a resource read or prompt fetch to the server as currently configured. */
export function readFrom(
  key: string,
  config: ProfileConfig | undefined,
  sessions: SessionLayer,
  serverName: string,
  request: { kind: 'resource'; uri: string; options: RequestOptions } | { kind: 'prompt'; name: string; args?: Record<string, string>; options: RequestOptions },
): Promise<ReadResourceResult | GetPromptResult> {
  const server = config && typeof serverName === 'string' && Object.hasOwn(config.servers, serverName) ? config.servers[serverName] : undefined;
  if (!server || server.disabled) {
    return Promise.reject(new McpSupervisorError('UNKNOWN_SERVER', `The MCP server "${String(serverName)}" is not configured in profile "${key}".`, { profile: key, server: String(serverName), retryable: false }));
  }
  return sessions.read({ ...request, key, server });
}

/**
 * Builds a deeply frozen turn from a view and catalog. Its tool list is a snapshot; its calls go to
 * the server as currently configured (`currentConfig`), so a turn taken before a reload never
 * talks to a server configuration the reload replaced.
 */
export function createTurn(view: ReadinessView, catalog: TurnCatalog, currentConfig: () => ProfileConfig | undefined, sessions: SessionLayer): Turn {
  type FailedServer = Turn['failed'][number];
  const failedList: FailedServer[] = [];
  for (const [server, state] of Object.entries(view.servers)) {
    if (state.status === 'failed' || state.status === 'auth_required') failedList.push(Object.freeze({ server, kind: state.kind, message: state.message }));
    else if (state.status === 'ready' && sessions.isExcluded(view.key, server)) {
      failedList.push(Object.freeze({ server, kind: 'parked', message: 'parked after repeated connection failures' }));
    }
  }
  const allFailed: readonly FailedServer[] = Object.freeze(failedList);
  const turn: Turn = {
    key: view.key,
    generation: view.generation,
    status: view.status,
    tools: catalog.tools,
    pending: view.pending,
    failed: allFailed,
    waitTimedOut: view.waitTimedOut === true,
    ...(view.error ? { error: view.error } : {}),
    prompts: catalog.prompts,
    resources: catalog.resources,
    resourceTemplates: catalog.resourceTemplates,
    async readResource(server: string, uri: string, options: RequestOptions = {}): Promise<ReadResourceResult> {
      return (await readFrom(view.key, currentConfig(), sessions, server, { kind: 'resource', uri: checkUri(uri, view.key, server), options })) as ReadResourceResult;
    },
    async getPrompt(server: string, name: string, args?: Record<string, string>, options: RequestOptions = {}): Promise<GetPromptResult> {
      return (await readFrom(view.key, currentConfig(), sessions, server, { kind: 'prompt', ...checkPrompt(name, args, view.key, server), options })) as GetPromptResult;
    },
    callTool(name: string, args: Record<string, unknown> = {}, options: CallOptions = {}): Promise<CallToolResult> {
      return withErrorsAsResults(options, async () => {
        const route = catalog.routes.get(name);
        const checked = checkArguments(args, { profile: view.key, ...(route ? { server: route.server } : {}), tool: String(name) });
        if (!route) {
          throw new McpSupervisorError('UNKNOWN_TOOL', `The tool "${name}" is not part of this turn; use one of the tools listed for it.`, {
            profile: view.key,
            retryable: false,
          });
        }
        const config = currentConfig();
        const server = config && Object.hasOwn(config.servers, route.server) ? config.servers[route.server] : undefined;
        if (!server || server.disabled) {
          throw new McpSupervisorError('UNKNOWN_SERVER', `The MCP server "${route.server}" is no longer configured in profile "${view.key}"; "${name}" was not run.`, {
            profile: view.key,
            server: route.server,
            retryable: false,
          });
        }
        return sessions.callTool({ key: view.key, server, route, args: checked, options });
      });
    },
  };
  return Object.freeze(turn);
}
