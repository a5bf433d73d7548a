/**
 * Bind writes held while Redis cannot be reached, bounded.
 *
 * A write is a pure change of one record (the ledger's `mutate`), so the writes held for one
 * (epoch, agent) are kept as a chain, applied in order to whatever Redis holds when they are
 * finally written — never replayed against a stale copy. While a key is being written, later
 * writes of it wait behind it (a new entry), so a key's writes always land in the order they were
 * made.
 *
 * The bound counts writes held, not keys: when it is exceeded, the key that has waited longest
 * is dropped with all its writes. Its agent is the one most likely to have written again since.
 * Writes being written count as held until their outcome is known.
 */
import type { BindRecord } from '../gateway/store.js';

/** A change of one record. */
export type Mutation = (current: BindRecord | undefined) => BindRecord;

/** The writes held for one (epoch, agent). */
export interface Pending {
  readonly key: string;
  readonly epoch: string;
  readonly agent: string;
  /** The writes, oldest first. */
  readonly chain: Mutation[];
}

/** Applies `chain` in order to `current`. */
export function applyChain(chain: readonly Mutation[], current: BindRecord | undefined): BindRecord | undefined {
  let record = current;
  for (const mutate of chain) record = mutate(record);
  return record;
}

/** The key of one record. */
export function recordKey(epoch: string, agent: string): string {
  return `${epoch}\u0000${agent}`;
}

/** See the module comment. */
export class WriteBuffer {
  readonly #max: number;
  readonly #onDrop: (count: number) => void;
  /** Insertion-ordered: the first entry has waited longest. */
  readonly #pending = new Map<string, Pending>();
  readonly #inFlight = new Map<string, Pending>();
  /** Writes held or being written. */
  #size = 0;

  constructor(max: number, onDrop: (count: number) => void) {
    this.#max = max;
    this.#onDrop = onDrop;
  }

  /** Writes not yet written: held, or being written right now. */
  get size(): number {
    return this.#size;
  }

  /** Whether a new write of `key` must queue behind earlier ones. */
  holds(key: string): boolean {
    return this.#pending.has(key) || this.#inFlight.has(key);
  }

  /**
   * Every write of `key` not known to be in Redis yet, oldest first (for read-your-writes on a
   * read), if any. One being written may already have landed: the ledger's changes are
   * idempotent, so applying it once more changes nothing.
   */
  chainOf(key: string): readonly Mutation[] | undefined {
    const flying = this.#inFlight.get(key)?.chain;
    const held = this.#pending.get(key)?.chain;
    if (flying === undefined) return held;
    return held === undefined ? flying : [...flying, ...held];
  }

  /** Holds one write. */
  add(epoch: string, agent: string, mutate: Mutation): void {
    const key = recordKey(epoch, agent);
    const entry = this.#pending.get(key);
    if (entry !== undefined) entry.chain.push(mutate);
    else this.#pending.set(key, { key, epoch, agent, chain: [mutate] });
    this.#size++;
    this.#evict();
  }

  /** Takes the longest-waiting entry out to be written; `undefined` when none is ready. */
  take(): Pending | undefined {
    for (const entry of this.#pending.values()) {
      this.#pending.delete(entry.key);
      this.#inFlight.set(entry.key, entry);
      return entry;
    }
    return undefined;
  }

  /** The entry was written (or refused for good): later writes of its key may go. */
  done(entry: Pending): void {
    this.#inFlight.delete(entry.key);
    this.#size -= entry.chain.length;
  }

  /** The entry could not be written: hold it again, ahead of writes of its key made meanwhile. */
  restore(entry: Pending): void {
    this.#inFlight.delete(entry.key);
    const later = this.#pending.get(entry.key);
    this.#pending.delete(entry.key);
    this.#pending.set(entry.key, { ...entry, chain: later === undefined ? entry.chain : [...entry.chain, ...later.chain] });
    this.#evict();
  }

  /** Drops everything (on close); returns how many writes were held. */
  clear(): number {
    const held = this.#size;
    this.#pending.clear();
    this.#inFlight.clear();
    this.#size = 0;
    return held;
  }

  #evict(): void {
    let dropped = 0;
    while (this.#size > this.#max) {
      const oldest = this.#pending.values().next().value;
      if (oldest === undefined) break;
      this.#pending.delete(oldest.key);
      this.#size -= oldest.chain.length;
      dropped += oldest.chain.length;
    }
    if (dropped > 0) this.#onDrop(dropped);
  }
}
