/**
 * What to do with a failed attempt of a supervised request — a pure function of facts, so the
 * whole rule is in one table and can be tested row by row.
 *
 * The facts are what the transport recorded ({@link Delivery}) and what is known of the session,
 * never the wording of an error. The rule (docs/ARCHITECTURE.md §7):
 *
 * - a request that provably never reached the server (never written, refused before connecting,
 *   rejected by a 4xx session error) is sent once more on a fresh session — it cannot run twice;
 * - a request that may have run is repeated once only when the tool is read-only or idempotent
 *   (or the host said `replay: 'always'`); otherwise the outcome is uncertain and said so;
 * - a real timeout of a live connection is a timeout; an exit or a lost connection never is;
 * - a call is resent at most once and replayed at most once, so at most two of its attempts can
 *   have run, and only when the tool is safe to repeat.
 */
import type { Delivery } from '../connection/delivery.js';
import { mayHaveRun } from '../connection/delivery.js';

/** How the attempt failed, as far as the error itself tells. */
export type ErrorClass =
  /** The caller's signal aborted it. */
  | 'cancelled'
  /** The SDK's request timeout fired. */
  | 'timeout'
  /** The server answered with a JSON-RPC error (it processed and refused the request). */
  | 'rpc'
  /** Authorization is missing or insufficient (401/403, or the OAuth flow needs the user). */
  | 'auth'
  /** Anything else: the connection closed, the stream broke, the process died, fetch failed. */
  | 'transport';

/** Everything the decision depends on. */
export interface FailureFacts {
  transport: 'stdio' | 'http' | 'sse';
  error: ErrorClass;
  delivery: Delivery;
  /** Stdio: the server process exited (before or during the attempt). */
  exited: boolean;
  /** An earlier attempt was resent because it provably never ran (at most once per call). */
  resent: boolean;
  /** An earlier attempt may have run and was replayed (at most once per call). */
  replayed: boolean;
  /** The tool may be repeated after it may have run. */
  replayable: boolean;
}

/** The decision. `freshSession`: the current session is gone and another must be had first. */
export type Verdict =
  /** Provably not run: send once more. */
  | { action: 'resend'; freshSession: boolean }
  /** May have run, safe to repeat: repeat once. */
  | { action: 'replay'; freshSession: boolean }
  /** May have run, not safe to repeat: say the outcome is uncertain. */
  | { action: 'uncertain'; cause: 'exited' | 'connection' }
  /** Final failure, named by what is known. */
  | { action: 'fail'; reason: FailReason };

/** Why an attempt failed for good. */
export type FailReason =
  | 'cancelled'
  | 'timeout'
  | 'rpc'
  | 'auth'
  /** The HTTP server could not be reached; this request never left. */
  | 'unreachable'
  /** The replay could not reach the server; the first attempt may have run (the tool is safe to repeat). */
  | 'unreachable-after-replay'
  /** The HTTP server rejected the request with a 4xx that is not about its session. */
  | 'rejected'
  /** Stdio: the server exited again right after its restart; the request never ran. */
  | 'exited-again-not-run'
  /** Stdio: the server exited again while the replay ran. */
  | 'exited-again-during-replay'
  /** HTTP: the retry lost its session too, and neither attempt ran. */
  | 'lost-again-not-run'
  /** HTTP: the replay (or a retry that may have run) lost its session or connection too; the tool is safe to repeat. */
  | 'lost-again-maybe-run';

/** Decides what to do with a failed attempt. */
export function decide(facts: FailureFacts): Verdict {
  const { delivery, transport, resent, replayed } = facts;
  if (facts.error === 'cancelled') return { action: 'fail', reason: 'cancelled' };
  // The server no longer knows the session: it did not process the request.
  if (delivery.sessionLost) {
    if (!resent) return { action: 'resend', freshSession: true };
    return { action: 'fail', reason: replayed ? 'lost-again-maybe-run' : 'lost-again-not-run' };
  }
  if (facts.error === 'auth') return { action: 'fail', reason: 'auth' };
  if (facts.error === 'rpc') return { action: 'fail', reason: 'rpc' };

  if (!mayHaveRun(delivery)) {
    if (transport === 'stdio') {
      // Never written: the process was already gone. Its restart is the retry.
      if (facts.exited || delivery.state === 'refused') {
        if (!resent) return { action: 'resend', freshSession: true };
        return { action: 'fail', reason: replayed ? 'exited-again-during-replay' : 'exited-again-not-run' };
      }
      return facts.error === 'timeout' ? { action: 'fail', reason: 'timeout' } : { action: 'fail', reason: 'unreachable' };
    }
    if (delivery.state === 'rejected') return { action: 'fail', reason: 'rejected' };
    if (facts.error === 'timeout') return { action: 'fail', reason: 'timeout' };
    if (delivery.state === 'refused') return { action: 'fail', reason: replayed ? 'unreachable-after-replay' : 'unreachable' };
    if (!resent && !replayed) return { action: 'fail', reason: 'unreachable' };
    return { action: 'fail', reason: replayed ? 'lost-again-maybe-run' : 'lost-again-not-run' };
  }

  // It may have run from here on.
  const died = facts.exited || delivery.streamLost === true || facts.error === 'transport';
  if (facts.error === 'timeout' && !died) return { action: 'fail', reason: 'timeout' };
  // The caller hears how: an exit, or the connection (a lost stream, a reset, a 5xx answer).
  if (!facts.replayable) return { action: 'uncertain', cause: facts.exited ? 'exited' : 'connection' };
  if (replayed) return { action: 'fail', reason: transport === 'stdio' ? 'exited-again-during-replay' : 'lost-again-maybe-run' };
  // Stdio needs a new process; an HTTP session survives a broken answer stream (and if the
  // server lost it, the replay's 404 says so and leads to one resend on a new session).
  return { action: 'replay', freshSession: transport === 'stdio' };
}
