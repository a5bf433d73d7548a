/**
 * The fleet's recovery rate limit and post-recovery grace, held in Redis as keys with a TTL: the
 * interval key exists while the fleet-wide minimum interval runs, an agent's grace key while its
 * grace runs. Redis's own expiry is the one clock, so replicas' wall clocks never have to agree.
 *
 * The claim (`RECOVERY_CLAIM`) is the only way to the host's recovery hook in a fleet. It checks,
 * in one atomic step, that the caller's lease is still the lease (fencing), that no interval runs
 * and that the agent is not in grace, and reserves both; two replicas can therefore never both
 * recover inside the interval, and an ex-leader can never recover at all. Every claim and its
 * outcome is appended to a capped log, for operators and tests.
 */
import { randomBytes } from 'node:crypto';
import type { ClaimOutcome, FleetRecoveryView, LeaseFence, RecoveryClaim, RecoveryLimiter, RecoveryTimings } from '../gateway/fleet.js';
import type { RedisLink } from './connection.js';
import type { RecoveryLogEntry } from './events.js';
import { graceKey, type FleetKeys } from './keys.js';
import { leaseValueOf } from './lease.js';

/** A claim as this module issues it (the log needs the token). */
interface IssuedClaim extends RecoveryClaim {
  readonly token: number;
}

const ms = (value: number): string => String(Math.max(0, Math.ceil(value)));

/** {@link RecoveryLimiter} on Redis; see the module comment. */
export class RedisRecoveries implements RecoveryLimiter {
  readonly #link: RedisLink;
  readonly #keys: FleetKeys;
  readonly #replicaId: string;
  readonly #logSize: number;

  constructor(link: RedisLink, keys: FleetKeys, replicaId: string, logSize: number) {
    this.#link = link;
    this.#keys = keys;
    this.#replicaId = replicaId;
    this.#logSize = logSize;
  }

  /** {@inheritDoc RecoveryLimiter.view} */
  async view(agents: readonly string[]): Promise<FleetRecoveryView> {
    // Issued in the same tick, so node-redis pipelines them: one round trip.
    const [interval, ...graces] = await this.#link.run((c) =>
      Promise.all([c.pTTL(this.#keys.interval), ...agents.map((agent) => c.pTTL(graceKey(this.#keys, agent)))]),
    );
    const graceRemainingMs = new Map<string, number>();
    agents.forEach((agent, index) => {
      const left = Number(graces[index]);
      if (left > 0) graceRemainingMs.set(agent, left);
    });
    const left = Number(interval);
    return { intervalRemainingMs: left > 0 ? left : undefined, graceRemainingMs };
  }

  /** {@inheritDoc RecoveryLimiter.claim} */
  async claim(agent: string, fence: LeaseFence, timings: RecoveryTimings, reason: string): Promise<ClaimOutcome> {
    const value = leaseValueOf(fence);
    if (value === undefined) return { granted: false, why: 'fenced', remainingMs: 0 };
    const claim: IssuedClaim = Object.freeze({ agent, id: `${fence.token}:${this.#replicaId}:${randomBytes(6).toString('hex')}`, token: fence.token });
    const args = [value, claim.id, ms(timings.minRecoveryIntervalMs), ms(timings.graceMs), this.#entry(claim, 'claimed', reason), String(this.#logSize)];
    const reply = await this.#link.run((c) => c.recoveryClaim([this.#keys.lease, this.#keys.interval, graceKey(this.#keys, agent), this.#keys.log], args));
    const [status, remaining] = Array.isArray(reply) ? reply : [];
    if (status === 'granted') return { granted: true, claim };
    if (status === 'fenced' || status === 'interval' || status === 'grace') return { granted: false, why: status, remainingMs: Number(remaining) || 0 };
    throw new Error(`unexpected recovery claim reply ${JSON.stringify(reply)}`);
  }

  /** {@inheritDoc RecoveryLimiter.commit} */
  async commit(claim: RecoveryClaim, timings: RecoveryTimings): Promise<void> {
    const args = [claim.id, ms(timings.minRecoveryIntervalMs), ms(timings.graceMs), this.#entry(claim, 'recovered'), String(this.#logSize)];
    await this.#link.run((c) => c.recoveryCommit([this.#keys.interval, graceKey(this.#keys, claim.agent), this.#keys.log], args));
  }

  /** {@inheritDoc RecoveryLimiter.release} */
  async release(claim: RecoveryClaim): Promise<void> {
    const args = [claim.id, this.#entry(claim, 'released'), String(this.#logSize)];
    await this.#link.run((c) => c.recoveryRelease([this.#keys.interval, graceKey(this.#keys, claim.agent), this.#keys.log], args));
  }

  /** The newest `limit` entries of the fleet's recovery log, newest first. */
  async log(limit = this.#logSize): Promise<RecoveryLogEntry[]> {
    const raw = await this.#link.run((c) => c.lRange(this.#keys.log, 0, Math.max(0, limit - 1)));
    const entries: RecoveryLogEntry[] = [];
    for (const line of raw) {
      try {
        entries.push(Object.freeze(JSON.parse(String(line)) as RecoveryLogEntry));
      } catch {
        // Not ours (written by hand?): skip it rather than fail the whole read.
      }
    }
    return entries;
  }

  #entry(claim: RecoveryClaim, outcome: RecoveryLogEntry['outcome'], reason?: string): string {
    const entry: RecoveryLogEntry = {
      claim: claim.id,
      outcome,
      agent: claim.agent,
      replica: this.#replicaId,
      token: (claim as Partial<IssuedClaim>).token ?? 0,
      at: Date.now(),
      ...(reason === undefined ? {} : { reason }),
    };
    return JSON.stringify(entry);
  }
}
