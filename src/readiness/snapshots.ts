/**
 * The one builder of what readiness hands out about an entry: its views (live or settled), its
 * settlements and their turn catalogs. Views get the hooks' authorization URLs and warnings here
 * and nowhere else; catalogs leave out what the session layer parked.
 */
import type { ServerOutcome } from '../discovery/types.js';
import type { SerializedError } from '../errors.js';
import type { SessionLayer } from './driver.js';
import type { Entry, Settlement } from './entry.js';
import type { ReadinessHooks } from './registry-types.js';
import { type TurnCatalog, buildCatalog, buildView, statusOf } from './settlement.js';
import type { ReadinessView } from './types.js';

/** What a settlement's view records beyond the entry's outcomes. */
export interface SettlementStamps {
  settledAt?: number | undefined;
  refreshAt?: number | undefined;
  /** Why the profile itself failed (it could not be loaded). */
  error?: SerializedError | undefined;
}

/** Builds views, settlements and catalogs of entries. */
export class Snapshots {
  constructor(
    private readonly sessions: SessionLayer,
    private readonly hooks: ReadinessHooks,
  ) {}

  /** The view of a key readiness has no entry for. */
  static untouched(key: string): ReadinessView {
    return buildView({ key, generation: 0, config: undefined, outcomes: new Map(), failures: new Map(), status: 'idle' });
  }

  /** The entry's view right now, for a key with nothing settled to show or a waiter that gave up. */
  live(entry: Entry, extra: { waitTimedOut?: boolean } = {}): ReadinessView {
    let status: ReadinessView['status'];
    if (entry.configError) status = 'failed';
    else if (entry.phase.kind !== 'idle') status = 'pending';
    else status = entry.config ? statusOf(entry.config, entry.outcomes) : 'idle';
    return this.view(entry, entry.generation.generation, entry.outcomes, {
      status,
      ...(extra.waitTimedOut ? { waitTimedOut: true } : {}),
      ...(entry.configError ? { error: entry.configError } : {}),
    });
  }

  /**
   * A settlement of `entry` over `outcomes` (a snapshot the caller no longer mutates): its view
   * and the turn catalog, built once here rather than per turn.
   */
  settlement(entry: Entry, generation: number, outcomes: ReadonlyMap<string, ServerOutcome>, stamps: SettlementStamps): Settlement {
    return {
      generation,
      view: this.view(entry, generation, outcomes, stamps),
      outcomes,
      catalog: this.catalog(entry, outcomes),
      catalogVersion: this.sessions.exclusionVersion(),
    };
  }

  /** The catalog of the ready servers among `outcomes`, without the parked ones. */
  catalog(entry: Entry, outcomes: ReadonlyMap<string, ServerOutcome>): TurnCatalog {
    return buildCatalog(entry.config, outcomes, (server) => this.sessions.isExcluded(entry.key, server));
  }

  /** The current catalog of a settlement (rebuilt when parking changed since it was built). */
  catalogOf(settlement: Settlement, entry: Entry): TurnCatalog {
    const version = this.sessions.exclusionVersion();
    if (settlement.catalogVersion !== version) {
      settlement.catalog = this.catalog(entry, settlement.outcomes);
      settlement.catalogVersion = version;
    }
    return settlement.catalog;
  }

  private view(
    entry: Entry,
    generation: number,
    outcomes: ReadonlyMap<string, ServerOutcome>,
    extra: SettlementStamps & { status?: ReadinessView['status']; waitTimedOut?: boolean },
  ): ReadinessView {
    const key = entry.key;
    return buildView({
      key,
      generation,
      config: entry.config,
      outcomes,
      failures: entry.failures,
      authorizationUrl: (server) => this.hooks.authorizationUrl?.(key, server),
      warnings: (server) => this.hooks.warnings?.(key, server) ?? [],
      ...extra,
    });
  }
}
