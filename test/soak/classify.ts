/**
 * Which outcome of a tool call is legitimate, given the faults the soak injected around it.
 *
 * A call is identified by its slot (`<profile>/<server>`); the fault log holds, per slot, when its
 * processes were SIGKILLed, when its HTTP server forgot its sessions and when its profile was
 * reloaded. The rules, from docs/ARCHITECTURE.md §7 and the README's error table:
 *
 * | code | legitimate when |
 * | --- | --- |
 * | success | always (respawn + retry, replay of read-only/idempotent tools, 404 re-init) |
 * | `SERVER_EXITED` | stdio, a kill of the slot in [start − 30 s, end] (respawn is lazy: the  |
 * |                 | process may have died any time since the slot's previous call) |
 * | `SERVER_EXITED_AGAIN` | same as `SERVER_EXITED` (a second kill after the respawn); never retryable |
 * | `OUTCOME_UNCERTAIN` | tool neither read-only nor idempotent, and a kill of the slot (stdio) |
 * |                     | or a forget of its HTTP server in [start − 1 s, end] (1 s: the signal |
 * |                     | was sent but its exit not yet observed when the request was written), |
 * |                     | or a reload of the profile overlapping the call; never retryable |
 * | `SERVER_UNREACHABLE` | stdio: a kill as for SERVER_EXITED (accepted with a warning). HTTP: never — the |
 * |                      | fixtures never stop listening; a forgotten session answers 404, which means |
 * |                      | "re-initialise and retry once", and a call dropped in flight may have run, |
 * |                      | while this code says "unreachable … the tool was not run" |
 * | `BREAKER_OPEN`, `RECONNECTING`, `SERVER_PARKED` | any fault of the slot in [start − 60 s, end] |
 * | `CALL_TIMEOUT` | only a *live* server that did not answer: wrong if the slot was killed, |
 * |                | forgotten or reloaded in [start − 1 s, end]; otherwise accepted with a warning |
 * | `CANCELLED` | only when the soak aborted that call's signal |
 * | `HOST_CLOSED` | only once `host.close()` has started (a reload is not a close) |
 * | anything else, a non-McpSupervisorError, a result that does not match the request, | never |
 * | an error naming another server, a `retryable` flag that contradicts its code | |
 */

/** Transport of a slot. */
export type Transport = 'stdio' | 'http';

/** How a call ended. */
export type CallOutcome =
  | { kind: 'ok' }
  /** `isError: true` from the tool itself (expected from `fail` only). */
  | { kind: 'tool-error'; text: string }
  | { kind: 'error'; code: string; retryable: boolean; server: string | undefined; message: string }
  /** Something that is not an McpSupervisorError. */
  | { kind: 'foreign'; message: string }
  /** A result that does not match what was asked (wrong sum, wrong process, …). */
  | { kind: 'bad-result'; message: string };

/** One tool call, as the soak records it. */
export interface CallRecord {
  slot: string;
  profile: string;
  server: string;
  tool: string;
  transport: Transport;
  /** The tool is read-only or idempotent (replayed after a mid-call death). */
  replayable: boolean;
  /** Where the call came from (turn traffic, a fault probe, the recovery phase). */
  origin: 'turn' | 'probe-warm-up' | 'kill-probe' | 'forget-probe' | 'reload-probe' | 'recovery';
  start: number;
  end: number;
  /** The soak aborted this call's signal before it settled. */
  cancelFired: boolean;
  outcome: CallOutcome;
}

/** Faults the soak injected, by slot and profile (times from `performance.now()`). */
export interface FaultLog {
  killsOf(slot: string): readonly number[];
  forgetsOf(slot: string): readonly number[];
  reloadsOf(profile: string): readonly (readonly [number, number])[];
  /** When `host.close()` was called, if it was. */
  readonly closeStartedAt: number | undefined;
}

/** The verdict on one call. */
export interface Verdict {
  ok: boolean;
  /** A grouping key for the report, e.g. `CALL_TIMEOUT after a kill`. */
  label: string;
  /** Legitimate, but worth printing. */
  warning?: boolean;
}

const RETRYABLE: Record<string, boolean> = {
  SERVER_EXITED: true,
  SERVER_EXITED_AGAIN: false,
  OUTCOME_UNCERTAIN: false,
  BREAKER_OPEN: true,
  RECONNECTING: true,
  SERVER_PARKED: true,
  SERVER_UNREACHABLE: true,
  CALL_TIMEOUT: true,
};

const EXIT_LOOKBACK_MS = 30_000;
const RACE_LOOKBACK_MS = 1_000;
const BREAKER_LOOKBACK_MS = 60_000;

function anyIn(times: readonly number[], from: number, to: number): boolean {
  return times.some((t) => t >= from && t <= to);
}

function overlaps(windows: readonly (readonly [number, number])[], from: number, to: number): boolean {
  return windows.some(([start, end]) => start <= to && end >= from);
}

/** Judges one call against the fault log. */
export function judge(call: CallRecord, faults: FaultLog): Verdict {
  const { outcome } = call;
  if (outcome.kind === 'ok') return { ok: true, label: 'ok' };
  if (outcome.kind === 'tool-error') {
    return call.tool === 'fail' ? { ok: true, label: 'tool isError (fail)' } : { ok: false, label: `isError result from "${call.tool}"` };
  }
  if (outcome.kind === 'foreign') return { ok: false, label: 'non-McpSupervisorError thrown' };
  if (outcome.kind === 'bad-result') return { ok: false, label: 'wrong result' };

  const { code } = outcome;
  if (outcome.server !== undefined && outcome.server !== call.server) return { ok: false, label: `${code} naming server "${outcome.server}"` };
  const expectedRetryable = RETRYABLE[code];
  if (expectedRetryable !== undefined && outcome.retryable !== expectedRetryable) {
    return { ok: false, label: `${code} with retryable=${String(outcome.retryable)}` };
  }

  const kills = faults.killsOf(call.slot);
  const forgets = faults.forgetsOf(call.slot);
  const reloads = faults.reloadsOf(call.profile);
  const { start, end } = call;
  const killedLately = anyIn(kills, start - EXIT_LOOKBACK_MS, end);
  const killedAround = anyIn(kills, start - RACE_LOOKBACK_MS, end);
  const forgottenAround = anyIn(forgets, start - RACE_LOOKBACK_MS, end);
  const reloadedDuring = overlaps(reloads, start, end);
  const anyFaultLately =
    anyIn(kills, start - BREAKER_LOOKBACK_MS, end) || anyIn(forgets, start - BREAKER_LOOKBACK_MS, end) || overlaps(reloads, start - BREAKER_LOOKBACK_MS, end);

  switch (code) {
    case 'SERVER_EXITED':
    case 'SERVER_EXITED_AGAIN':
      if (call.transport !== 'stdio') return { ok: false, label: `${code} from an HTTP server` };
      return killedLately ? { ok: true, label: `${code} after a kill` } : { ok: false, label: `${code} without any kill of the server` };
    case 'OUTCOME_UNCERTAIN':
      if (call.replayable) return { ok: false, label: `OUTCOME_UNCERTAIN for read-only/idempotent "${call.tool}" (should be replayed)` };
      if (call.transport === 'stdio' && killedAround) return { ok: true, label: 'OUTCOME_UNCERTAIN after a mid-call kill' };
      if (call.transport === 'http' && forgottenAround) return { ok: true, label: 'OUTCOME_UNCERTAIN after a mid-call forget' };
      if (reloadedDuring) return { ok: true, label: 'OUTCOME_UNCERTAIN during a reload' };
      return { ok: false, label: 'OUTCOME_UNCERTAIN without a mid-call fault' };
    case 'SERVER_UNREACHABLE':
      if (call.transport === 'http') {
        // The HTTP fixtures never stop listening: "unreachable … the tool was not run" is never
        // true here. A forget means a 404 (re-initialise, retry once) or a dropped in-flight call.
        if (anyIn(forgets, start, end)) {
          return { ok: false, label: `SERVER_UNREACHABLE from a listening HTTP server whose session was dropped during the call${call.origin === 'forget-probe' ? ' (probe: the call was running on the server)' : ''}` };
        }
        if (anyIn(forgets, start - BREAKER_LOOKBACK_MS, start)) return { ok: false, label: 'SERVER_UNREACHABLE from a listening HTTP server after it forgot the session (404 → should re-initialise and retry once)' };
        return { ok: false, label: 'SERVER_UNREACHABLE from a listening HTTP server, no forget in the last 60 s' };
      }
      return killedLately ? { ok: true, label: 'SERVER_UNREACHABLE (stdio) after a kill', warning: true } : { ok: false, label: 'SERVER_UNREACHABLE (stdio) without a kill' };
    case 'BREAKER_OPEN':
    case 'RECONNECTING':
    case 'SERVER_PARKED':
      return anyFaultLately ? { ok: true, label: `${code} after faults` } : { ok: false, label: `${code} without any fault of the server in the last 60 s` };
    case 'CALL_TIMEOUT':
      if (call.transport === 'stdio' && killedAround) return { ok: false, label: 'CALL_TIMEOUT although the server was killed (exited)' };
      if (call.transport === 'http' && forgottenAround) return { ok: false, label: 'CALL_TIMEOUT although the HTTP server forgot the session' };
      if (reloadedDuring) return { ok: false, label: 'CALL_TIMEOUT during a reload of the profile' };
      return { ok: true, label: 'CALL_TIMEOUT of a live server', warning: true };
    case 'CANCELLED':
      return call.cancelFired ? { ok: true, label: 'CANCELLED (soak aborted the call)' } : { ok: false, label: 'CANCELLED although nothing aborted the call' };
    case 'HOST_CLOSED':
      if (faults.closeStartedAt !== undefined && end >= faults.closeStartedAt) return { ok: true, label: 'HOST_CLOSED after close()' };
      return { ok: false, label: reloadedDuring ? 'HOST_CLOSED during a reload of the profile (host not closed)' : 'HOST_CLOSED before close()' };
    default:
      return { ok: false, label: `${code} (never expected here)` };
  }
}
