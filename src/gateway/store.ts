/**
 * Where the bind ledger keeps its records.
 *
 * Records are keyed by (epoch, agent), so a new epoch starts with an empty ledger by
 * construction and clearing old epochs is only garbage collection. The interface is async and
 * mutation-based so that a multi-replica gateway can back it with a shared store without changing
 * the ledger (`mcp-supervisor/redis`: a Redis hash per epoch, each write a Lua compare-and-set);
 * the default {@link MemoryBindStore} serves a single process.
 */

/** The host's outstanding request for one agent to call `mcp_probe`. */
export interface ProbeRecord {
  /** The nonce the agent must echo. */
  readonly nonce: string;
  /** The launch of the agent the request was delivered to. */
  readonly launchId: string;
  /** The gateway epoch in which the request was delivered. */
  readonly epoch: string;
  /** When the host delivered the request (clock ms). */
  readonly requestedAt: number;
  /** When a matching `mcp_probe` completed, if it has. */
  readonly fulfilledAt: number | undefined;
}

/** What the ledger knows about one agent in one epoch. */
export interface BindRecord {
  /** The agent id the host's resolver returned. */
  readonly agent: string;
  /** The epoch the record belongs to. */
  readonly epoch: string;
  /** Completion time of the latest tool handler that ran for this agent in this epoch. */
  readonly observedAt: number | undefined;
  /** The nonce of the latest `mcp_probe` this agent completed in this epoch. */
  readonly lastNonce: string | undefined;
  /** The launch id of the latest `mcp_probe` this agent completed in this epoch. */
  readonly lastLaunchId: string | undefined;
  /** The latest probe request delivered to this agent in this epoch. */
  readonly probe: ProbeRecord | undefined;
}

/** Storage of bind records. Every method may be called concurrently. */
export interface BindStore {
  /** The record of `agent` in `epoch`, if any. */
  get(epoch: string, agent: string): Promise<BindRecord | undefined>;
  /**
   * Replaces the record of `agent` in `epoch` with `mutate(current)`, atomically with respect to
   * other updates of the same key (a shared store retries `mutate` on conflict, so it must be
   * free of side effects). Resolves to the stored record. A fleet store rejects with
   * `StaleEpochError` when `epoch` is no longer the fleet's (nothing was written).
   */
  update(epoch: string, agent: string, mutate: (current: BindRecord | undefined) => BindRecord): Promise<BindRecord>;
  /** Drops the records of every epoch other than `epoch`. */
  retainOnly(epoch: string): Promise<void>;
}

/** The in-process {@link BindStore}: a map per epoch. */
export class MemoryBindStore implements BindStore {
  readonly #epochs = new Map<string, Map<string, BindRecord>>();

  /** {@inheritDoc BindStore.get} */
  get(epoch: string, agent: string): Promise<BindRecord | undefined> {
    return Promise.resolve(this.#epochs.get(epoch)?.get(agent));
  }

  /** {@inheritDoc BindStore.update} */
  update(epoch: string, agent: string, mutate: (current: BindRecord | undefined) => BindRecord): Promise<BindRecord> {
    try {
      let records = this.#epochs.get(epoch);
      // Read, mutate and write in one synchronous step: that is what makes it atomic here.
      const next = Object.freeze(mutate(records?.get(agent)));
      if (records === undefined) {
        records = new Map();
        this.#epochs.set(epoch, records);
      }
      records.set(agent, next);
      return Promise.resolve(next);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** {@inheritDoc BindStore.retainOnly} */
  retainOnly(epoch: string): Promise<void> {
    for (const key of [...this.#epochs.keys()]) if (key !== epoch) this.#epochs.delete(key);
    return Promise.resolve();
  }
}
