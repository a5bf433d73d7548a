/**
 * Turns whatever a connection attempt threw into a {@link ServerFailure} with an honest kind, and
 * tells network failures that happened before a request could leave from those after.
 * The order of the checks matters: a child that exited makes the SDK reject its pending request
 * with "Connection closed", which must read as `exited` (with code and stderr), never as a
 * protocol error or a timeout; a refused socket is `refused`, not `http`.
 */
import { OAuthError, ProtocolError, SdkError, SdkErrorCode, SdkHttpError, SseError, UnauthorizedError } from '@modelcontextprotocol/client';
import { describeError } from '../errors.js';
import type { ExitInfo } from '../process/stdio-transport.js';
import type { FailureKind, ServerFailure } from '../discovery/types.js';
import { CatalogLimitError, MESSAGE_TOO_LARGE_CODE, MessageTooLargeError } from './limits.js';
import { UNSUPPORTED_PROTOCOL_VERSION_CODE } from './era.js';
import { NotMcpAnswerError } from './http-transport.js';

const REFUSED_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'EPIPE']);

/**
 * Failures of opening a connection: nothing was sent yet. A reset or a socket closed by the other
 * side is not among them: the request may already have been written.
 */
const CONNECT_PHASE_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * The code of a failure that happened before a request could leave (connection refused, name not
 * resolved, unreachable, connect timeout, a port fetch refuses), or undefined.
 */
export function connectPhaseCode(error: unknown): string | undefined {
  return findInErrorChain(error, (candidate) => {
    const code = (candidate as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECT_PHASE_CODES.has(code)) return code;
    return candidate instanceof Error && candidate.message === 'bad port' ? 'bad port' : undefined;
  });
}

/** Finds a network error code anywhere in an error's cause chain (fetch wraps them twice). */
export function networkErrorCode(error: unknown): string | undefined {
  return findInErrorChain(error, (candidate) => {
    const code = (candidate as { code?: unknown }).code;
    return typeof code === 'string' && REFUSED_CODES.has(code) ? code : undefined;
  });
}

/** The first answer of `match` in an error, its `errors` (AggregateError) and its `cause` chain, 5 levels deep. */
function findInErrorChain(error: unknown, match: (candidate: object) => string | undefined, depth = 0): string | undefined {
  if (depth > 5 || typeof error !== 'object' || error === null) return undefined;
  const found = match(error);
  if (found !== undefined) return found;
  const nested = (error as { errors?: unknown[] }).errors;
  if (Array.isArray(nested)) {
    for (const inner of nested) {
      const innerFound = findInErrorChain(inner, match, depth + 1);
      if (innerFound !== undefined) return innerFound;
    }
  }
  return findInErrorChain((error as { cause?: unknown }).cause, match, depth + 1);
}

/** The HTTP status an SDK transport error carries, if any. */
export function httpStatusOf(error: unknown): number | undefined {
  if (error instanceof SdkHttpError) return error.status;
  if (error instanceof SseError) return typeof error.code === 'number' ? error.code : undefined;
  return undefined;
}

/** True when the SDK client failed for a reason of its own with `code`. */
export function isSdkError(error: unknown, code: SdkErrorCode): boolean {
  return error instanceof SdkError && error.code === code;
}

/** At most this many versions, each this long, are quoted from a server's refusal. */
const QUOTED_VERSIONS = 8;
const QUOTED_VERSION_LENGTH = 40;

/** The `error` of a JSON-RPC answer an HTTP error carries in its body (or message: "…: {json}"), if any. */
function jsonRpcErrorIn(text: string): { code?: unknown; data?: unknown } | undefined {
  const start = text.indexOf('{');
  if (start < 0) return undefined;
  try {
    const parsed = JSON.parse(text.slice(start)) as { error?: { code?: unknown; data?: unknown } };
    return typeof parsed.error === 'object' && parsed.error !== null ? parsed.error : undefined;
  } catch {
    return undefined;
  }
}

/**
 * When `error` is a server's refusal of the protocol version we asked for — over stdio an
 * `ProtocolError` -32022, over HTTP the same JSON-RPC error in a 4xx body — the versions it says it
 * speaks (bounded: a server's words are quoted, never trusted in size). Otherwise undefined.
 */
export function refusedProtocolVersion(error: unknown): { supported: string[]; requested: string } | undefined {
  let refusal: { code?: unknown; data?: unknown } | undefined;
  if (error instanceof ProtocolError) refusal = { code: error.code, data: error.data };
  else if (error instanceof SdkHttpError) {
    const text = (error.data as { text?: unknown } | undefined)?.text;
    refusal = jsonRpcErrorIn(typeof text === 'string' ? text : error.message);
  }
  if (refusal?.code !== UNSUPPORTED_PROTOCOL_VERSION_CODE) return undefined;
  const data = (typeof refusal.data === 'object' && refusal.data !== null ? refusal.data : {}) as { supported?: unknown; requested?: unknown };
  const supported = Array.isArray(data.supported)
    ? data.supported.filter((version): version is string => typeof version === 'string').slice(0, QUOTED_VERSIONS).map((version) => version.slice(0, QUOTED_VERSION_LENGTH))
    : [];
  const requested = typeof data.requested === 'string' ? data.requested.slice(0, QUOTED_VERSION_LENGTH) : '2025-11-25';
  return { supported, requested };
}

/** Describes a process exit the way a person reads it. */
export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code ?? 'unknown'}`;
}

/** Context the classifier needs besides the error. */
export interface ClassifyContext {
  /** Set when the stdio leader has exited. */
  exit?: ExitInfo;
  /** The stderr tail of a stdio server. */
  stderrTail?: string;
  /** True when our own deadline fired. */
  timedOut?: boolean;
  /** The deadline, for the message. */
  timeoutMs?: number;
  /** True when the attempt was cancelled by retirement. */
  cancelled?: boolean;
  /** What was under way, for the wording of an exit. Default `discovery`. */
  phase?: 'discovery' | 'session start';
  /** The limit a message of the server exceeded (a stdio server is killed for it). */
  tooLarge?: number;
}

function failure(kind: FailureKind, message: string, extra: Partial<ServerFailure> = {}): ServerFailure {
  return { kind, message, ...extra };
}

/** Classifies a failed connection attempt. */
export function classifyFailure(error: unknown, context: ClassifyContext): ServerFailure {
  const stderr = context.stderrTail?.trim() ? { stderrTail: context.stderrTail.trim() } : {};
  if (context.cancelled) return failure('cancelled', 'discovery was cancelled (its generation was retired)');
  const tooLarge = context.tooLarge ?? (error instanceof MessageTooLargeError ? error.limit : undefined);
  if (tooLarge !== undefined) return failure('too_large', `the server sent a message larger than limits.maxMessageBytes (${tooLarge} bytes); it was refused`);
  if (error instanceof CatalogLimitError) return failure('too_large', error.message);
  if (error instanceof ProtocolError && error.code === MESSAGE_TOO_LARGE_CODE) return failure('too_large', error.message.replace(/^MCP error -?\d+: /, ''));
  // Before the exit: a stdio server that refused our version ends the connection right after.
  const refusal = refusedProtocolVersion(error);
  if (refusal) {
    const refusalStatus = httpStatusOf(error);
    const speaks = refusal.supported.length > 0 ? `it speaks ${refusal.supported.join(', ')}` : 'it did not say which it speaks';
    // Dates compare as strings. A server of the stateless era refused the old one: only a server
    // configured for the old era is ever asked in it alone, so the remedy is its setting.
    const newEra = refusal.requested < '2026-07-28' && refusal.supported.some((version) => version >= '2026-07-28')
      ? ': set "protocol": "2026-07-28" (or "auto") on this server to speak its era'
      : '';
    return failure(
      'protocol',
      `the server does not speak MCP ${refusal.requested} (${speaks})${newEra}`,
      { ...stderr, ...(refusalStatus === undefined ? {} : { httpStatus: refusalStatus }) },
    );
  }
  if (context.exit) {
    const during = context.phase === 'session start' ? 'while its session was starting' : 'before discovery finished';
    return failure('exited', `the server process ${describeExit(context.exit)} ${during}`, {
      exitCode: context.exit.code,
      signal: context.exit.signal,
      ...stderr,
    });
  }
  if (context.timedOut) return failure('timeout', `no answer within the connect timeout of ${context.timeoutMs} ms`, stderr);
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  if (errno === 'ENOENT' || errno === 'EACCES' || errno === 'ENOTDIR' || errno === 'EPERM') {
    return failure('spawn', `could not start the server process: ${describeError(error)}`, stderr);
  }
  if (error instanceof NotMcpAnswerError) return failure('http', error.message, { httpStatus: error.status });
  if (error instanceof UnauthorizedError) return failure('auth', `the server requires authorization${error.message && error.message !== 'Unauthorized' ? `: ${error.message}` : ''}`);
  // The SDK's OAuth flow failed (metadata discovery, registration, token exchange): still auth.
  if (error instanceof OAuthError) return failure('auth', `authorization failed: ${describeError(error)}`);
  const status = httpStatusOf(error);
  if (status === 401 || status === 403) {
    return failure('auth', `the server answered HTTP ${status} (authorization required)`, { httpStatus: status });
  }
  const network = networkErrorCode(error);
  if (network) return failure('refused', `the server could not be reached (${network})`);
  if (error instanceof TypeError && error.message === 'fetch failed') {
    const cause = describeError(error.cause);
    // fetch refuses some ports outright (the "bad ports" list): that is the URL's fault.
    if (cause === 'bad port') return failure('config', 'the URL uses a port that fetch refuses to connect to ("bad port")');
    return failure('refused', `the server could not be reached (${cause})`);
  }
  if (status !== undefined) return failure('http', `the server answered HTTP ${status}: ${describeError(error)}`, { httpStatus: status });
  if (error instanceof SseError || error instanceof SdkHttpError) return failure('http', describeError(error));
  if (isSdkError(error, SdkErrorCode.RequestTimeout)) return failure('timeout', `no answer within the connect timeout of ${context.timeoutMs ?? 'the'} ms`, stderr);
  if (isSdkError(error, SdkErrorCode.EraNegotiationFailed)) return failure('protocol', `no protocol era could be agreed with the server: ${describeError(error)}`, stderr);
  if (error instanceof ProtocolError) return failure('protocol', `the server broke the protocol: ${error.message}`, stderr);
  if (error instanceof Error && error.name === 'ZodError') return failure('protocol', `the server sent a malformed reply: ${error.message.slice(0, 500)}`, stderr);
  return failure('protocol', describeError(error), stderr);
}
