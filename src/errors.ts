/**
 * The one error type of mcp-supervisor.
 *
 * Every failure the library reports is an {@link McpSupervisorError} with a string `code`. Errors
 * cross worker-thread boundaries as plain data ({@link SerializedError}) and are rebuilt on the
 * other side, so `instanceof` is not reliable across threads or duplicate package copies: use
 * {@link isMcpSupervisorError}, which checks a registered-symbol brand instead.
 *
 * No configured secret leaves through an error: the constructor (and so {@link
 * McpSupervisorError.fromJSON}, which rebuilds errors sent by worker threads) passes `message`,
 * `modelText` and `data` through the scrubber of `config/redact.ts`, wherever the error was built
 * and whatever text (a `fetch` error quoting a URL, a server's stderr) went into it.
 */
import { scrubDeep, scrubText } from './config/redact.js';

/** Every error code the library produces. Codes may be added; existing ones keep their meaning. */
export type ErrorCode =
  | 'SERVER_EXITED'
  | 'SERVER_EXITED_AGAIN'
  | 'OUTCOME_UNCERTAIN'
  | 'BREAKER_OPEN'
  | 'RECONNECTING'
  | 'SERVER_PARKED'
  | 'SERVER_UNREACHABLE'
  | 'CALL_TIMEOUT'
  | 'AUTH_REQUIRED'
  | 'UNKNOWN_SERVER'
  | 'UNKNOWN_TOOL'
  | 'UNKNOWN_PROFILE'
  | 'INVALID_CONFIG'
  | 'INVALID_ARGUMENTS'
  | 'MESSAGE_TOO_LARGE'
  | 'RELOAD_ABORTED'
  | 'RETRY_REFUSED'
  | 'HOST_CLOSED'
  | 'CANCELLED'
  | 'DISCOVERY_FAILED'
  | 'QUIESCE_FAILED'
  | 'PROTOCOL_ERROR';

/** Codes whose failure may go away if the same call is tried again later. */
const RETRYABLE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SERVER_EXITED',
  'BREAKER_OPEN',
  'RECONNECTING',
  'SERVER_PARKED',
  'SERVER_UNREACHABLE',
  'CALL_TIMEOUT',
  'RELOAD_ABORTED',
  'RETRY_REFUSED',
  'DISCOVERY_FAILED',
]);

/** The brand is a registered symbol so two copies of this package still recognise each other. */
const BRAND = Symbol.for('mcp-supervisor.error');

/** Options accepted by the {@link McpSupervisorError} constructor. */
export interface McpSupervisorErrorOptions {
  /** Overrides the default retryability of the code. */
  retryable?: boolean;
  /** Server name the error is about, when there is one. */
  server?: string;
  /** Canonical profile key the error is about, when there is one. */
  profile?: string;
  /** Text meant for a language model; defaults to the message. */
  modelText?: string;
  /** Extra structured detail (must be structured-clone safe: it may cross a thread). */
  data?: Record<string, unknown>;
  /**
   * The underlying error, kept as this error's standard `cause` (nothing of it goes into `data`).
   * It passes `scrubDeep` first: strings, plain objects and arrays are scrubbed (copied only when
   * something was replaced); an `Error` whose message quotes a registered secret is replaced by a
   * plain `Error` with the scrubbed message and the same `name` (stack and nested `cause` dropped);
   * any other value, an `Error` with a clean message included, is kept as given (its nested
   * `cause` and properties are not scrubbed). Not serialised: `toJSON` leaves it out, so an error
   * rebuilt by `fromJSON` (one that crossed a thread) has no `cause`.
   */
  cause?: unknown;
}

/** The plain-data form of an error, as it travels between threads. */
export interface SerializedError {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  server?: string;
  profile?: string;
  modelText: string;
  data?: Record<string, unknown>;
}

/** An error raised by mcp-supervisor. Inspect `code`, never the message text. */
export class McpSupervisorError extends Error {
  /** What went wrong, as a stable string. */
  readonly code: ErrorCode;
  /** Whether trying the same operation again later may succeed. */
  readonly retryable: boolean;
  /** The server concerned, if any. */
  readonly server: string | undefined;
  /** The canonical profile key concerned, if any. */
  readonly profile: string | undefined;
  /** A sentence a model can act on (what happened, whether to retry). */
  readonly modelText: string;
  /** Structured detail. */
  readonly data: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: McpSupervisorErrorOptions = {}) {
    const safeMessage = scrubText(String(message));
    // The cause stays as it is unless its message quotes a secret (then a scrubbed stand-in).
    const cause = options.cause === undefined ? undefined : scrubDeep(options.cause);
    super(safeMessage, cause === undefined ? undefined : { cause });
    this.name = 'McpSupervisorError';
    this.code = code;
    this.retryable = options.retryable ?? RETRYABLE_CODES.has(code);
    this.server = options.server;
    this.profile = options.profile;
    this.modelText = options.modelText === undefined ? safeMessage : scrubText(String(options.modelText));
    this.data = options.data === undefined ? undefined : scrubDeep(options.data);
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** Plain data for `postMessage`; rebuild with {@link McpSupervisorError.fromJSON}. */
  toJSON(): SerializedError {
    const serialized: SerializedError = {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      modelText: this.modelText,
    };
    if (this.server !== undefined) serialized.server = this.server;
    if (this.profile !== undefined) serialized.profile = this.profile;
    if (this.data !== undefined) serialized.data = this.data;
    return serialized;
  }

  /** Rebuilds an error that crossed a thread boundary as {@link SerializedError}. */
  static fromJSON(serialized: SerializedError): McpSupervisorError {
    const options: McpSupervisorErrorOptions = {
      retryable: serialized.retryable,
      modelText: serialized.modelText,
    };
    if (serialized.server !== undefined) options.server = serialized.server;
    if (serialized.profile !== undefined) options.profile = serialized.profile;
    if (serialized.data !== undefined) options.data = serialized.data;
    return new McpSupervisorError(serialized.code, serialized.message, options);
  }
}

/** True for any mcp-supervisor error, including one built by another copy of this package. */
export function isMcpSupervisorError(value: unknown): value is McpSupervisorError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

/** A short, log-safe description of any thrown value (scrubbed of registered secrets). */
export function describeError(value: unknown): string {
  return scrubText(describeRaw(value));
}

function describeRaw(value: unknown): string {
  if (value instanceof Error) return value.message || value.name;
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
