/**
 * Profile readiness: one entry per canonical profile key, one discovery owner per entry at a time,
 * one shared settlement that every waiter of the entry awaits.
 *
 * Ownership rules (DESIGN §3–4):
 * - every owner transition of a key (start, retry, refresh) runs under the entry's own mutex and
 *   quiesces the previous body before starting the next, so the live-owner count never exceeds 1;
 * - a new owner is only created while the reload fence is open, checked with no await between the
 *   check and the (synchronous) start, so a reload's snapshot of owners is complete;
 * - turns on a settled entry never wait, not on discovery, not on the fence;
 * - waiters of a pending entry share one deferred that survives retries and reloads and is
 *   resolved by the next settlement — or by the readiness cap, which retires the generation and
 *   settles it at once, waking every waiter together.
 */
import { Mutex } from 'async-mutex';
import type { ProfileConfig, ServerConfig } from '../config/types.js';
import { serverFingerprint } from '../config/fingerprint.js';
import type { Clock, TimerHandle } from '../clock.js';
import { DEADLINE, withDeadline } from '../deadline.js';
import { McpSupervisorError, isMcpSupervisorError, describeError, type SerializedError } from '../errors.js';
import type { EventSink } from '../events.js';
import type { QuiesceReport } from '../discovery/coordinator.js';
import type { ServerOutcome, SettledOutcome } from '../discovery/types.js';
import type { DiscoveryDriver, SessionLayer } from './driver.js';
import type { CatalogLists } from '../sessions/supervisor.js';
import { type FailureRecord, type TurnCatalog, buildCatalog, buildView, deepFreeze, enabledServers, statusOf } from './settlement.js';
import type { ReadinessView, WaitOptions } from './types.js';

/** The reason of a profile's first discovery: the only one that may reuse another profile's recent result. */
const FIRST_USE = 'first use';

/** Timing policy of readiness. */
export interface ReadinessOptions {
  /** A generation that has not settled after this long is retired and settled as failed (ms). */
  readinessCapMs: number;
  /** First cooldown before a failed server is re-discovered in the background (ms). */
  retryCooldownMs: number;
  /** Cap of the doubling cooldown (ms). */
  maxRetryCooldownMs: number;
  /** Unknown or unloadable profile references remembered at once; the oldest is forgotten first. */
  maxUnknownProfiles?: number;
}

/** Events readiness emits (part of the host's event map). */
export interface ReadinessEvents {
  'discovery:start': { key: string; generation: number; servers: string[]; reason: string };
  'discovery:outcome': { key: string; generation: number; server: string; status: 'ready' | 'failed' | 'disabled'; kind?: string; tools?: number; ms: number };
  'discovery:settled': { key: string; generation: number; status: ReadinessView['status']; durationMs: number; failed: string[] };
  'discovery:retired': { key: string; generation: number | undefined; reason: string; quiesceMs: number; rung: QuiesceReport['rung']; quiesced: boolean };
  'reload:start': { keys: string[] };
  'tools:changed': { key: string; server: string; tools: number };
  'catalog:changed': { key: string; server: string; prompts: number; resources: number; resourceTemplates: number };
  'reload:done': { keys: string[]; changes: ProfileChanges[]; ok: boolean; error?: SerializedError };
}

/** What a reload changed in one profile. */
export interface ProfileChanges {
  key: string;
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
  /** The profile no longer exists. */
  profileRemoved?: boolean;
}

/** The result of `reload()`. */
export interface ReloadResult {
  changes: ProfileChanges[];
  /** Errors thrown while shutting sessions down; the entries were invalidated regardless. */
  teardownErrors: SerializedError[];
}

/** A settled snapshot of an entry: its view and its frozen tool catalog. */
interface Settlement {
  readonly generation: number;
  readonly view: ReadinessView;
  readonly outcomes: ReadonlyMap<string, ServerOutcome>;
  catalog: TurnCatalog;
  catalogVersion: number;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Waiters may all have given up (maxWaitMs); a close() rejection must not become unhandled.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

/** What views need from outside readiness. */
export interface ReadinessHooks {
  /** The pending OAuth authorization URL of a server, shown in its `auth_required` view. */
  authorizationUrl?(key: string, server: string): string | undefined;
  /** What a ready server's view should warn about (it asked for roots and got none…). */
  warnings?(key: string, server: string): string[];
}

/** Loads (or re-reads) a profile's config. */
export type ProfileLoader = (key: string, signal: AbortSignal) => Promise<ProfileConfig | undefined>;

/** One profile's readiness state. Mutated only by the registry. */
class Entry {
  config: ProfileConfig | undefined;
  configError: SerializedError | undefined;
  /** idle: nothing running; starting: an owner is being created; running: a body owns the key. */
  phase: 'idle' | 'starting' | 'running' = 'idle';
  /** The generation being discovered, or the last one. */
  generation = 0;
  generationStartedAt = 0;
  /** Servers the current generation discovers. */
  inflight = new Set<string>();
  /** Outcomes of the current or last generation (refreshes keep the ready ones). */
  outcomes = new Map<string, ServerOutcome>();
  failures = new Map<string, FailureRecord>();
  settled: Settlement | undefined;
  /** Resolved by the next settlement; shared by every waiter. */
  next: Deferred<Settlement> | undefined;
  readonly transition = new Mutex();
  capTimer: TimerHandle | undefined;
  refreshTimer: TimerHandle | undefined;
  /** Bumped on invalidation: a start prepared before it must not run. */
  version = 0;

  constructor(readonly key: string) {}
}

/** Readiness of every profile of a host. */
export class ReadinessRegistry {
  private readonly entries = new Map<string, Entry>();
  /** Keys whose profile is unknown or could not be loaded, oldest first (bounded). */
  private readonly unknown = new Set<string>();
  private readonly fence = new Mutex();
  private closed = false;
  private readonly background = new Set<Promise<unknown>>();

  constructor(
    private readonly driver: DiscoveryDriver,
    private readonly sessions: SessionLayer,
    private readonly loadConfig: ProfileLoader,
    private readonly clock: Clock,
    private readonly options: ReadinessOptions,
    private readonly events: EventSink<ReadinessEvents>,
    private readonly hooks: ReadinessHooks = {},
  ) {}

  private entryFor(key: string): Entry {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = new Entry(key);
      this.entries.set(key, entry);
    }
    return entry;
  }

  /**
   * Bounds what stray references cost: an unknown or unloadable profile keeps its (failed) entry
   * so repeated turns answer at once, but only the newest `maxUnknownProfiles` of them are kept.
   */
  private rememberUnknown(key: string): void {
    this.unknown.delete(key);
    this.unknown.add(key);
    const max = this.options.maxUnknownProfiles ?? 1000;
    for (const oldest of this.unknown) {
      if (this.unknown.size <= max) break;
      this.unknown.delete(oldest);
      const entry = this.entries.get(oldest);
      // Only a settled failure is forgotten; one being (re)loaded right now stays.
      if (entry && entry.phase === 'idle' && entry.configError && !entry.next) {
        this.clock.clearTimeout(entry.refreshTimer);
        this.entries.delete(oldest);
      }
    }
  }

  /** Keys of every entry created so far. */
  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** The config an entry currently uses (undefined before it was loaded). */
  configOf(key: string): ProfileConfig | undefined {
    return this.entries.get(key)?.config;
  }

  private assertOpen(key?: string): void {
    if (this.closed) throw new McpSupervisorError('HOST_CLOSED', 'the host is closed', key === undefined ? {} : { profile: key });
  }

  // ---------------------------------------------------------------- views

  private liveView(entry: Entry, extra: { waitTimedOut?: boolean } = {}): ReadinessView {
    let status: ReadinessView['status'];
    if (entry.configError) status = 'failed';
    else if (entry.phase !== 'idle') status = 'pending';
    else status = entry.config ? statusOf(entry.config, entry.outcomes) : 'idle';
    return buildView({
      key: entry.key,
      generation: entry.generation,
      config: entry.config,
      outcomes: entry.outcomes,
      failures: entry.failures,
      authorizationUrl: this.authorizationUrls(entry.key),
      warnings: this.warningsOf(entry.key),
      status,
      ...(extra.waitTimedOut ? { waitTimedOut: true } : {}),
      ...(entry.configError ? { error: entry.configError } : {}),
    });
  }

  private authorizationUrls(key: string): (server: string) => string | undefined {
    return (server) => this.hooks.authorizationUrl?.(key, server);
  }

  private warningsOf(key: string): (server: string) => string[] {
    return (server) => this.hooks.warnings?.(key, server) ?? [];
  }

  /** The entry's view right now. Never blocks, never starts anything. */
  status(key: string): ReadinessView {
    const entry = this.entries.get(key);
    if (!entry) {
      return buildView({ key, generation: 0, config: undefined, outcomes: new Map(), failures: new Map(), status: 'idle' });
    }
    return entry.settled?.view ?? this.liveView(entry);
  }

  /** The current frozen catalog of a settled entry (rebuilt if parking changed). */
  private catalogOf(settlement: Settlement, entry: Entry): TurnCatalog {
    const version = this.sessions.exclusionVersion();
    if (settlement.catalogVersion !== version) {
      settlement.catalog = buildCatalog(entry.config, settlement.outcomes, (server) => this.sessions.isExcluded(entry.key, server));
      settlement.catalogVersion = version;
    }
    return settlement.catalog;
  }

  // ---------------------------------------------------------------- waiting

  /**
   * Waits for the profile to be settled, bounded by `maxWaitMs`, and returns its view and catalog.
   * A settled entry answers at once (and triggers a due background refresh).
   */
  async wait(key: string, options: WaitOptions = {}): Promise<{ view: ReadinessView; catalog: TurnCatalog }> {
    this.assertOpen(key);
    const entry = this.entryFor(key);
    const settled = entry.settled;
    if (settled) {
      this.refreshIfDue(entry);
      return { view: settled.view, catalog: this.catalogOf(settled, entry) };
    }
    const next = this.ensure(entry);
    const outcome = await this.raceDeadline(next.promise, options, key);
    if (outcome !== DEADLINE) return { view: outcome.view, catalog: this.catalogOf(outcome, entry) };
    // The deadline and a settlement can land in the same tick: prefer the settlement.
    if (entry.settled) return { view: entry.settled.view, catalog: this.catalogOf(entry.settled, entry) };
    const view = this.liveView(entry, { waitTimedOut: true });
    return { view, catalog: buildCatalog(entry.config, entry.outcomes, (server) => this.sessions.isExcluded(key, server)) };
  }

  private raceDeadline<T>(promise: Promise<T>, options: WaitOptions, key: string): Promise<T | typeof DEADLINE> {
    return withDeadline(promise, {
      ms: options.maxWaitMs,
      clock: this.clock,
      signal: options.signal,
      onAbort: (reason) => new McpSupervisorError('CANCELLED', 'the wait was cancelled', { profile: key, cause: reason }),
    });
  }

  // ---------------------------------------------------------------- owners

  /** Single-flight: starts discovery if the entry is idle and unsettled; returns the shared settlement. */
  ensure(entry: Entry): Deferred<Settlement> {
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    if (entry.phase === 'idle' && !entry.settled) {
      entry.phase = 'starting';
      this.track(this.startOwner(entry, undefined, FIRST_USE));
    }
    return next;
  }

  /** Kicks off discovery of a profile without waiting (host.start()). */
  kick(key: string): void {
    this.assertOpen(key);
    this.ensure(this.entryFor(key));
  }

  private track(promise: Promise<unknown>): void {
    const tracked = promise.catch(() => undefined);
    this.background.add(tracked);
    void tracked.finally(() => this.background.delete(tracked));
  }

  /**
   * Starts a new generation for `entry` over `only` (or every enabled server). Runs under the
   * entry's mutex; quiesces leftovers first; creates the owner only with the fence open.
   */
  private async startOwner(entry: Entry, only: readonly string[] | undefined, reason: string): Promise<void> {
    await entry.transition.runExclusive(async () => {
      try {
        await this.startOwnerLocked(entry, only, reason);
      } catch (error) {
        this.failStart(entry, error);
      }
    });
  }

  private async startOwnerLocked(entry: Entry, only: readonly string[] | undefined, reason: string): Promise<void> {
    this.assertOpen(entry.key);
    const version = entry.version;
    if (!entry.config && !entry.configError) {
      try {
        entry.config = await this.loadConfig(entry.key, AbortSignal.timeout(this.options.readinessCapMs));
        if (!entry.config) throw new McpSupervisorError('UNKNOWN_PROFILE', `profile "${entry.key}" is not configured and could not be loaded`, { profile: entry.key });
      } catch (error) {
        entry.configError = (isMcpSupervisorError(error) ? error : new McpSupervisorError('INVALID_CONFIG', describeError(error), { profile: entry.key })).toJSON();
        this.rememberUnknown(entry.key);
      }
    }
    // A body of this key may still be alive (releasing its connections after settling, or retired
    // by the cap): it must be gone before the next one starts.
    if (this.driver.hasOwner(entry.key) || this.driver.liveOwners(entry.key) > 0) {
      const report = await this.driver.quiesce(entry.key, reason);
      this.emitRetired(report);
      if (!report.quiesced) {
        throw new McpSupervisorError('RETRY_REFUSED', `the previous discovery of profile "${entry.key}" could not be stopped (survivors: ${report.survivors.join(', ') || 'worker'})`, {
          profile: entry.key,
        });
      }
    }
    while (this.fence.isLocked()) await this.fence.waitForUnlock();
    // ---- no await from here to the start: a reload cannot slip in between ----
    this.assertOpen(entry.key);
    if (entry.version !== version) {
      // A reload invalidated the entry while we waited; its own kick-off starts the new owner.
      if (entry.phase === 'starting') entry.phase = 'idle';
      return;
    }
    if (entry.configError || !entry.config) {
      this.settle(entry);
      return;
    }
    const enabled = enabledServers(entry.config);
    const servers = (only ?? enabled).filter((name) => enabled.includes(name));
    const configs: ServerConfig[] = servers.map((name) => entry.config!.servers[name]!);
    if (only === undefined) entry.outcomes = new Map();
    for (const name of servers) entry.outcomes.set(name, { status: 'pending', server: name });
    entry.inflight = new Set(servers);
    if (servers.length === 0) {
      entry.phase = 'idle';
      this.settle(entry);
      return;
    }
    const { generation } = this.driver.start(entry.key, configs, {
      onOutcome: (outcome, generationOfOutcome) => this.onOutcome(entry, generationOfOutcome, outcome),
      onDone: ({ generation: doneGeneration, error }) => this.onDone(entry, doneGeneration, error),
    }, { reuse: reason === FIRST_USE });
    entry.generation = generation;
    entry.generationStartedAt = this.clock.now();
    entry.phase = 'running';
    this.clock.clearTimeout(entry.capTimer);
    entry.capTimer = this.clock.setTimeout(() => this.onCap(entry, generation), this.options.readinessCapMs);
    this.events.emit('discovery:start', { key: entry.key, generation, servers, reason });
  }

  /** Owner creation failed (host closed, quiescence refused): settle so nobody waits forever. */
  private failStart(entry: Entry, error: unknown): void {
    if (entry.phase === 'starting') entry.phase = 'idle';
    const serialized = (isMcpSupervisorError(error) ? error : new McpSupervisorError('DISCOVERY_FAILED', describeError(error), { profile: entry.key })).toJSON();
    if (serialized.code === 'HOST_CLOSED') {
      entry.next?.reject(McpSupervisorError.fromJSON(serialized));
      entry.next = undefined;
      return;
    }
    for (const name of entry.inflight) {
      if (entry.outcomes.get(name)?.status === 'pending') {
        entry.outcomes.set(name, { status: 'failed', server: name, failure: { kind: 'cancelled', message: serialized.message }, timings: { totalMs: 0 } });
      }
    }
    if (!entry.config) entry.configError = serialized;
    this.settle(entry);
  }

  private onOutcome(entry: Entry, generation: number, outcome: SettledOutcome): void {
    if (generation !== entry.generation || entry.phase !== 'running' || !entry.inflight.has(outcome.server)) return;
    // Frozen here, one server at a time as outcomes arrive, so the settlement that builds the
    // turn catalogue finds every schema frozen already: no handler walks every tool of a profile.
    if (outcome.status === 'ready') deepFreeze(outcome);
    entry.outcomes.set(outcome.server, outcome);
    this.recordFailure(entry, outcome);
    this.events.emit('discovery:outcome', {
      key: entry.key,
      generation,
      server: outcome.server,
      status: outcome.status,
      ...(outcome.status === 'failed' ? { kind: outcome.failure.kind } : {}),
      ...(outcome.status === 'ready' ? { tools: outcome.tools.length } : {}),
      ms: outcome.status === 'disabled' ? 0 : outcome.timings.totalMs,
    });
    if ([...entry.inflight].every((name) => entry.outcomes.get(name)?.status !== 'pending')) this.settle(entry);
  }

  private recordFailure(entry: Entry, outcome: SettledOutcome): void {
    if (outcome.status !== 'failed') {
      entry.failures.delete(outcome.server);
      return;
    }
    const streak = (entry.failures.get(outcome.server)?.streak ?? 0) + 1;
    const cooldown = Math.min(this.options.retryCooldownMs * 2 ** (streak - 1), this.options.maxRetryCooldownMs);
    entry.failures.set(outcome.server, { streak, retryAt: this.clock.now() + cooldown });
  }

  private onDone(entry: Entry, generation: number, error: McpSupervisorError | undefined): void {
    if (generation !== entry.generation || entry.phase !== 'running') return;
    const pending = [...entry.inflight].filter((name) => entry.outcomes.get(name)?.status === 'pending');
    if (pending.length === 0) return;
    // The body ended without an outcome for these servers (its worker died): they failed.
    const message = `discovery ended without a result for this server${error ? `: ${error.message}` : ''}`;
    for (const name of pending) {
      const outcome: SettledOutcome = { status: 'failed', server: name, failure: { kind: 'cancelled', message }, timings: { totalMs: 0 } };
      entry.outcomes.set(name, outcome);
      this.recordFailure(entry, outcome);
    }
    this.settle(entry);
  }

  /** The readiness cap: retire the generation now, settle it as failed for what is still pending, wake everyone. */
  private onCap(entry: Entry, generation: number): void {
    if (generation !== entry.generation || entry.phase !== 'running') return;
    // quiesce() retires the generation synchronously: from here on nothing of it is accepted.
    const quiescing = this.driver.quiesce(entry.key, 'readiness cap');
    this.track(quiescing.then((report) => this.emitRetired(report)));
    for (const name of entry.inflight) {
      if (entry.outcomes.get(name)?.status !== 'pending') continue;
      const outcome: SettledOutcome = {
        status: 'failed',
        server: name,
        failure: { kind: 'timeout', message: `discovery did not finish within the readiness cap of ${this.options.readinessCapMs} ms` },
        timings: { totalMs: this.clock.now() - entry.generationStartedAt },
      };
      entry.outcomes.set(name, outcome);
      this.recordFailure(entry, outcome);
    }
    this.settle(entry);
  }

  private emitRetired(report: QuiesceReport): void {
    this.events.emit('discovery:retired', {
      key: report.key,
      generation: report.generation,
      reason: report.reason,
      quiesceMs: report.totalMs,
      rung: report.rung,
      quiesced: report.quiesced,
    });
  }

  /** Publishes the entry's outcomes as its new settlement and wakes every waiter. */
  private settle(entry: Entry): void {
    this.clock.clearTimeout(entry.capTimer);
    entry.capTimer = undefined;
    if (entry.phase !== 'idle') entry.phase = 'idle';
    entry.inflight = new Set();
    const now = this.clock.now();
    const refreshAt = this.nextRefreshAt(entry);
    const view = buildView({
      key: entry.key,
      generation: entry.generation,
      config: entry.config,
      outcomes: entry.outcomes,
      failures: entry.failures,
      authorizationUrl: this.authorizationUrls(entry.key),
      warnings: this.warningsOf(entry.key),
      settledAt: now,
      ...(refreshAt === undefined ? {} : { refreshAt }),
      ...(entry.configError ? { error: entry.configError } : {}),
    });
    const outcomes = new Map(entry.outcomes);
    const settlement: Settlement = {
      generation: entry.generation,
      view,
      outcomes,
      catalog: buildCatalog(entry.config, outcomes, (server) => this.sessions.isExcluded(entry.key, server)),
      catalogVersion: this.sessions.exclusionVersion(),
    };
    entry.settled = settlement;
    if (entry.config && !entry.configError) this.sessions.published(entry.key, entry.config, outcomes);
    this.scheduleRefresh(entry, refreshAt);
    const next = entry.next;
    entry.next = undefined;
    next?.resolve(settlement);
    this.events.emit('discovery:settled', {
      key: entry.key,
      generation: entry.generation,
      status: view.status,
      durationMs: entry.generationStartedAt ? now - entry.generationStartedAt : 0,
      failed: [...view.failed],
    });
  }

  // ---------------------------------------------------------------- refresh

  /**
   * True for a failed server the cooldown refresh may re-discover: not one waiting for
   * authorization (a refresh would restart its OAuth code flow under the user's feet).
   */
  private refreshable(entry: Entry, name: string): boolean {
    const outcome = entry.outcomes.get(name);
    return outcome?.status === 'failed' && outcome.failure.kind !== 'auth';
  }

  private nextRefreshAt(entry: Entry): number | undefined {
    let earliest: number | undefined;
    for (const [name, failure] of entry.failures) {
      if (!this.refreshable(entry, name)) continue;
      if (earliest === undefined || failure.retryAt < earliest) earliest = failure.retryAt;
    }
    return earliest;
  }

  private scheduleRefresh(entry: Entry, refreshAt: number | undefined): void {
    this.clock.clearTimeout(entry.refreshTimer);
    entry.refreshTimer = undefined;
    if (refreshAt === undefined || this.closed) return;
    entry.refreshTimer = this.clock.setTimeout(() => this.refreshIfDue(entry), Math.max(0, refreshAt - this.clock.now()));
  }

  /** Starts one background re-discovery of the failed servers that are due, if none is running. */
  private refreshIfDue(entry: Entry): void {
    if (this.closed || entry.phase !== 'idle' || !entry.settled) return;
    const now = this.clock.now();
    const due = [...entry.failures]
      .filter(([name, failure]) => failure.retryAt <= now && this.refreshable(entry, name))
      .map(([name]) => name);
    if (due.length === 0) return;
    entry.phase = 'starting';
    this.track(this.startOwner(entry, due, 'cooldown refresh'));
  }

  // ---------------------------------------------------------------- tools/list_changed

  /**
   * A server announced a new tool list: publish it for the *next* turn. The settlement is
   * replaced, never mutated, so turns already handed out keep their snapshot.
   */
  replaceServerLists(key: string, server: string, lists: CatalogLists): void {
    const entry = this.entries.get(key);
    const settled = entry?.settled;
    if (!entry || !settled) return;
    const previous = settled.outcomes.get(server);
    if (previous?.status !== 'ready') return;
    const config = entry.config && Object.hasOwn(entry.config.servers, server) ? entry.config.servers[server] : undefined;
    if (config) this.driver.listsChanged?.(key, config);
    const fresh = deepFreeze(structuredClone(lists));
    const updated: ServerOutcome = { ...previous, ...fresh };
    const outcomes = new Map(settled.outcomes);
    outcomes.set(server, updated);
    if (entry.outcomes.get(server)?.status === 'ready') entry.outcomes.set(server, updated);
    const view = buildView({
      key,
      generation: settled.generation,
      config: entry.config,
      outcomes,
      failures: entry.failures,
      authorizationUrl: this.authorizationUrls(key),
      warnings: this.warningsOf(key),
      ...(settled.view.settledAt === undefined ? {} : { settledAt: settled.view.settledAt }),
      ...(settled.view.refreshAt === undefined ? {} : { refreshAt: settled.view.refreshAt }),
    });
    entry.settled = {
      generation: settled.generation,
      view,
      outcomes,
      catalog: buildCatalog(entry.config, outcomes, (name) => this.sessions.isExcluded(key, name)),
      catalogVersion: this.sessions.exclusionVersion(),
    };
    if (lists.tools) this.events.emit('tools:changed', { key, server, tools: lists.tools.length });
    if (lists.prompts || lists.resources) this.events.emit('catalog:changed', { key, server, prompts: updated.prompts.length, resources: updated.resources.length, resourceTemplates: updated.resourceTemplates?.length ?? 0 });
  }

  // ---------------------------------------------------------------- rediscover

  /**
   * Re-discovers some servers of a profile (after an OAuth code flow completed), once any
   * running generation has settled: one owner per key, always. Resolves with the settled view.
   */
  async rediscover(key: string, servers: readonly string[], reason: string, options: WaitOptions = {}): Promise<ReadinessView> {
    this.assertOpen(key);
    const entry = this.entryFor(key);
    while (!entry.settled || entry.phase !== 'idle') {
      const outcome = await this.raceDeadline(this.ensure(entry).promise, options, key);
      if (outcome === DEADLINE) return this.liveView(entry, { waitTimedOut: true });
    }
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    entry.phase = 'starting';
    this.track(this.startOwner(entry, servers, reason));
    const outcome = await this.raceDeadline(next.promise, options, key);
    return outcome === DEADLINE ? this.liveView(entry, { waitTimedOut: true }) : outcome.view;
  }

  // ---------------------------------------------------------------- retry

  /**
   * Retires the current owner, waits until it is quiesced, then re-discovers every server.
   * @throws McpSupervisorError `RETRY_REFUSED` when the old owner cannot be quiesced
   */
  async retry(key: string, options: WaitOptions = {}): Promise<ReadinessView> {
    this.assertOpen(key);
    const entry = this.entryFor(key);
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    entry.phase = 'starting';
    this.sessions.revive(key);
    await entry.transition.runExclusive(async () => {
      if (this.driver.hasOwner(key) || this.driver.liveOwners(key) > 0) {
        const report = await this.driver.quiesce(key, 'retry');
        this.emitRetired(report);
        if (!report.quiesced) {
          entry.phase = 'idle';
          this.settle(entry);
          throw new McpSupervisorError('RETRY_REFUSED', `retry of profile "${key}" refused: the running discovery could not be stopped`, { profile: key, data: { survivors: report.survivors } });
        }
      }
      // The retired generation's waiters move on to this one (they share `next`).
      entry.phase = 'starting';
      try {
        await this.startOwnerLocked(entry, undefined, 'retry');
      } catch (error) {
        this.failStart(entry, error);
      }
    });
    const outcome = await this.raceDeadline(next.promise, options, key);
    return outcome === DEADLINE ? this.liveView(entry, { waitTimedOut: true }) : outcome.view;
  }

  // ---------------------------------------------------------------- reload

  /**
   * Re-reads configs, quiesces every affected owner (failing closed if one survives), shuts the
   * affected sessions down, invalidates the entries (in a `finally`) and kicks discovery off again.
   */
  async reload(keys: string[] | undefined): Promise<ReloadResult> {
    this.assertOpen();
    const release = await this.fence.acquire();
    const affected = keys ?? this.keys();
    const changes: ProfileChanges[] = [];
    const teardownErrors: SerializedError[] = [];
    let ok = false;
    this.events.emit('reload:start', { keys: affected });
    try {
      // 1. Read every new config first: a bad one aborts the reload before anything is touched.
      // A profile that has a working config fails the whole reload closed when its new config is
      // bad; a reference that never loaded (a stray or unknown ref) is simply dropped — it must
      // never make every later reload fail.
      const fresh = new Map<string, ProfileConfig | undefined>();
      for (const key of affected) {
        const current = this.entries.get(key);
        try {
          fresh.set(key, await this.loadConfig(key, AbortSignal.timeout(this.options.readinessCapMs)));
        } catch (error) {
          if (current?.config && !current.configError) throw error;
          fresh.set(key, undefined);
        }
      }
      // 2. Quiesce every affected owner; fail closed if one survives.
      const reports = await Promise.all(affected.filter((key) => this.driver.hasOwner(key) || this.driver.liveOwners(key) > 0).map((key) => this.driver.quiesce(key, 'reload')));
      for (const report of reports) this.emitRetired(report);
      const survivors = reports.filter((report) => !report.quiesced);
      if (survivors.length > 0) {
        // Their generations are retired: settle them so their waiters wake, but tear nothing down.
        for (const report of reports) {
          const entry = this.entries.get(report.key);
          if (entry && entry.phase === 'running') this.onDone(entry, entry.generation, new McpSupervisorError('RELOAD_ABORTED', 'reload aborted'));
        }
        throw new McpSupervisorError('RELOAD_ABORTED', `reload aborted: discovery of ${survivors.map((report) => `"${report.key}"`).join(', ')} could not be stopped; nothing was torn down`, {
          data: { survivors: survivors.map((report) => ({ key: report.key, pids: report.survivors })) },
        });
      }
      // 3. Teardown; every affected entry is invalidated whatever a shutdown throws.
      try {
        for (const key of affected) {
          try {
            await this.sessions.shutdownProfile(key, 'reload');
          } catch (error) {
            teardownErrors.push((isMcpSupervisorError(error) ? error : new McpSupervisorError('RELOAD_ABORTED', `shutting down sessions of "${key}" failed: ${describeError(error)}`, { profile: key })).toJSON());
          }
        }
      } finally {
        for (const key of affected) changes.push(this.invalidate(key, fresh.get(key)));
      }
      ok = true;
    } catch (error) {
      this.events.emit('reload:done', { keys: affected, changes, ok: false, error: (isMcpSupervisorError(error) ? error : new McpSupervisorError('RELOAD_ABORTED', describeError(error))).toJSON() });
      throw error;
    } finally {
      release();
    }
    // 4. Discovery again, in the background (owner creation checks the fence, now open).
    for (const key of affected) {
      const entry = this.entries.get(key);
      if (entry && !this.closed) this.ensure(entry);
    }
    this.events.emit('reload:done', { keys: affected, changes, ok });
    return { changes, teardownErrors };
  }

  /** Drops an entry's settlement and state, adopting `config`; reports what changed. */
  private invalidate(key: string, config: ProfileConfig | undefined): ProfileChanges {
    const entry = this.entryFor(key);
    const before = entry.config?.servers ?? {};
    const after = config?.servers ?? {};
    const changes: ProfileChanges = { key, added: [], removed: [], changed: [], unchanged: [] };
    for (const name of Object.keys(after)) {
      const old = before[name];
      if (!old) changes.added.push(name);
      else if (serverFingerprint(old) !== serverFingerprint(after[name]!) || old.disabled !== after[name]!.disabled) changes.changed.push(name);
      else changes.unchanged.push(name);
    }
    for (const name of Object.keys(before)) if (!(name in after)) changes.removed.push(name);
    this.clock.clearTimeout(entry.capTimer);
    this.clock.clearTimeout(entry.refreshTimer);
    entry.capTimer = entry.refreshTimer = undefined;
    entry.version++;
    entry.settled = undefined;
    entry.outcomes = new Map();
    entry.failures = new Map();
    entry.inflight = new Set();
    entry.configError = undefined;
    entry.config = config;
    if (entry.phase === 'running') entry.phase = 'idle';
    this.unknown.delete(key);
    if (!config) {
      changes.profileRemoved = true;
      entry.next?.reject(new McpSupervisorError('UNKNOWN_PROFILE', `profile "${key}" was removed by a reload`, { profile: key }));
      entry.next = undefined;
      this.entries.delete(key);
    }
    return changes;
  }

  // ---------------------------------------------------------------- close

  /** Ends everything: waiters get HOST_CLOSED, timers stop, bodies and sessions are shut down. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const entry of this.entries.values()) {
      this.clock.clearTimeout(entry.capTimer);
      this.clock.clearTimeout(entry.refreshTimer);
      entry.next?.reject(new McpSupervisorError('HOST_CLOSED', 'the host was closed while waiting for discovery', { profile: entry.key }));
      entry.next = undefined;
    }
    await Promise.allSettled([this.driver.close(), this.sessions.close()]);
    await Promise.allSettled([...this.background]);
  }
}
