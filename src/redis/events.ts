/**
 * What a Redis coordinator reports: typed events (transitions, never one per write) and a stats
 * snapshot with cumulative counters.
 */

/** Events of a Redis coordinator, by name. */
export interface RedisCoordinatorEvents {
  /** The command connection was lost (or could not be re-established); `error` says why. */
  'redis:down': { readonly error: string };
  /** The command connection is ready again. */
  'redis:up': Record<string, never>;
  /**
   * This replica moved to another epoch. `source`: `bump` (this replica bumped), `fleet` (another
   * replica bumped), `restored` (Redis had lost the epoch and this replica's was put back).
   */
  'epoch:changed': { readonly epoch: string; readonly previous: string; readonly source: 'bump' | 'fleet' | 'restored' };
  /** This replica holds the watchdog lease, with fencing token `token`. */
  'lease:acquired': { readonly token: number };
  /**
   * This replica no longer holds the lease: `expired` (not renewed in time by its own clock),
   * `taken` (Redis says it is no longer ours), `released` (stopped).
   */
  'lease:lost': { readonly token: number; readonly reason: 'expired' | 'taken' | 'released' };
  /** Bind writes started being buffered (Redis unreachable); `pending` writes are held. */
  'writes:buffered': { readonly pending: number };
  /** The buffer drained: every held write was written (or found stale). */
  'writes:flushed': { readonly flushed: number; readonly stale: number };
  /** Buffered writes were dropped because the buffer was full (`dropped` since the last event). */
  'writes:dropped': { readonly dropped: number; readonly pending: number };
}

/** Cumulative counters of bind writes. */
export interface WriteStats {
  /** Written straight away (inside the tool call). */
  direct: number;
  /** Held in the buffer because Redis was unreachable or slower than `writeTimeoutMs`. */
  buffered: number;
  /** Buffered writes that were written later. */
  flushed: number;
  /** Writes refused because their epoch was no longer the fleet's (directly or at flush time). */
  stale: number;
  /** Buffered writes dropped because the buffer was full. */
  dropped: number;
  /** Writes that failed for another reason (reported to `onError`). */
  failed: number;
  /** Version conflicts with another writer, each resolved by re-applying the change. */
  conflicts: number;
  /** Writes held in the buffer right now. */
  pending: number;
}

/** A snapshot of one replica's view of the fleet. */
export interface RedisCoordinatorStats {
  /** This replica's id. */
  readonly replicaId: string;
  /** Whether the command connection is ready. */
  readonly connected: boolean;
  /** The epoch this replica is on. */
  readonly epoch: string;
  /** Whether this replica holds a valid watchdog lease. */
  readonly leader: boolean;
  /** The fencing token of the lease held, if any. */
  readonly leaseToken: number | undefined;
  /** The bind writes. */
  readonly writes: Readonly<WriteStats>;
}

/** One entry of the fleet's recovery log (newest first). */
export interface RecoveryLogEntry {
  /** The claim (reservation) id. */
  readonly claim: string;
  /** `claimed` when the slot was reserved; `recovered` / `released` once the hook succeeded / failed. */
  readonly outcome: 'claimed' | 'recovered' | 'released';
  /** The agent. */
  readonly agent: string;
  /** The replica that claimed it. */
  readonly replica: string;
  /** The lease's fencing token the claim was made under. */
  readonly token: number;
  /** The replica's wall clock (ms) when it wrote the entry. */
  readonly at: number;
  /** The watchdog's reason (claims only). */
  readonly reason?: string;
}
