/**
 * The era verdicts of a host's servers, keyed by server fingerprint (what defines the connection,
 * the protocol setting included), so a server is probed once: discovery and sessions read the
 * verdict before they connect and record what they negotiated. With a file, verdicts survive a
 * restart of the host.
 *
 * Why a small JSON file and not a store library: a few hundred bytes per server, written only when
 * a verdict changes, read once at start; an atomic rename is all the durability it needs.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { serverFingerprint } from '../config/fingerprint.js';
import type { ServerConfig } from '../config/types.js';
import type { EraVerdict } from './era.js';

/** The file's format version: a file of another version is ignored (and rewritten on the next verdict). */
const FORMAT = 1;

/** At most this many verdicts are kept (the oldest go first): a file cannot grow without bound. */
const MAX_ENTRIES = 10_000;

/** What the host cache counts, for stats. */
export interface EraCacheStats {
  /** Verdicts held. */
  entries: number;
  /** Verdicts dropped because a server refused the era they named. */
  stale: number;
  /** Why the file could not be read or written, when it could not (the cache then works in memory). */
  fileError?: string;
}

function isVerdict(value: unknown): value is EraVerdict {
  if (typeof value !== 'object' || value === null) return false;
  const era = (value as { era?: unknown }).era;
  if (era === 'legacy') return true;
  const discover = (value as { discover?: unknown }).discover;
  return era === 'modern' && typeof discover === 'object' && discover !== null && Array.isArray((discover as { supportedVersions?: unknown }).supportedVersions);
}

/** The host's era verdicts (see the module comment). */
export class EraCache {
  private readonly verdicts = new Map<string, EraVerdict>();
  private stale = 0;
  private fileError: string | undefined;

  /** @param file where verdicts persist across restarts of the host; absent: in memory only. */
  constructor(private readonly file?: string) {
    if (file !== undefined) this.load(file);
  }

  /** The verdict of `server`, if one is known. */
  get(server: ServerConfig): EraVerdict | undefined {
    return this.verdicts.get(serverFingerprint(server));
  }

  /** Records what a connection to `server` negotiated. */
  learn(server: ServerConfig, verdict: EraVerdict | undefined): void {
    if (verdict === undefined) return;
    const key = serverFingerprint(server);
    const known = this.verdicts.get(key);
    if (known !== undefined && JSON.stringify(known) === JSON.stringify(verdict)) return;
    this.verdicts.delete(key);
    this.verdicts.set(key, verdict);
    if (this.verdicts.size > MAX_ENTRIES) this.verdicts.delete(this.verdicts.keys().next().value!);
    this.save();
  }

  /** Drops the verdict of `server`: the server refused the era it named. */
  forget(server: ServerConfig): void {
    if (!this.verdicts.delete(serverFingerprint(server))) return;
    this.stale++;
    this.save();
  }

  stats(): EraCacheStats {
    return { entries: this.verdicts.size, stale: this.stale, ...(this.fileError === undefined ? {} : { fileError: this.fileError }) };
  }

  private load(file: string): void {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.fileError = `could not read ${file}: ${(error as Error).message}`;
      return;
    }
    try {
      const parsed = JSON.parse(text) as { format?: unknown; verdicts?: unknown };
      if (parsed.format !== FORMAT || typeof parsed.verdicts !== 'object' || parsed.verdicts === null) return;
      for (const [key, verdict] of Object.entries(parsed.verdicts)) if (isVerdict(verdict)) this.verdicts.set(key, verdict);
    } catch {
      // A damaged file costs one probe per server, nothing else: it is rewritten on the next verdict.
    }
  }

  private save(): void {
    if (this.file === undefined) return;
    const temporary = `${this.file}.${process.pid}.tmp`;
    try {
      mkdirSync(path.dirname(this.file), { recursive: true });
      writeFileSync(temporary, JSON.stringify({ format: FORMAT, verdicts: Object.fromEntries(this.verdicts) }));
      renameSync(temporary, this.file);
      this.fileError = undefined;
    } catch (error) {
      this.fileError = `could not write ${this.file}: ${(error as Error).message}`;
    }
  }
}
