/**
 * The bind ledger: which agents have proved, from inside a tool handler, that their MCP client
 * reached the current gateway epoch.
 *
 * It owns the current epoch. Bumping the epoch switches every read to an empty ledger at once
 * (records are keyed by epoch) and then purges the old epochs from the store. Writes carry the
 * epoch their handler started in and are dropped when that is no longer the current one, so a
 * handler that straddles a restart can never bind an agent to an epoch its client never reached.
 *
 * "Bound" means: a tool handler completed for this agent in the current epoch. An outstanding
 * probe request does not change that; it is reported alongside (`probe`) and the watchdog only
 * uses an unanswered one to explain itself. Had probes been able to unbind an agent, a model that
 * merely ignored a probe instruction would get its agent relaunched.
 *
 * In a fleet ({@link BindLedgerOptions.epochs}), the epoch is the fleet's: it can move under the
 * ledger (a bump on another replica), and the shared store refuses writes of an epoch that is no
 * longer current even when this replica has not heard of the move yet ({@link StaleEpochError}).
 * Such a write is dropped exactly like one the ledger can tell is stale by itself.
 */
import { McpSupervisorError } from '../errors.js';
import type { Clock } from './clock.js';
import { assertEpochId } from './epoch.js';
import { isStaleEpochError, type FleetEpochs } from './fleet.js';
import type { BindRecord, BindStore, ProbeRecord } from './store.js';
import { nonEmptyString } from './validate.js';

/** A probe request as seen through {@link BindStatus}. */
export interface ProbeStatus extends ProbeRecord {
  /** Whether a matching `mcp_probe` (same epoch, launch id and nonce) completed. */
  readonly fulfilled: boolean;
  /** Milliseconds since the request was delivered. */
  readonly ageMs: number;
}

/** The read-only bind status of one agent in the current epoch. */
export interface BindStatus {
  /** The agent asked about. */
  readonly agent: string;
  /** A tool handler completed for this agent in the current epoch. */
  readonly bound: boolean;
  /** The current gateway epoch. */
  readonly epoch: string;
  /** Nonce of the latest `mcp_probe` the agent completed in this epoch. */
  readonly lastNonce: string | undefined;
  /** Launch id of the latest `mcp_probe` the agent completed in this epoch. */
  readonly lastLaunchId: string | undefined;
  /** When the latest handler for this agent completed in this epoch. */
  readonly observedAt: number | undefined;
  /** Milliseconds since `observedAt`. */
  readonly ageMs: number | undefined;
  /** The latest probe request delivered in this epoch, if any. */
  readonly probe: ProbeStatus | undefined;
}

/** What `mcp_probe` answers. */
export interface ProbeReply {
  /** The agent the gateway identified (from the host's resolver, not from the arguments). */
  readonly agent: string;
  /** The nonce the agent sent. */
  readonly nonce: string;
  /** The launch id the agent sent. */
  readonly launchId: string;
  /** The epoch the agent's client is bound to. */
  readonly gatewayEpoch: string;
  /** When the probe was recorded (clock ms). */
  readonly observedAt: number;
}

/** A probe the host delivers to an agent. */
export interface ProbeRequest {
  /** A value the agent cannot guess, to echo through `mcp_probe`. */
  nonce: string;
  /** The launch of the agent the request is delivered to. */
  launchId: string;
}

/** Where a write came from: the epoch its handler started in. */
export interface WriteOrigin {
  /** Defaults to the current epoch (a write from outside any session context). */
  epoch?: string;
}

/** Construction options of {@link BindLedger}. */
export interface BindLedgerOptions {
  /** Record storage. */
  store: BindStore;
  /** Time source for `observedAt`, `requestedAt` and ages. */
  clock: Clock;
  /** Makes a new epoch id; called once at construction and on every bump. */
  newEpoch: () => string;
  /** Receives failures that must not break a tool call or a bump (store errors). */
  onError: (error: unknown, context: string) => void;
  /**
   * The fleet's epoch, when the ledger is one replica's view of a shared one: `newEpoch` is then
   * not used, and `bump()` moves the whole fleet (the store purges older epochs itself).
   */
  epochs?: FleetEpochs;
}

function emptyRecord(epoch: string, agent: string): BindRecord {
  return { agent, epoch, observedAt: undefined, lastNonce: undefined, lastLaunchId: undefined, probe: undefined };
}

/** The epoch plus the per-epoch bind records of every agent; see the module comment. */
export class BindLedger {
  readonly #store: BindStore;
  readonly #clock: Clock;
  readonly #newEpoch: () => string;
  readonly #onError: (error: unknown, context: string) => void;
  readonly #fleet: FleetEpochs | undefined;
  #local: string;

  constructor(options: BindLedgerOptions) {
    this.#store = options.store;
    this.#clock = options.clock;
    this.#newEpoch = options.newEpoch;
    this.#onError = options.onError;
    this.#fleet = options.epochs;
    this.#local = this.#fleet === undefined ? assertEpochId(this.#newEpoch()) : assertEpochId(this.#fleet.current);
  }

  /** The current epoch (in a fleet: the fleet's, as this replica last learned it). */
  get #epoch(): string {
    return this.#fleet === undefined ? this.#local : this.#fleet.current;
  }

  /** The current epoch. */
  get epoch(): string {
    return this.#epoch;
  }

  /**
   * Starts a new epoch. Reads see the empty ledger as soon as this returns; the promise settles
   * once older epochs are purged from the store (a purge failure is reported to `onError`, never
   * thrown: stale records are unreachable anyway). In a fleet the switch happens when the shared
   * store has the new epoch, and the promise rejects if it cannot be reached.
   */
  bump(): Promise<string> {
    // A fleet bump is one atomic step in the shared store (new epoch, older ledgers purged); it
    // rejects when the store cannot be reached, since moving only this replica would split the fleet.
    if (this.#fleet !== undefined) return this.#fleet.bump();
    const next = assertEpochId(this.#newEpoch());
    if (next === this.#epoch) {
      // An epoch generator that repeats itself would silently keep every stale session alive.
      throw new McpSupervisorError('INVALID_CONFIG', `The epoch generator returned the current epoch \`${next}\` again`);
    }
    this.#local = next;
    return this.#store.retainOnly(next).then(
      () => next,
      (error: unknown) => {
        this.#onError(error, 'purging the bind ledger of older epochs');
        return next;
      },
    );
  }

  /**
   * Records that the host delivered a probe request to `agent` now; it replaces any earlier
   * request of this epoch.
   */
  async requestProbe(agent: string, request: ProbeRequest): Promise<ProbeStatus> {
    nonEmptyString('agent', agent);
    const nonce = nonEmptyString('nonce', request?.nonce);
    const launchId = nonEmptyString('launchId', request?.launchId);
    // The request is delivered "now", so unlike a handler's write it belongs to whatever epoch is
    // current: a fleet store that refuses it as stale has just taught us the new one; try that.
    for (let attempt = 1; ; attempt++) {
      const epoch = this.#epoch;
      const requestedAt = this.#clock.now();
      const probe: ProbeRecord = { nonce, launchId, epoch, requestedAt, fulfilledAt: undefined };
      try {
        await this.#store.update(epoch, agent, (current) => ({ ...(current ?? emptyRecord(epoch, agent)), probe }));
        return probeStatus(probe, requestedAt);
      } catch (error) {
        if (!isStaleEpochError(error) || attempt >= 3 || this.#epoch === epoch) throw error;
      }
    }
  }

  /**
   * Records a passive success: a tool handler for `agent` completed. Keeps the probe fields of
   * this epoch. Resolves `false` (nothing written) when `origin.epoch` is no longer current.
   */
  async recordSuccess(agent: string, origin: WriteOrigin = {}): Promise<boolean> {
    nonEmptyString('agent', agent);
    const epoch = origin.epoch ?? this.#epoch;
    if (epoch !== this.#epoch) return false;
    const observedAt = this.#clock.now();
    try {
      await this.#store.update(epoch, agent, (current) => {
        const base = current ?? emptyRecord(epoch, agent);
        return { ...base, observedAt: latest(base.observedAt, observedAt) };
      });
    } catch (error) {
      if (isStaleEpochError(error)) return false;
      throw error;
    }
    return true;
  }

  /**
   * Records a completed `mcp_probe`: a success that also stores the nonce and launch id, and
   * fulfils the outstanding request only when epoch, launch id and nonce all match it.
   * Resolves `undefined` (nothing written) when `origin.epoch` is no longer current.
   */
  async recordProbe(agent: string, probe: ProbeRequest, origin: WriteOrigin = {}): Promise<ProbeReply | undefined> {
    nonEmptyString('agent', agent);
    const epoch = origin.epoch ?? this.#epoch;
    if (epoch !== this.#epoch) return undefined;
    const observedAt = this.#clock.now();
    const fulfil = (current: BindRecord | undefined): BindRecord => {
      const base = current ?? emptyRecord(epoch, agent);
      const pending = base.probe;
      const matches =
        pending !== undefined &&
        pending.fulfilledAt === undefined &&
        pending.epoch === epoch &&
        pending.launchId === probe.launchId &&
        pending.nonce === probe.nonce;
      return {
        ...base,
        observedAt: latest(base.observedAt, observedAt),
        lastNonce: probe.nonce,
        lastLaunchId: probe.launchId,
        probe: matches ? { ...pending, fulfilledAt: observedAt } : pending,
      };
    };
    try {
      await this.#store.update(epoch, agent, fulfil);
    } catch (error) {
      if (isStaleEpochError(error)) return undefined;
      throw error;
    }
    return Object.freeze({ agent, nonce: probe.nonce, launchId: probe.launchId, gatewayEpoch: epoch, observedAt });
  }

  /** The bind status of `agent` in the current epoch (a frozen snapshot). */
  async status(agent: string): Promise<BindStatus> {
    nonEmptyString('agent', agent);
    const epoch = this.#epoch;
    const record = await this.#store.get(epoch, agent);
    const now = this.#clock.now();
    // A shared store could hand back a record of the wrong epoch; never let it bind.
    const current = record !== undefined && record.epoch === epoch ? record : undefined;
    const observedAt = current?.observedAt;
    return Object.freeze({
      agent,
      bound: observedAt !== undefined,
      epoch,
      lastNonce: current?.lastNonce,
      lastLaunchId: current?.lastLaunchId,
      observedAt,
      ageMs: observedAt === undefined ? undefined : Math.max(0, now - observedAt),
      probe: current?.probe === undefined ? undefined : probeStatus(current.probe, now),
    });
  }
}

/**
 * `observedAt` only moves forward. In one process that changes nothing; in a fleet a write can be
 * applied late (buffered while the store was unreachable, or retried after a timeout whose first
 * attempt did land) or come from a replica whose clock is a little behind.
 */
function latest(previous: number | undefined, next: number): number {
  return previous === undefined || next > previous ? next : previous;
}

function probeStatus(probe: ProbeRecord, now: number): ProbeStatus {
  return Object.freeze({
    ...probe,
    fulfilled: probe.fulfilledAt !== undefined,
    ageMs: Math.max(0, now - probe.requestedAt),
  });
}
