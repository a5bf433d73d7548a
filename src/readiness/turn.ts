/**
 * The frozen {@link Turn} handed to a chat turn: the tools of one settlement (or of the servers
 * ready when the caller's `maxWaitMs` ran out), the pending and failed servers, and a `callTool`
 * bound to that snapshot. Nothing discovered later changes a turn already returned.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ProfileConfig } from '../config/types.js';
import { McpSupervisorError, isMcpSupervisorError } from '../errors.js';
import type { SessionLayer } from './driver.js';
import type { TurnCatalog } from './settlement.js';
import { checkArguments } from './arguments.js';
import type { CallOptions, ReadinessView, Turn } from './types.js';

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
