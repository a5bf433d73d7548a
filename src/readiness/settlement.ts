/**
 * Pure construction of what readiness hands out: the frozen {@link ReadinessView} of a profile and
 * the frozen list of {@link TurnTool}s a turn offers. Computed once per settlement (not per turn),
 * so `beginTurn` on a ready profile only wraps an already-frozen array.
 *
 * Views are an exit of the library (`status()`, `ready()`, `turn.failed`, the doctor): failure
 * messages, stderr tails and the view's error go through the scrubber of `config/redact.ts` here,
 * on the main thread, whatever a discovery worker or a server wrote into them.
 */
import { deepFreeze } from '../freeze.js';
import { scrubDeep, scrubTail, scrubText } from '../config/redact.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ProfileConfig } from '../config/types.js';
import type { SerializedError } from '../errors.js';
import type { ServerOutcome } from '../discovery/types.js';
import { assignToolNames } from './tool-names.js';
import type { ReadinessStatus, ReadinessView, ServerView, TurnPrompt, TurnResource, TurnResourceTemplate, TurnTool } from './types.js';
import { toolAllowed } from '../config/tool-filter.js';
import type { ServerConfig } from '../config/types.js';

/** Failure bookkeeping of one server across generations. */
export interface FailureRecord {
  /** Consecutive failed discoveries. */
  streak: number;
  /** When a re-discovery is due. */
  retryAt: number;
}

/** Where a model-facing tool name leads. */
export interface ToolRoute {
  readonly server: string;
  readonly tool: string;
  readonly annotations?: Tool['annotations'];
  /** The tool's input schema: in the 2026-07-28 era its `x-mcp-header` parameters are mirrored into HTTP headers. */
  readonly inputSchema?: Tool['inputSchema'];
  /** The tool's declared output schema: structured results are checked against it. */
  readonly outputSchema?: Tool['outputSchema'];
}

/** Everything a turn needs, frozen once per settlement. */
export interface TurnCatalog {
  readonly tools: readonly TurnTool[];
  readonly prompts: readonly TurnPrompt[];
  readonly resources: readonly TurnResource[];
  readonly resourceTemplates: readonly TurnResourceTemplate[];
  /** By model-facing name. */
  readonly routes: ReadonlyMap<string, ToolRoute>;
  /** By `server\0tool`, for calls made without a turn. */
  readonly byServerTool: ReadonlyMap<string, ToolRoute>;
}

/** The key of {@link TurnCatalog.byServerTool}. */
export function serverToolKey(server: string, tool: string): string {
  return `${server}\0${tool}`;
}

export { deepFreeze };

/** The servers of a profile that discovery should look at. */
export function enabledServers(config: ProfileConfig | undefined): string[] {
  if (!config) return [];
  return Object.values(config.servers)
    .filter((server) => !server.disabled)
    .map((server) => server.name);
}

/** Overall status from per-server outcomes. An empty profile is ready (it simply has no tools). */
export function statusOf(config: ProfileConfig | undefined, outcomes: ReadonlyMap<string, ServerOutcome>, error?: SerializedError): ReadinessStatus {
  if (error) return 'failed';
  let ready = 0;
  let failed = 0;
  let pending = 0;
  for (const name of enabledServers(config)) {
    const status = outcomes.get(name)?.status ?? 'pending';
    if (status === 'ready') ready++;
    else if (status === 'failed') failed++;
    else if (status === 'pending') pending++;
  }
  if (pending > 0) return 'pending';
  if (failed === 0) return 'ready';
  return ready === 0 ? 'failed' : 'degraded';
}

function serverView(server: ServerConfig, outcome: ServerOutcome | undefined, failure: FailureRecord | undefined, authorizationUrl: string | undefined, warnings: readonly string[]): ServerView {
  if (!outcome || outcome.status === 'pending') return { status: 'pending' };
  if (outcome.status === 'disabled') return { status: 'disabled' };
  if (outcome.status === 'ready') {
    const visible = outcome.tools.filter((tool) => toolAllowed(server.toolFilter, tool.name)).length;
    const view: ServerView = {
      status: 'ready',
      tools: visible,
      prompts: outcome.prompts.length,
      resources: outcome.resources.length,
      resourceTemplates: outcome.resourceTemplates?.length ?? 0,
      timings: outcome.timings,
    };
    if (visible < outcome.tools.length) view.toolsHidden = outcome.tools.length - visible;
    if (warnings.length > 0) view.warnings = warnings.map((warning) => scrubText(warning));
    if (outcome.serverInfo) view.serverInfo = outcome.serverInfo;
    if (outcome.protocolVersion) view.protocolVersion = outcome.protocolVersion;
    return view;
  }
  if (outcome.failure.kind === 'auth') {
    // Not failed: waiting for authorization. No background retry (it would restart the code flow).
    const view: ServerView = { status: 'auth_required', kind: 'auth', message: scrubText(outcome.failure.message), timings: outcome.timings, consecutiveFailures: failure?.streak ?? 1 };
    if (authorizationUrl !== undefined) view.authorizationUrl = authorizationUrl;
    if (outcome.failure.httpStatus !== undefined) view.httpStatus = outcome.failure.httpStatus;
    return view;
  }
  const view: ServerView = {
    status: 'failed',
    kind: outcome.failure.kind,
    message: scrubText(outcome.failure.message),
    timings: outcome.timings,
    consecutiveFailures: failure?.streak ?? 1,
  };
  if (outcome.failure.exitCode !== undefined) view.exitCode = outcome.failure.exitCode;
  if (outcome.failure.signal !== undefined) view.signal = outcome.failure.signal;
  if (outcome.failure.stderrTail !== undefined) view.stderrTail = scrubTail(outcome.failure.stderrTail);
  if (failure) view.retryAt = failure.retryAt;
  return view;
}

/** Inputs of {@link buildView}. */
export interface ViewInput {
  key: string;
  generation: number;
  config: ProfileConfig | undefined;
  outcomes: ReadonlyMap<string, ServerOutcome>;
  failures: ReadonlyMap<string, FailureRecord>;
  settledAt?: number;
  refreshAt?: number;
  waitTimedOut?: boolean;
  error?: SerializedError;
  /** Overrides the computed status (a not-yet-loaded profile is `pending` or `idle`). */
  status?: ReadinessStatus;
  /** The pending authorization URL of a server, if any. */
  authorizationUrl?: (server: string) => string | undefined;
  /** Warnings about a ready server (it asked for roots and got none…). */
  warnings?: (server: string) => string[];
}

/** A deeply frozen view of a profile. */
export function buildView(input: ViewInput): ReadinessView {
  const servers: Record<string, ServerView> = {};
  const pending: string[] = [];
  const failed: string[] = [];
  for (const server of Object.values(input.config?.servers ?? {})) {
    const outcome = server.disabled ? ({ status: 'disabled', server: server.name } as const) : input.outcomes.get(server.name);
    const authorizationUrl = outcome?.status === 'failed' && outcome.failure.kind === 'auth' ? input.authorizationUrl?.(server.name) : undefined;
    const view = serverView(server, outcome, input.failures.get(server.name), authorizationUrl, outcome?.status === 'ready' ? (input.warnings?.(server.name) ?? []) : []);
    servers[server.name] = view;
    if (view.status === 'pending') pending.push(server.name);
    if (view.status === 'failed' || view.status === 'auth_required') failed.push(server.name);
  }
  const view: {
    -readonly [K in keyof ReadinessView]: ReadinessView[K];
  } = {
    key: input.key,
    generation: input.generation,
    status: input.status ?? statusOf(input.config, input.outcomes, input.error),
    servers,
    pending,
    failed,
  };
  if (input.settledAt !== undefined) view.settledAt = input.settledAt;
  if (input.refreshAt !== undefined) view.refreshAt = input.refreshAt;
  if (input.waitTimedOut) view.waitTimedOut = true;
  if (input.error) view.error = scrubDeep(input.error);
  return deepFreeze(view);
}

/** The frozen tool catalog of the ready servers, in config order then tool order. */
export function buildCatalog(config: ProfileConfig | undefined, outcomes: ReadonlyMap<string, ServerOutcome>, exclude?: (server: string) => boolean): TurnCatalog {
  const entries: { server: string; tool: Tool }[] = [];
  const prompts: TurnPrompt[] = [];
  const resources: TurnResource[] = [];
  const resourceTemplates: TurnResourceTemplate[] = [];
  for (const name of enabledServers(config)) {
    const outcome = outcomes.get(name);
    if (outcome?.status !== 'ready' || exclude?.(name)) continue;
    const filter = config!.servers[name]!.toolFilter;
    for (const tool of outcome.tools) if (toolAllowed(filter, tool.name)) entries.push({ server: name, tool });
    for (const prompt of outcome.prompts) prompts.push({ ...prompt, server: name });
    for (const resource of outcome.resources) resources.push({ ...resource, server: name });
    for (const template of outcome.resourceTemplates ?? []) resourceTemplates.push({ ...template, server: name });
  }
  const names = assignToolNames(entries.map(({ server, tool }) => ({ server, tool: tool.name })));
  const routes = new Map<string, ToolRoute>();
  const byServerTool = new Map<string, ToolRoute>();
  const tools = entries.map(({ server, tool }, index) => {
    const name = names[index]!;
    const turnTool: TurnTool = {
      name,
      server,
      tool: tool.name,
      inputSchema: tool.inputSchema,
      ...(tool.title === undefined ? {} : { title: tool.title }),
      ...(tool.description === undefined ? {} : { description: tool.description }),
      ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
      ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
    };
    const route: ToolRoute = {
      server,
      tool: tool.name,
      inputSchema: tool.inputSchema,
      ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
      ...(tool.outputSchema === undefined ? {} : { outputSchema: tool.outputSchema }),
    };
    routes.set(name, route);
    byServerTool.set(serverToolKey(server, tool.name), route);
    return turnTool;
  });
  return { tools: deepFreeze(tools), prompts: deepFreeze(prompts), resources: deepFreeze(resources), resourceTemplates: deepFreeze(resourceTemplates), routes, byServerTool };
}
