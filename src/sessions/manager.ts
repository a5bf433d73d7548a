/**
 * The session layer: one {@link ServerSupervisor} per (profile key, server), or one per server
 * fingerprint shared by every profile whose server opts into `share: true`. It routes calls,
 * tells readiness which servers are parked (their tools leave new turns), adopts the HTTP
 * sessions discovery created, and shuts sessions down on reload and close.
 */
import type { CallToolResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import PQueue from 'p-queue';
import type { ProfileConfig, ServerConfig } from '../config/types.js';
import { serverFingerprint } from '../config/fingerprint.js';
import { type Clock, sleepOn } from '../clock.js';
import { McpSupervisorError, describeError } from '../errors.js';
import type { ServerOutcome } from '../discovery/types.js';
import type { EventSink } from '../events.js';
import type { ReadRequest, SessionLayer, ToolCallRequest } from '../readiness/driver.js';
import type { EraCache } from '../connection/era-cache.js';
import type { ClientSide } from '../connection/client-side.js';
import { ServerSupervisor } from './supervisor.js';
import type { CatalogLists, SessionOptions, SupervisorEvents, SupervisorStats } from './types.js';

interface Slot {
  supervisor: ServerSupervisor;
  fingerprint: string;
  /** Profiles using it (one unless shared). */
  keys: Set<string>;
}

/** The client side sessions connect as, per (profile, server). */
export interface SessionSides {
  sideFor(key: string, server: ServerConfig): ClientSide;
  /** The authorization URL of a pending OAuth code flow, for AUTH_REQUIRED errors. */
  pendingAuthorization(key: string, server: ServerConfig): string | undefined;
  /**
   * True when sides differ per profile (handlers that receive the profile, OAuth per profile):
   * a session is then never shared across profiles, whatever `share` says.
   */
  readonly perProfile: boolean;
}

/** Where `list_changed` refreshes go (readiness, for the next turn). */
export type ListsChangedSink = (key: string, server: string, lists: CatalogLists) => void;

/**
 * The longest a warm-up waits for discovery to go quiet (ms). Spawning a server is synchronous
 * work on the host's thread (a fork of a large process): done while other profiles are still being
 * discovered, it stalls the loop exactly when the host is busiest. A host that discovers without
 * pause still gets its warm sessions after this long.
 */
const WARM_DEFER_MAX_MS = 5000;

/** Supervisors of every profile's servers. */
export class SessionManager implements SessionLayer {
  private readonly slots = new Map<string, Slot>();
  /** Warm-ups after discovery, a bounded number at a time. */
  private readonly warming: PQueue;
  /** Each profile's warm-ups not finished yet (what {@link warmed} waits for). */
  private readonly warmups = new Map<string, Set<Promise<void>>>();
  /** Profiles someone waits for (`ready()`): their warm-ups do not wait for quiet. */
  private readonly urgent = new Map<string, { promise: Promise<void>; resolve(): void }>();
  private version = 0;
  private closed = false;
  /** Resolves when no discovery runs, undefined when none runs now (set by the host; absent: warm-ups never wait). */
  discoveryQuiet: (() => Promise<void> | undefined) | undefined;
  /** The host's era verdicts, shared with discovery (set by the host; absent: every session negotiates). */
  eras: EraCache | undefined;

  constructor(
    private readonly options: SessionOptions,
    private readonly clock: Clock,
    private readonly events: EventSink<SupervisorEvents>,
    private readonly listsChanged: ListsChangedSink,
    private readonly sides: SessionSides,
    private readonly random: () => number = Math.random,
  ) {
    this.warming = new PQueue({ concurrency: options.warmConcurrency ?? 4 });
  }

  private slotId(key: string, server: ServerConfig, fingerprint: string): string {
    return server.share && !this.sides.perProfile ? `shared\0${fingerprint}\0${server.name}` : `${key}\0${server.name}`;
  }

  /** The supervisor for a profile's server, created on first use. */
  supervisorFor(key: string, server: ServerConfig): ServerSupervisor {
    if (this.closed) throw new McpSupervisorError('HOST_CLOSED', 'the host is closed', { profile: key, server: server.name });
    const fingerprint = serverFingerprint(server);
    const id = this.slotId(key, server, fingerprint);
    let slot = this.slots.get(id);
    if (slot && slot.fingerprint !== fingerprint) {
      // The config changed under the same name without a reload: never reuse a stale session.
      const stale = slot;
      this.slots.delete(id);
      void stale.supervisor.close('reload');
      slot = undefined;
    }
    if (!slot) {
      const keys = new Set<string>();
      const created: Slot = {
        fingerprint,
        keys,
        supervisor: new ServerSupervisor(server, {
          clock: this.clock,
          options: this.options,
          random: this.random,
          profiles: () => [...keys],
          emit: (event, payload) => this.events.emit(event, payload),
          exclusionChanged: () => {
            this.version++;
          },
          listsChanged: (lists) => {
            for (const profile of keys) this.listsChanged(profile, server.name, lists);
          },
          // A shared slot only exists when sides are the same for every profile.
          side: () => this.sides.sideFor(key, server),
          pendingAuthorization: () => this.sides.pendingAuthorization(key, server),
          eras: this.eras,
        }),
      };
      slot = created;
      this.slots.set(id, slot);
    }
    slot.keys.add(key);
    return slot.supervisor;
  }

  private find(key: string, server: string): ServerSupervisor | undefined {
    const own = this.slots.get(`${key}\0${server}`);
    if (own) return own.supervisor;
    for (const [id, slot] of this.slots) {
      if (id.startsWith('shared\0') && id.endsWith(`\0${server}`) && slot.keys.has(key)) return slot.supervisor;
    }
    return undefined;
  }

  /** Routes a call to its supervisor. */
  callTool(request: ToolCallRequest): Promise<CallToolResult> {
    return this.supervisorFor(request.key, request.server).call(request.route, request.args, request.options, request.key);
  }

  /** Routes a resource read or prompt fetch to its supervisor. */
  read(request: ReadRequest): Promise<ReadResourceResult | GetPromptResult> {
    const supervisor = this.supervisorFor(request.key, request.server);
    return request.kind === 'resource' ? supervisor.readResource(request.uri, request.options, request.key) : supervisor.getPrompt(request.name, request.args, request.options, request.key);
  }

  /**
   * Tells the live sessions of a profile that its roots changed (`notifications/roots/list_changed`);
   * servers then ask `roots/list` again. Resolves to how many were told.
   */
  async rootsChanged(key: string): Promise<number> {
    const told = await Promise.all([...this.slots.values()].filter((slot) => slot.keys.has(key)).map((slot) => slot.supervisor.notifyRootsChanged()));
    return told.filter(Boolean).length;
  }

  /** Parked servers leave new turns. */
  isExcluded(key: string, server: string): boolean {
    return this.find(key, server)?.parked ?? false;
  }

  /** Changes whenever a server is parked or revived. */
  exclusionVersion(): number {
    return this.version;
  }

  /**
   * After discovery: adopt resumable HTTP sessions, and warm up a session for every ready server
   * (unless `eager` is off), a bounded number at a time across the host.
   */
  published(key: string, config: ProfileConfig, outcomes: ReadonlyMap<string, ServerOutcome>): void {
    if (this.closed) return;
    for (const outcome of outcomes.values()) {
      if (outcome.status !== 'ready') continue;
      const server = Object.hasOwn(config.servers, outcome.server) ? config.servers[outcome.server] : undefined;
      if (!server) continue;
      const needed = outcome.session !== undefined || this.options.eager;
      if (!needed) continue;
      const supervisor = this.supervisorFor(key, server);
      if (outcome.session) supervisor.offerResumable(outcome.session);
      if (this.options.eager) this.warm(key, supervisor);
    }
  }

  /** Warms one session up once discovery is quiet (or someone waits for the profile). */
  private warm(key: string, supervisor: ServerSupervisor): void {
    let set = this.warmups.get(key);
    if (!set) {
      set = new Set();
      this.warmups.set(key, set);
    }
    const pending = set;
    const task = (async () => {
      await this.warmAllowed(key);
      if (!this.closed) await this.warming.add(() => supervisor.warmUp());
    })().catch(() => undefined);
    pending.add(task);
    void task.finally(() => {
      pending.delete(task);
      if (pending.size === 0 && this.warmups.get(key) === pending) {
        this.warmups.delete(key);
        this.urgent.delete(key);
      }
    });
  }

  private async warmAllowed(key: string): Promise<void> {
    const quiet = this.discoveryQuiet?.();
    if (!quiet) return;
    const waited = new AbortController();
    try {
      await Promise.race([quiet, this.urgencyOf(key).promise, sleepOn(this.clock, WARM_DEFER_MAX_MS, waited.signal).catch(() => undefined)]);
    } finally {
      waited.abort();
    }
  }

  private urgencyOf(key: string): { promise: Promise<void>; resolve(): void } {
    let urgency = this.urgent.get(key);
    if (!urgency) {
      let resolve!: () => void;
      const promise = new Promise<void>((settle) => (resolve = settle));
      urgency = { promise, resolve };
      this.urgent.set(key, urgency);
    }
    return urgency;
  }

  /**
   * Resolves once the profile's warm-ups (if any) have settled, connected or not; they stop
   * waiting for discovery to go quiet from now on. What `host.ready()` waits for.
   */
  async warmed(key: string): Promise<void> {
    const pending = this.warmups.get(key);
    if (!pending || pending.size === 0) return;
    this.urgencyOf(key).resolve();
    await Promise.all([...pending]);
  }

  /** Signals every parked server of a profile to revive now (retry). */
  revive(key: string): void {
    for (const slot of this.slots.values()) {
      if (slot.keys.has(key) && slot.supervisor.parked) slot.supervisor.requestConnect('signal');
    }
  }

  /**
   * Ends the sessions a profile uses (shared ones only when no other profile uses them). Every
   * supervisor is closed even if one throws; the first error is rethrown afterwards.
   */
  async shutdownProfile(key: string, reason: string): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const [id, slot] of this.slots) {
      if (!slot.keys.delete(key)) continue;
      if (slot.keys.size > 0) continue;
      this.slots.delete(id);
      closing.push(slot.supervisor.close('reload'));
    }
    const results = await Promise.allSettled(closing);
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw new McpSupervisorError('RELOAD_ABORTED', `closing sessions of "${key}" (${reason}) failed: ${describeError(failed.reason)}`, { profile: key });
  }

  /** Stats of every supervisor. */
  stats(): SupervisorStats[] {
    return [...this.slots.values()].map((slot) => slot.supervisor.stats());
  }

  /** Closes every supervisor (process groups included). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.warming.clear();
    const all = [...this.slots.values()];
    this.slots.clear();
    await Promise.allSettled(all.map((slot) => slot.supervisor.close()));
  }
}
