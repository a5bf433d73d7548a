/**
 * Protocol eras: which one a connection speaks, how the SDK client is told to negotiate it, and
 * the verdict that is cached so a known server is not probed again.
 *
 * The v2 SDK client negotiates per connection: `legacy` (the 2025-11-25 `initialize` handshake),
 * `{ pin: '2026-07-28' }` (stateless, `server/discover`), or `auto` (probe with `server/discover`,
 * fall back to `initialize` on a refusal). A verdict — `legacy`, or `modern` with the server's
 * `server/discover` result — is what `connect({ prior })` adopts without a round trip. Verdicts
 * are plain JSON: they cross the worker boundary inside discovery outcomes and are kept by the
 * host's era cache (see `era-cache.ts`).
 */
import type { DiscoverResult, PriorDiscovery, VersionNegotiationOptions } from '@modelcontextprotocol/client';
import { SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import type { ProtocolSetting } from '../config/types.js';

/** The era a connection speaks: `legacy` = 2025-11-25 (`initialize`), `modern` = 2026-07-28. */
export type ProtocolEra = 'legacy' | 'modern';

/** The protocol version each era is spoken at. */
export const ERA_VERSION: Readonly<Record<ProtocolEra, string>> = { legacy: '2025-11-25', modern: '2026-07-28' };

/** A server's negotiated era, as cached: enough to connect again without probing. */
export type EraVerdict = { era: 'legacy' } | { era: 'modern'; discover: DiscoverResult };

/** The SDK client's negotiation options for a server's protocol setting. */
export function negotiationFor(setting: ProtocolSetting, connectTimeoutMs: number): VersionNegotiationOptions {
  if (setting === '2025-11-25') return { mode: 'legacy' };
  if (setting === '2026-07-28') return { mode: { pin: ERA_VERSION.modern } };
  // The probe gets the whole connect budget: on stdio it is the first request of a process that
  // may take seconds to start on a busy machine, and a shorter wait would read a slow start as an
  // old server that ignores `server/discover`. A server that really ignores it costs one connect
  // timeout (then its era belongs in its config); one that refuses it falls back at once.
  return { mode: 'auto', probe: { timeoutMs: connectTimeoutMs } };
}

/**
 * The verdict to adopt for a setting: a pinned setting needs none (there is nothing to probe),
 * `auto` adopts the cached one; a cached verdict that contradicts a pinned setting is ignored.
 */
export function priorFor(setting: ProtocolSetting, cached: EraVerdict | undefined): PriorDiscovery | undefined {
  if (cached === undefined) return undefined;
  if (setting === '2025-11-25') return cached.era === 'legacy' ? { kind: 'legacy' } : undefined;
  if (setting === '2026-07-28' && cached.era !== 'modern') return undefined;
  return cached.era === 'modern' ? { kind: 'modern', discover: cached.discover } : { kind: 'legacy' };
}

/** The verdict a connected client reached (undefined before it connected). */
export function verdictOf(era: ProtocolEra | undefined, discover: DiscoverResult | undefined): EraVerdict | undefined {
  if (era === 'legacy') return { era: 'legacy' };
  if (era === 'modern' && discover !== undefined) return { era: 'modern', discover };
  return undefined;
}

/** The JSON-RPC code of "unsupported protocol version" (the server named the versions it speaks). */
export const UNSUPPORTED_PROTOCOL_VERSION_CODE = -32022;

/**
 * True when a failure says the era a connection assumed is not the server's: the server refused
 * the version (-32022), or the client could not agree on an era with it. A cached verdict that
 * led to such a failure is stale: the next attempt probes.
 */
export function isEraMismatch(error: unknown): boolean {
  if (error instanceof SdkError) {
    if (error.code === SdkErrorCode.EraNegotiationFailed) return true;
    // An HTTP 4xx whose body is not an answer to the request: its text is all there is.
    const data = error.data as { text?: unknown } | undefined;
    if (error.code === SdkErrorCode.ClientHttpNotImplemented && typeof data?.text === 'string') return data.text.includes(String(UNSUPPORTED_PROTOCOL_VERSION_CODE));
    return false;
  }
  const code = (error as { code?: unknown } | null)?.code;
  return code === UNSUPPORTED_PROTOCOL_VERSION_CODE;
}

/** True for a server's "method not found" (-32601): asked `server/discover`, an old server says so. */
export function isMethodNotFound(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === -32601;
}
