/**
 * `createHost`: the public entry point. Validates every option and listed profile up front (a bad
 * config throws INVALID_CONFIG and nothing is created), then wires the parts: the canonical
 * profile key on every path, the readiness registry, discovery bodies in the piscina pool, and the
 * session layer for tool calls.
 *
 * The pieces live in `./host/`: `types.ts` (the public types, re-exported here), `options.ts`
 * (option resolution), `profiles.ts` (profile loading), `facade.ts` (the `Host` methods).
 */
import { type Clock, systemClock } from './clock.js';
import { AuthRegistry } from './client/auth.js';
import { LogGate } from './client/logs.js';
import { ClientSides } from './client/sides.js';
import { EraCache } from './connection/era-cache.js';
import { DiscoveryCoordinator } from './discovery/coordinator.js';
import { SharedDiscovery, discoveryShareKey } from './discovery/shared.js';
import { TypedEmitter } from './events.js';
import { Lifeline } from './process/lifeline.js';
import type { DiscoveryDriver } from './readiness/driver.js';
import { ReadinessRegistry } from './readiness/registry.js';
import { SessionManager } from './sessions/manager.js';
import { type HostParts, hostFacade } from './host/facade.js';
import { type ResolvedHostOptions, resolveHostOptions } from './host/options.js';
import { ProfileSource, parseListedProfiles, profileKeyOptions, serverNamed } from './host/profiles.js';
import type { Host, HostEvents, HostOptions } from './host/types.js';

export type { ClientEvents, Host, HostDiscoveryOptions, HostEvents, HostLimits, HostOptions, HostSessionOptions, HostStats } from './host/types.js';

/**
 * Creates a host. Validates options and listed profiles synchronously.
 * @throws McpSupervisorError `INVALID_CONFIG` naming the option, or the profile, server and field
 */
export function createHost(options: HostOptions = {}): Host {
  const env = options.env ?? process.env;
  const keyOptions = profileKeyOptions(options);
  // Listed profiles first, then options: which error a host sees first is part of the contract.
  const listed = parseListedProfiles(options.profiles ?? {}, keyOptions, env);
  // Every option is validated before anything is started (a bad option must leave nothing behind).
  const resolved = resolveHostOptions(options);
  const profiles = new ProfileSource(listed, {
    env,
    keyOptions,
    profileRoots: resolved.profileRoots,
    ...(options.loadProfile === undefined ? {} : { loadProfile: options.loadProfile }),
  });
  return hostFacade(wire(options, resolved, profiles, options.clock ?? systemClock));
}

/** Builds and connects the parts of a host from its resolved options. */
function wire(options: HostOptions, resolved: ResolvedHostOptions, profiles: ProfileSource, clock: Clock): HostParts {
  // Mirrored on the `mcp-supervisor:event` diagnostics channel for subscribers (zero cost without).
  const events = new TypedEmitter<HostEvents>(undefined, true);
  const auth = new AuthRegistry(resolved.authFactory, (payload) => events.emit('server:auth-required', payload));
  const logs = new LogGate((event) => events.emit('server:log', event));
  const sides = new ClientSides(resolved.client, auth, logs);
  // Started before anything is spawned: every server carries its marker from its first instant.
  const lifeline = Lifeline.start();
  const { maxMessageBytes, maxCatalogItems, maxSchemaDepth } = resolved.limits;
  // One cache of era verdicts: discovery probes a server once, sessions and later runs adopt it.
  const eras = new EraCache(resolved.protocolCache);
  const shared = options.discoveryDriver ? undefined : sharedDiscovery(resolved, sides, lifeline, clock, eras);
  const driver: DiscoveryDriver = options.discoveryDriver ?? shared!;

  // The registry needs the session layer and the session layer reports tool-list changes to the
  // registry: the late-bound reference below breaks that cycle.
  let registry: ReadinessRegistry | undefined;
  const sessions = new SessionManager(
    { ...resolved.sessions, maxMessageBytes, maxCatalogItems, maxSchemaDepth, markerEnv: lifeline.env },
    clock,
    events,
    (key, server, lists) => registry?.replaceServerLists(key, server, lists),
    sides,
    options.random,
  );
  // Warm sessions spawn once discovery is quiet: a spawn is synchronous work on this thread.
  if (shared) sessions.discoveryQuiet = () => shared.whenQuiet();
  sessions.eras = eras;
  registry = new ReadinessRegistry(driver, sessions, profiles.load, clock, resolved.readiness, events, {
    authorizationUrl: (key, name) => {
      const server = serverNamed(registry?.configOf(key), name);
      return server ? sides.pendingAuthorization(key, server) : undefined;
    },
    warnings: (key, name) => sides.warnings(key, name),
  });
  return { profiles, readiness: registry, sessions, driver, auth, logs, events, lifeline, clock, eras };
}

/** The real discovery: bodies in the pool, shared across profiles whose servers are the same. */
function sharedDiscovery(resolved: ResolvedHostOptions, sides: ClientSides, lifeline: Lifeline, clock: Clock, eras: EraCache): SharedDiscovery {
  const { maxMessageBytes, maxCatalogItems, maxSchemaDepth } = resolved.limits;
  const coordinator = new DiscoveryCoordinator(resolved.discovery, sides, { maxMessageBytes, maxCatalogItems, maxSchemaDepth }, lifeline.env, clock, eras);
  return new SharedDiscovery(coordinator, { shareKey: (_key, server) => discoveryShareKey(server, sides), reuseForMs: resolved.shareForMs, clock });
}
