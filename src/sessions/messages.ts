/**
 * The errors of supervised tool calls, with the text a model reads. Rules: an exited or
 * unreachable server is never described as a timeout; a failure after a respawn says "exited
 * again" and "do NOT retry"; a breaker says when the next probe comes; a call that may have run
 * says so.
 */
import { McpSupervisorError } from '../errors.js';
import { scrubTail } from '../config/redact.js';
import type { ExitInfo } from '../process/stdio-transport.js';
import type { ServerFailure } from '../discovery/types.js';

/** Who the error is about. */
export interface CallSubject {
  server: string;
  profile: string;
  tool?: string;
}

function exitText(exit: ExitInfo | undefined | { code?: number | null; signal?: string | null }): string {
  if (!exit) return '';
  if (exit.signal) return ` (killed by ${exit.signal})`;
  if (exit.code !== undefined && exit.code !== null) return ` (exit code ${exit.code})`;
  return '';
}

function stderrText(stderr: string | undefined): string {
  const tail = stderr?.trim();
  if (!tail) return '';
  // Scrubbed before it is cut: a secret cut in half is no longer recognisable.
  const lastLines = scrubTail(tail).split('\n').slice(-3).join(' | ');
  return ` Its last stderr output: "${lastLines.slice(-300)}".`;
}

function base(subject: CallSubject, data: Record<string, unknown> = {}): { server: string; profile: string; data: Record<string, unknown> } {
  return { server: subject.server, profile: subject.profile, data: { ...data, ...(subject.tool ? { tool: subject.tool } : {}) } };
}

/**
 * The subprocess exited and no fresh session came back within `respawnWaitMs`. The text names the
 * exit, never the wait: a number of seconds next to "no session" reads as a timeout, and this is
 * an exit (the wait is kept in `data.respawnWaitMs`).
 */
export function serverExited(subject: CallSubject, respawnWaitMs: number, exit: ExitInfo | undefined, stderr?: string): McpSupervisorError {
  const text = `The MCP server "${subject.server}" subprocess exited${exitText(exit)} and has not come back yet (it is being restarted), so the tool was not run.${stderrText(stderr)} You may try again later.`;
  return new McpSupervisorError('SERVER_EXITED', text, { ...base(subject, { respawnWaitMs, exit }), modelText: text });
}

/**
 * The server exited again right after its respawn: either its restart died before a session was
 * up (the tool was not run), or it died once more while a replayed call ran (`duringReplay`).
 */
export function serverExitedAgain(subject: CallSubject, exit: { code?: number | null; signal?: string | null } | undefined, stderr?: string, duringReplay = false): McpSupervisorError {
  const what = duringReplay
    ? `exited again${exitText(exit)} while the call was being repeated on its restarted process, so "${subject.tool}" did not complete.`
    : `exited again${exitText(exit)} right after it was restarted, so the tool was not run.`;
  const text = `The MCP server "${subject.server}" ${what}${stderrText(stderr)} The server is failing: do NOT retry this tool now; tell the user the "${subject.server}" server is failing.`;
  return new McpSupervisorError('SERVER_EXITED_AGAIN', text, { ...base(subject, { exit, duringReplay }), modelText: text, retryable: false });
}

/**
 * The server could not be started or reached (spawn error, refused, HTTP error). `afterReplay`:
 * this was the repeat of a call that may have run (the tool is read-only or idempotent).
 */
export function serverUnavailable(subject: CallSubject, failure: ServerFailure, afterReplay = false): McpSupervisorError {
  if (failure.kind === 'auth') return authRequired(subject, failure.httpStatus);
  if (failure.kind === 'exited') {
    const text = `The MCP server "${subject.server}" subprocess exited${exitText({ code: failure.exitCode ?? null, signal: failure.signal ?? null })} while starting, so the tool was not run.${stderrText(failure.stderrTail)}`;
    return new McpSupervisorError('SERVER_EXITED', text, { ...base(subject, { failure }), modelText: text });
  }
  const outcome = afterReplay
    ? `so the call could not be repeated after its connection was lost; "${subject.tool}" is read-only or idempotent, so calling it again later is safe.`
    : 'so the tool was not run. You may try again later.';
  const text = `The MCP server "${subject.server}" is unavailable (${failure.kind}: ${failure.message}), ${outcome}`;
  return new McpSupervisorError('SERVER_UNREACHABLE', text, { ...base(subject, { failure }), modelText: text, retryable: true });
}

/**
 * The server died or the connection was lost during a call that cannot be replayed safely:
 * `exit` for a stdio process, `what` for anything else ("lost the connection", "answered HTTP 502").
 */
export function outcomeUncertain(subject: CallSubject, detail: { exit?: ExitInfo | undefined } | { what: string }): McpSupervisorError {
  const exit = 'exit' in detail ? detail.exit : undefined;
  const happened = 'what' in detail ? detail.what : `exited${exitText(exit)}`;
  const text = `The MCP server "${subject.server}" ${happened} while running "${subject.tool}". The tool may or may not have taken effect; it was not repeated automatically because it is not marked read-only or idempotent. Check its effect before calling it again.`;
  return new McpSupervisorError('OUTCOME_UNCERTAIN', text, { ...base(subject, { exit }), modelText: text, retryable: false });
}

/** An HTTP server lost the new session as well, during the one retry or replay. */
export function sessionLostAgain(subject: CallSubject, delivered: boolean): McpSupervisorError {
  const text = delivered
    ? `The MCP server "${subject.server}" lost its session again while "${subject.tool}" was being retried; the tool is read-only or idempotent, so calling it again later is safe.`
    : `The MCP server "${subject.server}" lost its session again before "${subject.tool}" could run, so the tool was not run. Try again shortly.`;
  return new McpSupervisorError('RECONNECTING', text, { ...base(subject, { delivered }), modelText: text, retryable: true });
}

/** The server's session was closed by a reload of its profile (the host itself is fine). */
export function reloading(subject: CallSubject, inFlight: boolean): McpSupervisorError {
  const text = inFlight
    ? `The MCP server "${subject.server}" was restarted by a reload of its profile while running "${subject.tool}"; the tool is read-only or idempotent, so it is safe to call it again now.`
    : `The MCP server "${subject.server}" is being restarted by a reload of its profile; "${subject.tool}" was not run. Try again now.`;
  return new McpSupervisorError('RECONNECTING', text, { ...base(subject, { reload: true, inFlight }), modelText: text, retryable: true });
}

/**
 * The breaker is open (or half-open with its one probe in flight: `probeAt` is then not in the
 * future, and the text says a probe is running instead of naming a time).
 */
export function breakerOpen(subject: CallSubject, failures: number, probeAt: number, now: number): McpSupervisorError {
  const next =
    probeAt > now
      ? `the next probe is allowed at ${new Date(probeAt).toISOString()} (in ${Math.ceil((probeAt - now) / 1000)} s)`
      : 'a probe of the server is in progress; try again in a few seconds';
  const text = `Calls to the MCP server "${subject.server}" are paused after ${failures} consecutive failures; ${next}. The tool was not run.`;
  return new McpSupervisorError('BREAKER_OPEN', text, { ...base(subject, { probeAt }), modelText: text });
}

/** A half-open probe found no live session: a reconnect was started instead. */
export function reconnecting(subject: CallSubject): McpSupervisorError {
  const text = `The MCP server "${subject.server}" is reconnecting; the tool was not run. Try again in a few seconds.`;
  return new McpSupervisorError('RECONNECTING', text, { ...base(subject), modelText: text });
}

/** The server is parked after its reconnect budget was spent. */
export function serverParked(subject: CallSubject, reason: string, nextProbeAt: number): McpSupervisorError {
  const text = `The MCP server "${subject.server}" is parked after repeated connection failures (${reason}); it will be probed again at ${new Date(nextProbeAt).toISOString()}. The tool was not run.`;
  return new McpSupervisorError('SERVER_PARKED', text, { ...base(subject, { nextProbeAt, reason }), modelText: text });
}

/** A real timeout: the server is alive but did not answer in time (`maybeRun`: the request had left). */
export function callTimeout(subject: CallSubject, timeoutMs: number, maybeRun = true): McpSupervisorError {
  const after = maybeRun ? 'It may still complete on the server.' : 'The request never reached the server, so the tool was not run.';
  const text = `The tool "${subject.tool}" on MCP server "${subject.server}" did not answer within ${timeoutMs} ms (the configured call timeout). ${after}`;
  return new McpSupervisorError('CALL_TIMEOUT', text, { ...base(subject, { timeoutMs }), modelText: text });
}

/**
 * HTTP 401/403, or an OAuth flow that needs the user. The authorization URL (when a code flow is
 * waiting) is in `data.authorizationUrl` for the host; the model is only told to ask the user.
 */
export function authRequired(subject: CallSubject, status: number | undefined, authorizationUrl?: string): McpSupervisorError {
  const text = `The MCP server "${subject.server}" requires authorization${status ? ` (HTTP ${status})` : ''}; the tool was not run.${authorizationUrl ? ' The user must authorize access to this server before it can be used.' : ''}`;
  return new McpSupervisorError('AUTH_REQUIRED', text, {
    ...base(subject, { httpStatus: status, ...(authorizationUrl ? { authorizationUrl } : {}) }),
    modelText: text,
    retryable: false,
  });
}

/** The HTTP server refused the request with a 4xx that is not about its session or authorization. */
export function requestRejected(subject: CallSubject, status: number): McpSupervisorError {
  const text = `The MCP server "${subject.server}" rejected the request for "${subject.tool}" (HTTP ${status}), so the tool was not run.`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject, { httpStatus: status }), modelText: text, retryable: false });
}

/** The caller aborted. */
export function callCancelled(subject: CallSubject): McpSupervisorError {
  return new McpSupervisorError('CANCELLED', `The call of "${subject.tool}" on MCP server "${subject.server}" was cancelled.`, base(subject));
}

/** The server answered the call with a JSON-RPC error. */
export function protocolError(subject: CallSubject, message: string, code?: number): McpSupervisorError {
  const text = `The MCP server "${subject.server}" rejected the call of "${subject.tool}": ${message}`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject, { rpcCode: code }), modelText: text, retryable: false });
}

/**
 * The server needs input from the user or the model (2026-07-28 `input_required`) that this host
 * has no handler for: `needed` names what it asked (`elicitation/create`, …).
 */
export function inputUnavailable(subject: CallSubject, needed: string, code?: number): McpSupervisorError {
  const text = `The MCP server "${subject.server}" needs input to complete "${subject.tool}" that this host cannot give: it asked for ${needed}, and no handler for it is configured (client options). The call did not complete.`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject, { rpcCode: code }), modelText: text, retryable: false });
}

/** The server kept answering `input_required` past the round bound. */
export function inputRoundsExceeded(subject: CallSubject, rounds: number): McpSupervisorError {
  const text = `The MCP server "${subject.server}" kept asking for more input while running "${subject.tool}": still incomplete after ${rounds} rounds of answers, so the call was given up. Do not repeat it unchanged.`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject), modelText: text, retryable: false });
}

/** The host is closed; `inFlight` when it closed while the call was running on the server. */
export function hostClosed(subject: CallSubject, inFlight = false): McpSupervisorError {
  const text = inFlight
    ? `The host closed while "${subject.tool}" was running on MCP server "${subject.server}"; it may or may not have taken effect.`
    : `The host is closed; "${subject.tool}" on "${subject.server}" was not run.`;
  return new McpSupervisorError('HOST_CLOSED', text, { ...base(subject, { inFlight }), modelText: text });
}

/** The server sent a message over `limits.maxMessageBytes`; `maybeRun`: the request had been delivered. */
export function messageTooLarge(subject: CallSubject, limit: number, maybeRun: boolean): McpSupervisorError {
  const outcome = maybeRun ? `"${subject.tool}" may or may not have taken effect` : `"${subject.tool}" was not run`;
  const text = `The MCP server "${subject.server}" sent a message larger than the host's limit of ${limit} bytes (limits.maxMessageBytes); it was refused and ${outcome}. Ask for less data (e.g. a smaller page or range) instead of repeating the same call.`;
  return new McpSupervisorError('MESSAGE_TOO_LARGE', text, { ...base(subject, { limit }), modelText: text, retryable: false });
}

/** What answered is not an MCP endpoint (a login page, a proxy): says what came back. */
export function notMcpAnswer(subject: CallSubject, what: string): McpSupervisorError {
  const text = `The MCP server "${subject.server}" did not answer as an MCP server (${what}), so "${subject.tool}" was not run. Its URL may point at a login page or a proxy.`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject), modelText: text, retryable: false });
}

/** The tool ran, but its structured result breaks its declared output schema. */
export function invalidResult(subject: CallSubject, problem: string): McpSupervisorError {
  const text = `The tool "${subject.tool}" on MCP server "${subject.server}" ran, but ${problem}. Its result was not used; calling it again will likely give the same result.`;
  return new McpSupervisorError('PROTOCOL_ERROR', text, { ...base(subject, { invalidResult: true }), modelText: text, retryable: false });
}
