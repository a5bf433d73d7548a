/**
 * Profile readiness: one entry per canonical profile key, one discovery owner per entry at a time,
 * one shared settlement that every waiter of the entry awaits.
 *
 * Ownership rules (docs/ARCHITECTURE.md §3 and §5):
 * - every owner transition of a key (start, retry, refresh) runs under the entry's own mutex and
 *   quiesces the previous body before starting the next, so the live-owner count never exceeds 1;
 * - a new owner is only created while the reload fence is open, checked with no await between the
 *   check and the (synchronous) start, so a reload's snapshot of owners is complete;
 * - turns on a settled entry never wait, not on discovery, not on the fence;
 * - waiters of a pending entry share one deferred that survives retries and reloads and is
 *   resolved by the next settlement — or by the readiness cap, which retires the generation and
 *   settles it at once, waking every waiter together.
 *
 * The layout: this module keeps the entries and answers the public calls; `owners.ts` creates,
 * retires and settles owners (the rules above are enforced there); an entry's phase and its one
 * transition function are `phase.ts` and `entry.ts`; views and settlements are built by
 * `snapshots.ts`; a reload's per-profile diff is `config/diff.ts`.
 */
import type { Clock } from '../clock.js';
import { diffServers } from '../config/diff.js';
import type { ProfileConfig } from '../config/types.js';
import { DEADLINE, withDeadline } from '../deadline.js';
import type { ServerOutcome } from '../discovery/types.js';
import { McpSupervisorError, describeError, isMcpSupervisorError, type SerializedError } from '../errors.js';
import type { EventSink } from '../events.js';
import type { CatalogLists } from '../sessions/supervisor.js';
import type { DiscoveryDriver, SessionLayer } from './driver.js';
import { type Deferred, Entry, type Settlement, deferred } from './entry.js';
import { FIRST_USE, OwnerControl } from './owners.js';
import type { EntryPhase } from './phase.js';
import type { ProfileChanges, ProfileLoader, ReadinessEvents, ReadinessHooks, ReadinessOptions, ReloadResult } from './registry-types.js';
import { type TurnCatalog, deepFreeze } from './settlement.js';
import { Snapshots } from './snapshots.js';
import type { ReadinessView, WaitOptions } from './types.js';

export type { ProfileChanges, ProfileLoader, ReadinessEvents, ReadinessHooks, ReadinessOptions, ReloadResult } from './registry-types.js';

/** A view and the catalog a turn offers with it. */
type Answer = { view: ReadinessView; catalog: TurnCatalog };

/** Readiness of every profile of a host. */
export class ReadinessRegistry {
  private readonly entries = new Map<string, Entry>();
  /** Keys whose profile is unknown or could not be loaded, oldest first (bounded). */
  private readonly unknown = new Set<string>();
  private readonly snapshots: Snapshots;
  private readonly owners: OwnerControl;

  constructor(
    private readonly driver: DiscoveryDriver,
    private readonly sessions: SessionLayer,
    private readonly loadConfig: ProfileLoader,
    private readonly clock: Clock,
    private readonly options: ReadinessOptions,
    private readonly events: EventSink<ReadinessEvents>,
    hooks: ReadinessHooks = {},
  ) {
    this.snapshots = new Snapshots(sessions, hooks);
    this.owners = new OwnerControl({ driver, sessions, loadConfig, clock, options, events, snapshots: this.snapshots, onUnloadable: (key) => this.rememberUnknown(key) });
  }

  private entryFor(key: string): Entry {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = new Entry(key, this.clock);
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
      if (entry && entry.phase.kind === 'idle' && entry.configError && !entry.next) {
        entry.stopTimers();
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

  /** The phase of a key's entry (`idle` when there is none yet): for diagnostics and tests. */
  phaseOf(key: string): EntryPhase['kind'] {
    return this.entries.get(key)?.phase.kind ?? 'idle';
  }

  /** The entry's view right now. Never blocks, never starts anything. */
  status(key: string): ReadinessView {
    const entry = this.entries.get(key);
    if (!entry) return Snapshots.untouched(key);
    return entry.settled?.view ?? this.snapshots.live(entry);
  }

  // ---------------------------------------------------------------- waiting

  /**
   * Waits for the profile to be settled, bounded by `maxWaitMs`, and returns its view and catalog.
   * A settled entry answers at once (and triggers a due background refresh).
   */
  async wait(key: string, options: WaitOptions = {}): Promise<Answer> {
    this.owners.assertOpen(key);
    const entry = this.entryFor(key);
    const settled = entry.settled;
    if (settled) {
      this.owners.refreshIfDue(entry);
      return this.answer(settled, entry);
    }
    const outcome = await this.raceDeadline(this.ensure(entry).promise, options, key);
    if (outcome !== DEADLINE) return this.answer(outcome, entry);
    // The deadline and a settlement can land in the same tick: prefer the settlement.
    if (entry.settled) return this.answer(entry.settled, entry);
    return { view: this.snapshots.live(entry, { waitTimedOut: true }), catalog: this.snapshots.catalog(entry, entry.outcomes) };
  }

  private answer(settlement: Settlement, entry: Entry): Answer {
    return { view: settlement.view, catalog: this.snapshots.catalogOf(settlement, entry) };
  }

  /** Waits for the entry's next settlement; a caller whose own deadline ran out gets the live view. */
  private async viewAfter(next: Deferred<Settlement>, entry: Entry, options: WaitOptions): Promise<ReadinessView> {
    const outcome = await this.raceDeadline(next.promise, options, entry.key);
    return outcome === DEADLINE ? this.snapshots.live(entry, { waitTimedOut: true }) : outcome.view;
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
  private ensure(entry: Entry): Deferred<Settlement> {
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    if (!entry.settled) this.owners.demand(entry, undefined, FIRST_USE);
    return next;
  }

  /** Kicks off discovery of a profile without waiting (host.start()). */
  kick(key: string): void {
    this.owners.assertOpen(key);
    this.ensure(this.entryFor(key));
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
    const updated: ServerOutcome = { ...previous, ...deepFreeze(structuredClone(lists)) };
    const outcomes = new Map(settled.outcomes);
    outcomes.set(server, updated);
    if (entry.outcomes.get(server)?.status === 'ready') entry.outcomes.set(server, updated);
    entry.settled = this.snapshots.settlement(entry, settled.generation, outcomes, { settledAt: settled.view.settledAt, refreshAt: settled.view.refreshAt });
    if (lists.tools) this.events.emit('tools:changed', { key, server, tools: lists.tools.length });
    if (lists.prompts || lists.resources) this.events.emit('catalog:changed', { key, server, prompts: updated.prompts.length, resources: updated.resources.length, resourceTemplates: updated.resourceTemplates?.length ?? 0 });
  }

  // ---------------------------------------------------------------- rediscover and retry

  /**
   * Re-discovers some servers of a profile (after an OAuth code flow completed), once any
   * running generation has settled: one owner per key, always. Resolves with the settled view.
   */
  async rediscover(key: string, servers: readonly string[], reason: string, options: WaitOptions = {}): Promise<ReadinessView> {
    this.owners.assertOpen(key);
    const entry = this.entryFor(key);
    while (!entry.settled || entry.phase.kind !== 'idle') {
      const outcome = await this.raceDeadline(this.ensure(entry).promise, options, key);
      if (outcome === DEADLINE) return this.snapshots.live(entry, { waitTimedOut: true });
    }
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    this.owners.demand(entry, servers, reason);
    return this.viewAfter(next, entry, options);
  }

  /**
   * Retires the current owner, waits until it is quiesced, then re-discovers every server.
   * @throws McpSupervisorError `RETRY_REFUSED` when the old owner cannot be quiesced
   */
  async retry(key: string, options: WaitOptions = {}): Promise<ReadinessView> {
    this.owners.assertOpen(key);
    const entry = this.entryFor(key);
    entry.next ??= deferred<Settlement>();
    const next = entry.next;
    entry.transition({ type: 'retry' });
    this.sessions.revive(key);
    await entry.ownerLock.runExclusive(() => this.owners.retryLocked(entry));
    return this.viewAfter(next, entry, options);
  }

  // ---------------------------------------------------------------- reload

  /**
   * Re-reads configs, quiesces every affected owner (failing closed if one survives), shuts the
   * affected sessions down, invalidates the entries (in a `finally`) and kicks discovery off again.
   */
  async reload(keys: string[] | undefined): Promise<ReloadResult> {
    this.owners.assertOpen();
    const release = await this.owners.fence.acquire();
    const affected = keys ?? this.keys();
    const changes: ProfileChanges[] = [];
    const teardownErrors: SerializedError[] = [];
    this.events.emit('reload:start', { keys: affected });
    try {
      const fresh = await this.readConfigs(affected);
      await this.quiesceAffected(affected);
      // Every affected entry is invalidated whatever a shutdown throws.
      try {
        await this.shutDownSessions(affected, teardownErrors);
      } finally {
        for (const key of affected) changes.push(this.invalidate(key, fresh.get(key)));
      }
    } catch (error) {
      this.events.emit('reload:done', { keys: affected, changes, ok: false, error: (isMcpSupervisorError(error) ? error : new McpSupervisorError('RELOAD_ABORTED', describeError(error))).toJSON() });
      throw error;
    } finally {
      release();
    }
    // Discovery again, in the background (owner creation checks the fence, now open).
    for (const key of affected) {
      const entry = this.entries.get(key);
      if (entry && !this.owners.closed) this.ensure(entry);
    }
    this.events.emit('reload:done', { keys: affected, changes, ok: true });
    return { changes, teardownErrors };
  }

  /**
   * Reload step 1: reads every new config before anything is touched. A profile that has a working
   * config fails the whole reload closed when its new config is bad; a reference that never loaded
   * (a stray or unknown ref) is simply dropped — it must never make every later reload fail.
   */
  private async readConfigs(affected: readonly string[]): Promise<Map<string, ProfileConfig | undefined>> {
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
    return fresh;
  }

  /**
   * Reload step 2: quiesces every affected owner.
   * @throws McpSupervisorError `RELOAD_ABORTED` when a body survives; the retired generations are
   *   settled first (so their waiters wake) and nothing is torn down
   */
  private async quiesceAffected(affected: readonly string[]): Promise<void> {
    const quiescences = await Promise.all(affected.map((key) => this.owners.quiesce(key, 'reload')));
    const survivors = quiescences.filter((quiescence) => quiescence.survived).map((quiescence) => quiescence.report);
    if (survivors.length === 0) return;
    // Their generations are retired: settle them so their waiters wake, but tear nothing down.
    for (const { report } of quiescences) {
      const entry = report ? this.entries.get(report.key) : undefined;
      if (entry?.phase.kind === 'running') this.owners.onDone(entry, entry.phase.run.generation, new McpSupervisorError('RELOAD_ABORTED', 'reload aborted'));
    }
    throw new McpSupervisorError('RELOAD_ABORTED', `reload aborted: discovery of ${survivors.map((report) => `"${report.key}"`).join(', ')} could not be stopped; nothing was torn down`, {
      // The rung and time say how it got stuck (a worker that would not exit, processes that would not die).
      data: { survivors: survivors.map((report) => ({ key: report.key, pids: report.survivors, rung: report.rung, totalMs: report.totalMs })) },
    });
  }

  /** Reload step 3: ends the sessions of every affected profile, collecting what a shutdown throws. */
  private async shutDownSessions(affected: readonly string[], teardownErrors: SerializedError[]): Promise<void> {
    for (const key of affected) {
      try {
        await this.sessions.shutdownProfile(key, 'reload');
      } catch (error) {
        teardownErrors.push((isMcpSupervisorError(error) ? error : new McpSupervisorError('RELOAD_ABORTED', `shutting down sessions of "${key}" failed: ${describeError(error)}`, { profile: key })).toJSON());
      }
    }
  }

  /** Drops an entry's settlement and state, adopting `config`; reports what changed. */
  private invalidate(key: string, config: ProfileConfig | undefined): ProfileChanges {
    const entry = this.entryFor(key);
    const changes: ProfileChanges = { key, ...diffServers(entry.config?.servers ?? {}, config?.servers ?? {}) };
    entry.stopTimers();
    entry.transition({ type: 'invalidated' });
    entry.version++;
    entry.settled = undefined;
    entry.outcomes = new Map();
    entry.failures = new Map();
    entry.expiries = new Map();
    entry.configError = undefined;
    entry.config = config;
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
    if (this.owners.closed) return;
    this.owners.markClosed();
    for (const entry of this.entries.values()) {
      entry.stopTimers();
      entry.next?.reject(new McpSupervisorError('HOST_CLOSED', 'the host was closed while waiting for discovery', { profile: entry.key }));
      entry.next = undefined;
    }
    await Promise.allSettled([this.driver.close(), this.sessions.close()]);
    await this.owners.drain();
  }
}
