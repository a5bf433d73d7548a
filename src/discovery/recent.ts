/**
 * Ready discovery results remembered for sharing: offered for `reuseForMs` to profiles that have
 * not been given them yet. A profile never gets back a result it was given (its own re-discoveries
 * always ask the server), an expired result is dropped on sight, and insertion order is age order,
 * so expired results are swept from the front.
 */
import type { Clock } from '../clock.js';
import type { SettledOutcome } from './types.js';

interface Recent {
  readonly outcome: SettledOutcome;
  readonly at: number;
  /** Profiles that were given this result (they re-discover for themselves). */
  readonly seenBy: Set<string>;
}

/** The remembered results, by sharing key. */
export class RecentResults {
  private readonly results = new Map<string, Recent>();

  constructor(
    private readonly reuseForMs: number,
    private readonly clock: Clock,
  ) {}

  /** The result for `shareKey` if `key` may use it now (and records that it did). */
  take(shareKey: string, key: string): SettledOutcome | undefined {
    const recent = this.results.get(shareKey);
    if (!recent) return undefined;
    if (this.clock.now() - recent.at > this.reuseForMs) {
      this.results.delete(shareKey);
      return undefined;
    }
    if (recent.seenBy.has(key)) return undefined;
    recent.seenBy.add(key);
    return recent.outcome;
  }

  /** Remembers a ready result that the profiles in `seenBy` already have. No-op when sharing in time is off. */
  remember(shareKey: string, outcome: SettledOutcome, seenBy: Set<string>): void {
    if (this.reuseForMs <= 0) return;
    const now = this.clock.now();
    this.results.delete(shareKey);
    this.results.set(shareKey, { outcome, at: now, seenBy });
    for (const [oldKey, old] of this.results) {
      if (now - old.at <= this.reuseForMs) break;
      this.results.delete(oldKey);
    }
  }

  /** Forgets one result (its server announced new lists). */
  forget(shareKey: string): void {
    this.results.delete(shareKey);
  }

  get size(): number {
    return this.results.size;
  }

  clear(): void {
    this.results.clear();
  }
}
