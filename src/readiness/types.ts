/**
 * Public shapes of the readiness layer: what `status()`, `ready()` and `beginTurn()` return.
 */
import type { CallToolResult, GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate, Tool, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { SerializedError } from '../errors.js';
import type { FailureKind, DiscoveryTimings } from '../discovery/types.js';

/** The state of a profile's readiness entry. */
export type ReadinessStatus = 'idle' | 'pending' | 'ready' | 'degraded' | 'failed';

/** One server as a readiness view shows it. */
export type ServerView =
  | { status: 'pending' }
  | { status: 'disabled' }
  | {
      status: 'ready';
      /** Tools a turn offers (after the server's tool filter). */
      tools: number;
      /** Tools the server lists that its tool filter hides (absent when none). */
      toolsHidden?: number;
      prompts: number;
      resources: number;
      resourceTemplates: number;
      timings: DiscoveryTimings;
      serverInfo?: { name: string; version: string };
      /**
       * The protocol version the server is spoken to in: `2025-11-25` (the `initialize` era) or
       * `2026-07-28` (the stateless era).
       */
      protocolVersion?: string;
      /** What the host should know although the server is ready (it asked for roots and got none…). */
      warnings?: string[];
    }
  | {
      /** The server demands authorization (401/403, or an OAuth flow waiting for the user). */
      status: 'auth_required';
      kind: 'auth';
      message: string;
      /** Where the user must go to authorise, while a code flow waits (complete it with `finishAuth`). */
      authorizationUrl?: string;
      httpStatus?: number;
      timings?: DiscoveryTimings;
      consecutiveFailures: number;
    }
  | {
      status: 'failed';
      kind: FailureKind;
      message: string;
      exitCode?: number | null;
      signal?: string | null;
      stderrTail?: string;
      timings?: DiscoveryTimings;
      /** How many discoveries in a row failed for this server. */
      consecutiveFailures: number;
      /** When the next background re-discovery of this server is due (ms since epoch). */
      retryAt?: number;
    };

/** A profile's readiness at one instant. Deeply frozen. */
export interface ReadinessView {
  /** Canonical profile key. */
  readonly key: string;
  /** The discovery generation this view belongs to (0 before the first). */
  readonly generation: number;
  readonly status: ReadinessStatus;
  readonly servers: Readonly<Record<string, ServerView>>;
  /** Servers still pending (only non-empty when `status` is pending or `waitTimedOut`). */
  readonly pending: readonly string[];
  /** Servers that failed, or need authorization (their status says which). */
  readonly failed: readonly string[];
  /** When this view's generation settled (ms since epoch). */
  readonly settledAt?: number;
  /** When the next background refresh of failed servers is due. */
  readonly refreshAt?: number;
  /** True only when the caller's own `maxWaitMs` ran out before the profile settled. */
  readonly waitTimedOut?: boolean;
  /** Why the profile itself could not be discovered (bad or unreadable config). */
  readonly error?: SerializedError;
}

/** One tool as a turn offers it to a model. Deeply frozen. */
export interface TurnTool {
  /** Model-facing name: `mcp__<server>__<tool>`, sanitised and unique within the turn. */
  readonly name: string;
  readonly server: string;
  /** The tool's own name on its server. */
  readonly tool: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Tool['inputSchema'];
  readonly outputSchema?: Tool['outputSchema'];
  readonly annotations?: ToolAnnotations;
}

/** One prompt as a turn offers it: the server's prompt and the server it comes from. Deeply frozen. */
export type TurnPrompt = Prompt & { readonly server: string };

/** One resource as a turn offers it. Deeply frozen. */
export type TurnResource = Resource & { readonly server: string };

/** One resource template as a turn offers it. Deeply frozen. */
export type TurnResourceTemplate = ResourceTemplate & { readonly server: string };

/** Options of a resource read or a prompt fetch (supervised like a tool call). */
export interface RequestOptions {
  signal?: AbortSignal;
  /** Overrides the server's `callTimeoutMs`. */
  timeoutMs?: number;
}

/** Options of a tool call. */
export interface CallOptions {
  /** Cancels the call (the server is sent `notifications/cancelled`). */
  signal?: AbortSignal;
  /** Overrides the server's `callTimeoutMs`. */
  timeoutMs?: number;
  /** Resolve to a `CallToolResult` with `isError: true` instead of throwing McpSupervisorError. */
  errorsAsResults?: boolean;
  /** Progress notifications from the server. */
  onProgress?: (progress: { progress: number; total?: number; message?: string }) => void;
}

/** A frozen snapshot of a profile's tools for one chat turn. */
export interface Turn {
  readonly key: string;
  readonly generation: number;
  readonly status: ReadinessStatus;
  readonly tools: readonly TurnTool[];
  /** Servers that had not settled when the turn was taken (only after the caller's `maxWaitMs`). */
  readonly pending: readonly string[];
  /** Servers whose tools are missing from this turn, and why. */
  readonly failed: readonly { readonly server: string; readonly kind: FailureKind | 'parked'; readonly message: string }[];
  readonly waitTimedOut: boolean;
  /** Why the profile itself failed (UNKNOWN_PROFILE, INVALID_CONFIG), as its view says; absent otherwise. */
  readonly error?: SerializedError;
  /** Prompts of the ready servers, each naming its server. */
  readonly prompts: readonly TurnPrompt[];
  /** Resources of the ready servers, each naming its server. */
  readonly resources: readonly TurnResource[];
  /** Resource templates of the ready servers, each naming its server. */
  readonly resourceTemplates: readonly TurnResourceTemplate[];
  /** Calls a tool of this turn by its model-facing name. */
  callTool(name: string, args?: Record<string, unknown>, options?: CallOptions): Promise<CallToolResult>;
  /** Reads a resource of a server of this turn (supervised; read-only, so replayed once after a death). */
  readResource(server: string, uri: string, options?: RequestOptions): Promise<ReadResourceResult>;
  /** Fetches a prompt of a server of this turn (supervised; read-only). */
  getPrompt(server: string, name: string, args?: Record<string, string>, options?: RequestOptions): Promise<GetPromptResult>;
}

/** Options of `ready()` and `beginTurn()`. */
export interface WaitOptions {
  /** The most this caller will wait for a pending profile; then it gets a view naming the pending servers. */
  maxWaitMs?: number;
  signal?: AbortSignal;
}
