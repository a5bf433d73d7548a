/**
 * A per-server circuit breaker: it opens after `failureThreshold` consecutive infrastructure
 * failures, lets exactly one probe through once `cooldownMs` has passed (half-open), re-arms when
 * that probe fails, and closes on a success or on any successful session initialisation.
 *
 * State is a discriminated union and every transition goes through {@link CircuitBreaker.moveTo},
 * which reports it, so a host can log "breaker open / half-open / closed" without polling.
 */
import type { Clock } from '../clock.js';

/** Breaker tuning. */
export interface BreakerOptions {
  /** Consecutive infrastructure failures that open the breaker. Default 5. */
  failureThreshold: number;
  /** Time the breaker stays open before one probe is let through (ms). Default 30 000. */
  cooldownMs: number;
}

/** The breaker's state. */
export type BreakerState =
  | { kind: 'closed'; failures: number }
  | { kind: 'open'; openedAt: number; probeAt: number }
  | { kind: 'half-open'; probeInFlight: boolean };

/** Whether a call may go ahead. */
export type Admission = { allowed: true; probe: boolean } | { allowed: false; probeAt: number };

/** The circuit breaker of one server. */
export class CircuitBreaker {
  private current: BreakerState = { kind: 'closed', failures: 0 };

  constructor(
    private readonly options: BreakerOptions,
    private readonly clock: Clock,
    private readonly onTransition: (to: BreakerState['kind'], state: BreakerState) => void = () => undefined,
  ) {}

  /** The current state (a fresh copy). */
  get state(): BreakerState {
    return { ...this.current };
  }

  /** Consecutive failures counted while closed (the threshold while open). */
  get failures(): number {
    return this.current.kind === 'closed' ? this.current.failures : this.options.failureThreshold;
  }

  private moveTo(next: BreakerState): void {
    const changed = next.kind !== this.current.kind;
    this.current = next;
    if (changed) this.onTransition(next.kind, { ...next });
  }

  /** Asks to make a call. In half-open state only one caller (the probe) is let through. */
  admit(): Admission {
    const state = this.current;
    if (state.kind === 'closed') return { allowed: true, probe: false };
    if (state.kind === 'open') {
      if (this.clock.now() < state.probeAt) return { allowed: false, probeAt: state.probeAt };
      this.moveTo({ kind: 'half-open', probeInFlight: true });
      return { allowed: true, probe: true };
    }
    if (state.probeInFlight) return { allowed: false, probeAt: this.clock.now() };
    this.current = { kind: 'half-open', probeInFlight: true };
    return { allowed: true, probe: true };
  }

  /** A call (or ping) succeeded: close. */
  recordSuccess(): void {
    this.moveTo({ kind: 'closed', failures: 0 });
  }

  /** An infrastructure failure: count it, open at the threshold, re-arm a failed probe. */
  recordFailure(): void {
    const state = this.current;
    const now = this.clock.now();
    if (state.kind === 'closed') {
      const failures = state.failures + 1;
      if (failures >= this.options.failureThreshold) this.moveTo({ kind: 'open', openedAt: now, probeAt: now + this.options.cooldownMs });
      else this.current = { kind: 'closed', failures };
      return;
    }
    this.moveTo({ kind: 'open', openedAt: now, probeAt: now + this.options.cooldownMs });
  }

  /** The probe ended without a verdict (no live session: a reconnect was signalled instead). */
  releaseProbe(): void {
    if (this.current.kind === 'half-open') this.current = { kind: 'half-open', probeInFlight: false };
  }

  /**
   * A connect attempt failed. Only a half-open breaker cares: its probe found no session and
   * signalled this reconnect, so the failure is the probe's verdict and re-arms the cooldown.
   * (While closed, connect failures are counted per call, not per background attempt.)
   */
  connectFailed(): void {
    if (this.current.kind === 'half-open') this.recordFailure();
  }

  /** A session was initialised successfully, on any transport: the server is back. */
  sessionEstablished(): void {
    if (this.current.kind !== 'closed') this.moveTo({ kind: 'closed', failures: 0 });
  }
}
