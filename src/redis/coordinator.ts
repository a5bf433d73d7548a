/**
 * `redisCoordinator`: one replica's membership of a gateway fleet coordinated through Redis. It
 * owns the connections and wires the parts together — the fleet epoch (`epoch.ts`), the bind
 * ledger (`store.ts`), the watchdog lease (`lease.ts`) and the recovery rate limit
 * (`recoveries.ts`) — and reports on them (typed events, `stats()`).
 *
 * It resolves once Redis was reached and the fleet's epoch is known (the gateway needs one to mint
 * session ids), and rejects after `connectTimeoutMs` otherwise. After that, Redis may come and go:
 * the gateway keeps serving tools, bind writes are buffered within bounds, and the watchdog does
 * nothing without its lease. Design and guarantees: `docs/fleet.md`.
 */
import { TypedEmitter } from '../events.js';
import { describeError, McpSupervisorError } from '../errors.js';
import type { FleetCoordinator, Leadership } from '../gateway/fleet.js';
import { nonNegativeMs } from '../gateway/validate.js';
import { RedisLink } from './connection.js';
import { RedisEpochs } from './epoch.js';
import type { RecoveryLogEntry, RedisCoordinatorEvents, RedisCoordinatorStats, WriteStats } from './events.js';
import { fleetKeys } from './keys.js';
import { RedisLease } from './lease.js';
import { resolveOptions, type RedisCoordinatorOptions } from './options.js';
import { RedisRecoveries } from './recoveries.js';
import { RedisBindStore } from './store.js';

/** A replica's coordinator: pass it to `createGateway` and `createWatchdog` as `coordinator`. */
export interface RedisCoordinator extends FleetCoordinator {
  /** Subscribes to an event; returns an unsubscribe. */
  on<Name extends keyof RedisCoordinatorEvents>(event: Name, listener: (payload: RedisCoordinatorEvents[Name]) => void): () => void;
  /** A snapshot of this replica's view of the fleet. */
  stats(): RedisCoordinatorStats;
  /** The newest entries of the fleet's recovery log (claims and outcomes), newest first. */
  recoveryLog(limit?: number): Promise<RecoveryLogEntry[]>;
  /**
   * Leaves the fleet: releases the lease (another replica takes over at once), writes what is
   * buffered within `commandTimeoutMs` (the rest is counted as dropped), closes the connections.
   * Idempotent; never rejects. Stop the watchdog first, or its lease is released under it.
   */
  close(): Promise<void>;
}

/**
 * Connects this replica to the fleet named `prefix` on Redis. See {@link RedisCoordinatorOptions};
 * rejects with `INVALID_CONFIG` for bad options and `SERVER_UNREACHABLE` when Redis cannot be
 * reached within `connectTimeoutMs`. (Long because it wires the fleet's parts — connection,
 * epoch, store, lease, recoveries — in their start-up order; a failed join leaves no connection open.)
 */
export async function redisCoordinator(options: RedisCoordinatorOptions): Promise<RedisCoordinator> {
  const o = resolveOptions(options);
  const keys = fleetKeys(o.prefix);
  const events = new TypedEmitter<RedisCoordinatorEvents>((error, event) => o.onError(error, `a listener of ${String(event)}`));
  const emit = <Name extends keyof RedisCoordinatorEvents>(event: Name, payload: RedisCoordinatorEvents[Name]): void => events.emit(event, payload);
  const writes: WriteStats = { direct: 0, buffered: 0, flushed: 0, stale: 0, dropped: 0, failed: 0, conflicts: 0, pending: 0 };
  let store: RedisBindStore | undefined;
  let epochs: RedisEpochs | undefined;

  const link = await RedisLink.open(o.target, {
    replicaId: o.replicaId,
    connectTimeoutMs: o.connectTimeoutMs,
    commandTimeoutMs: o.commandTimeoutMs,
    onChange(up, error) {
      if (up) {
        emit('redis:up', {});
        // Back: write what was held, and check the epoch at once (Redis may have lost it).
        store?.kick();
        void epochs?.resync();
      } else {
        emit('redis:down', { error: describeError(error) });
      }
    },
  });

  try {
    epochs = await RedisEpochs.open({
      link,
      keys,
      clock: o.clock,
      refreshMs: o.epochRefreshMs,
      onChange: (epoch, previous, source) => emit('epoch:changed', { epoch, previous, source }),
      onError: o.onError,
    });
  } catch (error) {
    link.destroy();
    throw new McpSupervisorError('SERVER_UNREACHABLE', `Redis at ${link.where} did not answer while joining the fleet (${describeError(error)})`, {
      data: { component: 'redis' },
      cause: error,
    });
  }
  const fleetEpochs = epochs;
  const bindStore = new RedisBindStore({
    link,
    keys,
    epochs: fleetEpochs,
    clock: o.clock,
    writeTimeoutMs: o.writeTimeoutMs,
    maxBufferedWrites: o.maxBufferedWrites,
    flushIntervalMs: o.flushIntervalMs,
    stats: writes,
    emit,
    onError: o.onError,
  });
  store = bindStore;
  const recoveries = new RedisRecoveries(link, keys, o.replicaId, o.recoveryLogSize);
  const leases = new Set<RedisLease>();
  let closing: Promise<void> | undefined;

  const coordinator: RedisCoordinator = {
    replicaId: o.replicaId,
    epochs: fleetEpochs,
    store: bindStore,
    recoveries,
    leadership({ ttlMs }): Leadership {
      const lease = new RedisLease({ link, keys, replicaId: o.replicaId, clock: o.clock, ttlMs: nonNegativeMs('ttlMs', ttlMs, 1), emit, onError: o.onError });
      leases.add(lease);
      return lease;
    },
    on: (event, listener) => events.on(event, listener),
    stats(): RedisCoordinatorStats {
      let fence;
      for (const lease of leases) fence ??= lease.fence();
      return Object.freeze({
        replicaId: o.replicaId,
        connected: link.up,
        epoch: fleetEpochs.current,
        leader: fence !== undefined,
        leaseToken: fence?.token,
        writes: Object.freeze({ ...writes, pending: bindStore.pending }),
      });
    },
    recoveryLog: (limit?: number) => recoveries.log(limit),
    close(): Promise<void> {
      closing ??= (async () => {
        await Promise.all([...leases].map((lease) => lease.stop()));
        fleetEpochs.stop();
        await bindStore.close(o.commandTimeoutMs);
        await link.close(o.commandTimeoutMs);
      })();
      return closing;
    },
  };
  return Object.freeze(coordinator);
}
