/**
 * Gateway epochs and the session ids that carry them.
 *
 * An epoch names one build (or in-process restart) of the gateway. Every `Mcp-Session-Id` the
 * gateway mints is `${epoch}.${uuid}`, so any router — this process, a later one, or a replica
 * sharing a session table — can tell from the id alone that a session belongs to another epoch
 * and answer 404, which is what the MCP spec tells a compliant client to re-initialise on.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { McpSupervisorError } from '../errors.js';

/** Separates the epoch from the per-session part of a session id; never part of an epoch. */
export const SESSION_SEPARATOR = '.';

/**
 * Session ids must be visible ASCII (0x21–0x7E) per the Streamable HTTP spec; the separator is
 * excluded so `${epoch}.${uuid}` splits unambiguously.
 */
const EPOCH_PATTERN = /^[\x21-\x2D\x2F-\x7E]{1,64}$/;

/** A fresh epoch id: time in base 36 (sorts by build order in logs) plus 48 random bits. */
export function newEpochId(now: number): string {
  return `${Math.max(0, Math.floor(now)).toString(36)}-${randomBytes(6).toString('hex')}`;
}

/** Throws `INVALID_CONFIG` unless `epoch` can prefix a session id. */
export function assertEpochId(epoch: unknown): string {
  if (typeof epoch !== 'string' || !EPOCH_PATTERN.test(epoch)) {
    throw new McpSupervisorError(
      'INVALID_CONFIG',
      `Expected an epoch id of 1–64 visible ASCII characters without '${SESSION_SEPARATOR}', got \`${String(epoch)}\` (${typeof epoch})`,
    );
  }
  return epoch;
}

/** A session id of `epoch`. */
export function mintSessionId(epoch: string): string {
  return `${epoch}${SESSION_SEPARATOR}${randomUUID()}`;
}

/**
 * The per-session part must be a UUID: a host that mints its own ids (which may well contain a
 * dot) must not have them mistaken for ids of some other epoch, or its agents would never bind.
 */
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The epoch a gateway-minted session id carries, or `undefined` for any other id. */
export function epochOfSession(sessionId: string | undefined): string | undefined {
  if (typeof sessionId !== 'string') return undefined;
  const cut = sessionId.indexOf(SESSION_SEPARATOR);
  if (cut <= 0) return undefined;
  const epoch = sessionId.slice(0, cut);
  return EPOCH_PATTERN.test(epoch) && UUID_PATTERN.test(sessionId.slice(cut + 1)) ? epoch : undefined;
}
