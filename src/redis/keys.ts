/**
 * The fleet's key layout in Redis.
 *
 * Every key starts with the hash tag `{prefix}`, so the whole fleet lives in one slot: a Lua
 * script may touch any of them atomically (the epoch bump purges old ledgers whose names it
 * derives), and a clustered deployment keeps them together.
 */

/** Names of every key (and the pub/sub channel) of one fleet. */
export interface FleetKeys {
  /** The current epoch id, `<seq>-<random>`. */
  readonly epoch: string;
  /** The epoch counter (`INCR`). */
  readonly epochSeq: string;
  /** The set of epoch ids that have a ledger hash (what a bump purges). */
  readonly ledgers: string;
  /** Prefix of the ledger hashes: `ledgerPrefix + epoch`. */
  readonly ledgerPrefix: string;
  /** The watchdog lease: `<token>:<nonce>:<replicaId>`, with a TTL. */
  readonly lease: string;
  /** The lease counter (`INCR` on every acquisition: the fencing token). */
  readonly leaseSeq: string;
  /** The fleet-wide minimum recovery interval: present (with a TTL) while it runs. */
  readonly interval: string;
  /** Prefix of the per-agent grace keys: `gracePrefix + agent`. */
  readonly gracePrefix: string;
  /** A capped list of recent recovery claims and their outcomes (JSON, newest first). */
  readonly log: string;
  /** Pub/sub channel on which bumps announce the new epoch. */
  readonly epochChannel: string;
}

/** Where the records of `epoch` are kept. */
export function ledgerKey(keys: FleetKeys, epoch: string): string {
  return `${keys.ledgerPrefix}${epoch}`;
}

/** The grace key of `agent`. */
export function graceKey(keys: FleetKeys, agent: string): string {
  return `${keys.gracePrefix}${agent}`;
}

/** The key layout of the fleet named `prefix` (validated by the caller). */
export function fleetKeys(prefix: string): FleetKeys {
  const base = `{${prefix}}`;
  return Object.freeze({
    epoch: `${base}:epoch`,
    epochSeq: `${base}:epoch:seq`,
    ledgers: `${base}:ledgers`,
    ledgerPrefix: `${base}:ledger:`,
    lease: `${base}:lease:watchdog`,
    leaseSeq: `${base}:lease:watchdog:seq`,
    interval: `${base}:recovery:interval`,
    gracePrefix: `${base}:recovery:grace:`,
    log: `${base}:recovery:log`,
    epochChannel: `${base}:epoch:changed`,
  });
}

/** The counter part of an epoch id (`0` for ids that do not start with one). */
export function epochSeq(epoch: string): number {
  const match = /^(\d+)-/.exec(epoch);
  return match === null ? 0 : Number(match[1]);
}
