/**
 * The fleet's epoch as one replica follows it.
 *
 * The epoch id is `<seq>-<random>`: `seq` comes from `INCR`, so epochs are ordered and a replica
 * can tell a newer epoch from an older one; the random part keeps ids unique even if Redis loses
 * its data and the counter starts again (an old session id must never become current by accident).
 *
 * A replica learns of a bump three ways, fastest first: the bump's pub/sub announcement, a ledger
 * write refused as stale (the refusal names the current epoch), and a periodic re-read (which also
 * restores the epoch if Redis lost it). Moves only go forward, except that Redis's word after a
 * sync is final.
 */
import { randomBytes } from 'node:crypto';
import type { Clock, TimerHandle } from '../clock.js';
import { McpSupervisorError, describeError } from '../errors.js';
import type { FleetEpochs } from '../gateway/fleet.js';
import { withDeadline, type RedisLink } from './connection.js';
import { epochSeq, type FleetKeys } from './keys.js';

const EPOCH_ID = /^\d{1,20}-[0-9a-f]{1,40}$/;

function suffix(): string {
  return randomBytes(6).toString('hex');
}

/** Runs the sync script: the fleet's epoch (created or restored as needed) and how it was found. */
async function syncEpoch(link: RedisLink, keys: FleetKeys, known: string): Promise<{ epoch: string; how: string }> {
  const reply = await link.run((c) => c.epochSync([keys.epoch, keys.epochSeq, keys.ledgers], [known, suffix(), keys.ledgerPrefix]));
  if (!Array.isArray(reply) || typeof reply[0] !== 'string' || !EPOCH_ID.test(reply[0])) {
    throw new Error(`unexpected epoch sync reply ${JSON.stringify(reply)}`);
  }
  return { epoch: reply[0], how: String(reply[1]) };
}

/** Settings of {@link RedisEpochs}. */
export interface RedisEpochsOptions {
  link: RedisLink;
  keys: FleetKeys;
  clock: Clock;
  refreshMs: number;
  onChange: (epoch: string, previous: string, source: 'bump' | 'fleet' | 'restored') => void;
  onError: (error: unknown, context: string) => void;
}

/** {@link FleetEpochs} on Redis; see the module comment. */
export class RedisEpochs implements FleetEpochs {
  readonly #options: RedisEpochsOptions;
  readonly #listeners = new Set<(epoch: string, previous: string) => void>();
  #current: string;
  #syncing: Promise<void> | undefined;
  #timer: TimerHandle | undefined;
  #stopped = false;

  private constructor(options: RedisEpochsOptions, initial: string) {
    this.#options = options;
    this.#current = initial;
  }

  /** Reads (or creates) the fleet's epoch, then follows it. */
  static async open(options: RedisEpochsOptions): Promise<RedisEpochs> {
    const { epoch } = await syncEpoch(options.link, options.keys, '');
    const epochs = new RedisEpochs(options, epoch);
    await withDeadline(
      options.link.subscriber.subscribe(options.keys.epochChannel, (message: string) => epochs.offer(message)),
      options.link.commandTimeoutMs,
    );
    epochs.#schedule();
    return epochs;
  }

  /** {@inheritDoc FleetEpochs.current} */
  get current(): string {
    return this.#current;
  }

  /** {@inheritDoc FleetEpochs.subscribe} */
  subscribe(listener: (epoch: string, previous: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** {@inheritDoc FleetEpochs.bump} */
  async bump(): Promise<string> {
    const { link, keys } = this.#options;
    let reply: unknown;
    try {
      reply = await link.run((c) => c.epochBump([keys.epoch, keys.epochSeq, keys.ledgers], [this.#current, suffix(), keys.ledgerPrefix, keys.epochChannel]));
    } catch (error) {
      throw new McpSupervisorError(
        'SERVER_UNREACHABLE',
        `Could not bump the fleet's gateway epoch: Redis at ${link.where} did not answer (${describeError(error)}). Nothing changed; try again.`,
        { data: { component: 'redis' }, cause: error },
      );
    }
    if (typeof reply !== 'string' || !EPOCH_ID.test(reply)) throw new Error(`unexpected epoch bump reply ${JSON.stringify(reply)}`);
    this.#adopt(reply, 'bump');
    return reply;
  }

  /** An epoch announced by another replica: adopted only if newer. */
  offer(epoch: string): void {
    if (EPOCH_ID.test(epoch) && epochSeq(epoch) > epochSeq(this.#current)) this.#adopt(epoch, 'fleet');
  }

  /**
   * A write was refused in favour of `current` (`''`: Redis has no epoch). A newer epoch is
   * adopted at once; anything else means Redis lost or regressed the epoch: re-sync (restore).
   */
  refusedFor(current: string): void {
    if (EPOCH_ID.test(current) && epochSeq(current) > epochSeq(this.#current)) this.#adopt(current, 'fleet');
    else void this.resync();
  }

  /** Re-reads the fleet's epoch (single-flight); restores ours if Redis lost it. Never rejects. */
  resync(): Promise<void> {
    if (this.#syncing !== undefined) return this.#syncing;
    const syncing = (async () => {
      try {
        const { epoch, how } = await syncEpoch(this.#options.link, this.#options.keys, this.#current);
        if (how === 'restored') {
          // Redis had lost it (or held an older one): our epoch is the fleet's again. Not a change
          // for this replica, but worth an event for whoever watches the fleet.
          this.#options.onChange(epoch, epoch, 'restored');
        }
        this.#adopt(epoch, 'fleet');
      } catch (error) {
        // Redis unreachable: the connection's own events report that; the next poll retries.
        if (this.#options.link.up) this.#options.onError(error, 'reading the fleet epoch');
      }
    })().finally(() => {
      this.#syncing = undefined;
    });
    this.#syncing = syncing;
    return syncing;
  }

  #adopt(epoch: string, source: 'bump' | 'fleet'): void {
    const previous = this.#current;
    if (epoch === previous) return;
    this.#current = epoch;
    for (const listener of [...this.#listeners]) {
      try {
        listener(epoch, previous);
      } catch (error) {
        this.#options.onError(error, 'an epoch listener');
      }
    }
    this.#options.onChange(epoch, previous, source);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = this.#options.clock.setTimeout(() => {
      void this.resync().finally(() => this.#schedule());
    }, this.#options.refreshMs);
  }

  /** Stops following the fleet (the subscriber connection is closed by its owner). */
  stop(): void {
    this.#stopped = true;
    this.#options.clock.clearTimeout(this.#timer);
  }
}
