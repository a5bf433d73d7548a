/**
 * The {@link Host} object over the wired parts: every method turns a profile reference into its
 * canonical key and delegates to readiness or the session layer. Methods are closures (not class
 * methods) so a host's methods may be passed around unbound, as they always could.
 */
import type { EraCache } from '../connection/era-cache.js';
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import type { Clock } from '../clock.js';
import { withDeadline } from '../deadline.js';
import type { AuthRegistry } from '../client/auth.js';
import type { LogGate } from '../client/logs.js';
import { scrubDeep } from '../config/redact.js';
import { toolAllowed } from '../config/tool-filter.js';
import { McpSupervisorError } from '../errors.js';
import type { TypedEmitter } from '../events.js';
import type { Lifeline } from '../process/lifeline.js';
import { checkArguments } from '../readiness/arguments.js';
import type { DiscoveryDriver } from '../readiness/driver.js';
import type { ReadinessRegistry, ReloadResult } from '../readiness/registry.js';
import { serverToolKey } from '../readiness/settlement.js';
import { checkPrompt, checkUri, createTurn, readFrom, withErrorsAsResults } from '../readiness/turn.js';
import type { ReadinessView, Turn, WaitOptions } from '../readiness/types.js';
import type { SessionManager } from '../sessions/manager.js';
import { outputValidationStats } from '../sessions/output-validation.js';
import { type ProfileSource, serverNamed } from './profiles.js';
import type { Host, HostEvents, HostStats } from './types.js';

/** The parts a host is made of, wired by `createHost`. */
export interface HostParts {
  profiles: ProfileSource;
  readiness: ReadinessRegistry;
  sessions: SessionManager;
  driver: DiscoveryDriver;
  auth: AuthRegistry;
  logs: LogGate;
  events: TypedEmitter<HostEvents>;
  lifeline: Lifeline;
  clock: Clock;
  eras: EraCache;
}

/** The host over its parts. */
export function hostFacade(parts: HostParts): Host {
  return { ...readinessMethods(parts), ...requestMethods(parts), ...controlMethods(parts), ...lifecycleMethods(parts) };
}

function unknownServer(key: string, server: string): McpSupervisorError {
  return new McpSupervisorError('UNKNOWN_SERVER', `The MCP server "${server}" is not configured in profile "${key}".`, { profile: key, server, retryable: false });
}

function unknownTool(key: string, server: string, tool: string): McpSupervisorError {
  return new McpSupervisorError('UNKNOWN_TOOL', `The MCP server "${server}" has no tool "${tool}".`, { profile: key, server, retryable: false });
}

/**
 * Waits for a profile (bounded only by the caller's signal). A profile that failed to load
 * (unknown, unreadable, invalid) answers every request with its own error, not with "no such
 * server": the host learns what is actually wrong.
 */
async function usableProfile(readiness: ReadinessRegistry, key: string, signal: AbortSignal | undefined): ReturnType<ReadinessRegistry['wait']> {
  const settled = await readiness.wait(key, signal ? { signal } : {});
  if (settled.view.error) throw McpSupervisorError.fromJSON(settled.view.error);
  return settled;
}

function readinessMethods({ profiles, readiness, sessions, clock }: HostParts): Pick<Host, 'start' | 'status' | 'ready' | 'beginTurn'> {
  return {
    start(): void {
      for (const key of profiles.listedKeys()) readiness.kick(key);
    },
    status(ref?: string): ReadinessView {
      return readiness.status(profiles.keyOf(ref));
    },
    async ready(ref?: string, waitOptions: WaitOptions = {}): Promise<ReadinessView> {
      const key = profiles.keyOf(ref);
      const started = performance.now();
      const { view } = await readiness.wait(key, waitOptions);
      // Ready means callable: with warm sessions, wait (within the caller's bounds) until the
      // profile's sessions are up, so the first call costs what a call costs.
      const left = waitOptions.maxWaitMs === undefined ? undefined : Math.max(0, waitOptions.maxWaitMs - (performance.now() - started));
      await withDeadline(sessions.warmed(key), { ms: left, clock, signal: waitOptions.signal }).catch(() => undefined);
      return view;
    },
    async beginTurn(ref?: string, waitOptions: WaitOptions = {}): Promise<Turn> {
      const key = profiles.keyOf(ref);
      const { view, catalog } = await readiness.wait(key, waitOptions);
      return createTurn(view, catalog, () => readiness.configOf(key), sessions);
    },
  };
}

function requestMethods({ profiles, readiness, sessions }: HostParts): Pick<Host, 'callTool' | 'readResource' | 'getPrompt'> {
  return {
    callTool(ref, serverName, tool, args = {}, callOptions = {}): Promise<CallToolResult> {
      return withErrorsAsResults(callOptions, async () => {
        const key = profiles.keyOf(ref);
        const checked = checkArguments(args, { profile: key, server: String(serverName), tool: String(tool) });
        const { view, catalog } = await usableProfile(readiness, key, callOptions.signal);
        const server = serverNamed(readiness.configOf(key), serverName);
        if (!server || server.disabled) throw unknownServer(key, serverName);
        // The server's tool filter is a security control: a hidden tool is refused whatever state
        // the server is in, before anything is sent.
        if (!toolAllowed(server.toolFilter, String(tool))) throw unknownTool(key, serverName, tool);
        const route = catalog.byServerTool.get(serverToolKey(serverName, tool));
        // A parked server's tools leave the catalog, but the server is still there: its supervisor
        // says it is parked and when it is probed next (never "no such tool").
        const parked = sessions.isExcluded(key, serverName);
        if (!route && !parked && Object.hasOwn(view.servers, serverName) && view.servers[serverName]?.status === 'ready') throw unknownTool(key, serverName, tool);
        return sessions.callTool({ key, server, route: route ?? { server: serverName, tool }, args: checked, options: callOptions });
      });
    },
    async readResource(ref, serverName, uri, requestOptions = {}): Promise<ReadResourceResult> {
      const key = profiles.keyOf(ref);
      const checked = checkUri(uri, key, String(serverName));
      await usableProfile(readiness, key, requestOptions.signal);
      return (await readFrom(key, readiness.configOf(key), sessions, serverName, { kind: 'resource', uri: checked, options: requestOptions })) as ReadResourceResult;
    },
    async getPrompt(ref, serverName, name, args, requestOptions = {}): Promise<GetPromptResult> {
      const key = profiles.keyOf(ref);
      const checked = checkPrompt(name, args, key, String(serverName));
      await usableProfile(readiness, key, requestOptions.signal);
      return (await readFrom(key, readiness.configOf(key), sessions, serverName, { kind: 'prompt', ...checked, options: requestOptions })) as GetPromptResult;
    },
  };
}

function controlMethods(parts: HostParts): Pick<Host, 'rootsChanged' | 'retry' | 'finishAuth' | 'reload'> {
  const { profiles, readiness, sessions } = parts;
  return {
    rootsChanged(ref?: string): Promise<number> {
      return sessions.rootsChanged(profiles.keyOf(ref));
    },
    retry(ref?: string, waitOptions: WaitOptions = {}): Promise<ReadinessView> {
      return readiness.retry(profiles.keyOf(ref), waitOptions);
    },
    finishAuth: (ref, serverName, authorizationCode, waitOptions = {}) => finishAuth(parts, ref, serverName, authorizationCode, waitOptions),
    async reload(ref?: string, reloadOptions: { profiles?: Record<string, unknown> } = {}): Promise<ReloadResult> {
      // Parsed before anything changes: a bad replacement throws and leaves everything as it was.
      const replaced = reloadOptions.profiles ? profiles.parse(reloadOptions.profiles) : undefined;
      const keys = ref === undefined ? [...new Set([...readiness.keys(), ...profiles.listedKeys(), ...(replaced?.keys() ?? [])])] : [profiles.keyOf(ref)];
      return profiles.reloadWith(replaced, () => readiness.reload(keys));
    },
  };
}

/** See {@link Host.finishAuth}. */
async function finishAuth({ profiles, readiness, sessions, auth }: HostParts, ref: string | undefined, serverName: string, authorization: string | URLSearchParams, waitOptions: WaitOptions): Promise<ReadinessView> {
  const key = profiles.keyOf(ref);
  const callback = authorization instanceof URLSearchParams ? authorization : undefined;
  const authorizationCode = callback ? callback.get('code') : authorization;
  if (typeof authorizationCode !== 'string' || authorizationCode === '') {
    throw new McpSupervisorError('INVALID_ARGUMENTS', callback ? 'Expected the redirect parameters to carry a `code`' : 'Expected `authorizationCode` to be a non-empty string', {
      profile: key,
      server: String(serverName),
      retryable: false,
    });
  }
  const iss = callback?.get('iss') ?? undefined;
  await usableProfile(readiness, key, waitOptions.signal);
  const server = serverNamed(readiness.configOf(key), serverName);
  if (!server) throw unknownServer(key, serverName);
  if (server.transport === 'stdio') {
    throw new McpSupervisorError('INVALID_ARGUMENTS', `The MCP server "${serverName}" is a stdio server; OAuth applies to HTTP servers only.`, { profile: key, server: serverName, retryable: false });
  }
  await auth.finish(key, server, authorizationCode, iss);
  sessions.revive(key);
  return readiness.rediscover(key, [serverName], 'authorization finished', waitOptions);
}

function lifecycleMethods({ profiles, readiness, sessions, driver, auth, logs, events, lifeline, eras }: HostParts): Pick<Host, 'stats' | 'on' | 'profileKey' | 'close'> {
  let closing: Promise<void> | undefined;
  return {
    stats(): HostStats {
      return scrubDeep({
        profiles: readiness.keys().length,
        discovery: driver.stats(),
        sessions: sessions.stats(),
        outputSchemas: outputValidationStats(),
        logsDropped: logs.dropped,
        protocolEras: eras.stats(),
      });
    },
    on(event, listener) {
      return events.on(event, listener);
    },
    profileKey(ref?: string): string {
      return profiles.keyOf(ref);
    },
    close(): Promise<void> {
      // One promise for every caller: a second close() resolves when the first one is done, not
      // before. A ref'd timer keeps the event loop alive meanwhile (every wait inside is unref'd
      // so nothing else would), so `await host.close(); console.log(…)` always prints.
      closing ??= (async () => {
        const keepAlive = setInterval(() => undefined, 1 << 30);
        try {
          auth.close();
          await readiness.close();
          // Last: anything still carrying the marker now is a leftover the reaper takes down.
          await lifeline.close();
        } finally {
          clearInterval(keepAlive);
        }
      })();
      return closing;
    },
  };
}
