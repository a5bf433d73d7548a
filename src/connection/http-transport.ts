/**
 * Streamable HTTP, judged by the spec: a `Transport` around the SDK's
 * `StreamableHTTPClientTransport` that owns every `fetch` the SDK makes to the MCP endpoint.
 *
 * Why a wrapper and not the bare SDK transport: the SDK reports HTTP outcomes as free-text errors
 * on `onerror`, cannot tell a request the server never processed from one it did, treats the
 * optional standalone GET stream answered 404 as an error, and leaves a request waiting until its
 * timeout when the answer's stream ends without the answer. Seeing the responses themselves
 * fixes all of it without touching the SDK's request path:
 *
 * - **Session loss is judged on POSTs only.** A POST that carried `Mcp-Session-Id` and got 404,
 *   or 400 whose body names the session (what many real servers answer after a restart), means
 *   the server does not know the session and did not process the request
 *   (`delivery.sessionLost`). A GET for the standalone stream answered 404 means "no standalone
 *   stream" (Express-style servers answer 404, not 405): it is handed to the SDK as the 405 it
 *   already understands, and never ends a session.
 * - **Delivery is recorded per request** ({@link Delivery}): refused before connecting, rejected
 *   4xx, accepted 2xx, or unknown.
 * - **An answer stream that ends without the answer fails that request at once.** The stream is
 *   wrapped so that, after its last byte, the SDK's own parser reads one more event: a private
 *   notification naming the request. Because it travels through the same pipeline, it arrives
 *   after every real event of the stream: if the answer has not been seen by then (and the server
 *   made the stream resumable with event ids, which the SDK would resume), the request is failed
 *   with `delivery.streamLost` instead of hanging until its timeout.
 * - 401/403 challenges (`WWW-Authenticate`) are reported to `onChallenge` so `finishAuth` can
 *   complete a code flow with the right resource metadata.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { StreamableHTTPClientTransport, extractWWWAuthenticateParams, isJSONRPCErrorResponse, isJSONRPCRequest, isJSONRPCResultResponse } from '@modelcontextprotocol/client';
import type { FetchLike, JSONRPCMessage, MessageExtraInfo, OAuthClientProvider, RequestId, Transport, TransportSendOptions } from '@modelcontextprotocol/client';
import { describeError } from '../errors.js';
import { connectPhaseCode } from './classify.js';
import { type Delivery, currentDelivery, newDelivery } from './delivery.js';
import { guardStream, isEndMarker, withEndMarker } from './http-streams.js';
import { DEFAULT_MAX_MESSAGE_BYTES, MESSAGE_TOO_LARGE_CODE, MessageTooLargeError, limitBody } from './limits.js';

/** What a 401/403 answer asked for. */
export interface AuthChallenge {
  status: number;
  resourceMetadataUrl?: string;
  scope?: string;
  error?: string;
}

/**
 * An HTTP answer that is not MCP (a login page, a proxy's error page): what came back, so the
 * error can say so instead of "HTTP -1".
 */
export class NotMcpAnswerError extends Error {
  override readonly name = 'NotMcpAnswerError';
  constructor(
    readonly status: number,
    readonly contentType: string,
    /** The first line of the body, shortened (scrubbed like every output on its way out). */
    readonly firstLine: string,
  ) {
    super(`the server answered HTTP ${status} with ${contentType || 'no content type'}, not MCP${firstLine ? `: "${firstLine}"` : ''}`);
  }
}

async function firstLineOf(response: Response): Promise<string> {
  const text = await response.text().catch(() => '');
  const line = text.replace(/<[^>]*>/g, ' ').split(/\r?\n/).map((part) => part.trim()).find((part) => part !== '') ?? '';
  // Control characters out, and short: a page is not a message.
  return line.replace(/[\u0000-\u001f\u007f]/g, ' ').replace(/\s+/g, ' ').slice(0, 120);
}

/** JSON-RPC error code of a request whose answer can no longer arrive (outside the spec's range). */
export const RESPONSE_LOST_CODE = -32099;

/**
 * After the server is known to have lost the session, how long a request whose POST has no
 * status yet may take to get its own answer (a 404 proves it never ran) before it is failed as
 * one that may have run.
 */
const SENDING_GRACE_MS = 1000;

/** How to build a {@link TrackedHttpTransport}. */
export interface TrackedHttpOptions {
  url: URL;
  headers: Readonly<Record<string, string>>;
  authProvider?: OAuthClientProvider;
  /** Resume this session instead of initialising a new one. */
  sessionId?: string;
  protocolVersion?: string;
  /** A 401/403 answer from the MCP endpoint, with its `WWW-Authenticate` parameters. */
  onChallenge?(challenge: AuthChallenge): void;
  /** A POST carrying the session id was answered 404/400 for it: the server no longer knows the session. */
  onSessionLost?(): void;
  /** The fetch to use underneath (tests); default the global `fetch`. */
  fetch?: FetchLike;
  /** The largest JSON answer or SSE event accepted (bytes). Default 10 MB. */
  maxMessageBytes?: number;
}

interface Exchange {
  id: RequestId;
  delivery: Delivery;
}

/** The request whose `send()` is running (or whose answer stream is being read) in this async context. */
const exchangeContext = new AsyncLocalStorage<Exchange>();

function sameEndpoint(input: string | URL | Request, endpoint: URL): boolean {
  try {
    const url = new URL(input instanceof Request ? input.url : String(input));
    return url.origin === endpoint.origin && url.pathname === endpoint.pathname;
  } catch {
    return false;
  }
}

function headerOf(init: RequestInit | undefined, name: string): string | null {
  return new Headers(init?.headers).get(name);
}

async function namesSession(response: Response): Promise<boolean> {
  const text = await response
    .clone()
    .text()
    .catch(() => '');
  return /session/i.test(text.slice(0, 2000));
}

/** Streamable HTTP with delivery facts, spec-judged session loss and prompt failure of lost answers. */
export class TrackedHttpTransport implements Transport {
  /**
   * Every request has its own answer stream (a POST's response): the SDK client relies on it to
   * speak the 2026-07-28 era, where a request's stream is its only way back.
   */
  readonly hasPerRequestStream = true;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  private readonly inner: StreamableHTTPClientTransport;
  /** Requests sent and not yet answered, with their delivery records. */
  private readonly pending = new Map<RequestId, Delivery>();
  private idleWaiters: (() => void)[] = [];
  private readonly fetchImpl: FetchLike;
  private readonly limit: number;
  /** Set by close(): streams broken by our own abort get no end marker. */
  private closing = false;
  /** A standalone GET stream was open once: a later 404 on it makes the session suspect. */
  private standaloneStreamSeen = false;
  private probing = false;
  private probeSeq = 0;
  /** Ids of our own session probes (their answers are ours, not the client's). */
  private readonly probes = new Set<RequestId>();
  private lost = false;

  constructor(private readonly options: TrackedHttpOptions) {
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
    this.limit = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.inner = new StreamableHTTPClientTransport(options.url, {
      requestInit: { headers: { ...options.headers } },
      fetch: (input, init) => this.fetchThrough(input, init),
      ...(options.authProvider ? { authProvider: options.authProvider } : {}),
      ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
    });
    if (options.protocolVersion !== undefined) this.inner.setProtocolVersion(options.protocolVersion);
    // The SDK passes no extra info on the client side; the wider signature is the Transport contract.
    this.inner.onmessage = (message: JSONRPCMessage) => this.receive(message);
    this.inner.onerror = (error) => this.failed(error);
    this.inner.onclose = () => {
      this.pending.clear();
      for (const resolve of this.idleWaiters.splice(0)) resolve();
      this.onclose?.();
    };
  }

  /** Requests sent and not yet answered (or failed). */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Resolves once no request is waiting for its answer. */
  whenIdle(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private settle(id: RequestId): void {
    if (!this.pending.delete(id) || this.pending.size > 0) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** The session id (undefined for a stateless server). */
  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  /** The negotiated protocol version. */
  get protocolVersion(): string | undefined {
    return this.inner.protocolVersion;
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion(version);
  }

  start(): Promise<void> {
    return this.inner.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (!isJSONRPCRequest(message)) return this.inner.send(message, options);
    const delivery = currentDelivery() ?? newDelivery();
    const id = message.id;
    this.pending.set(id, delivery);
    const sendOptions: TransportSendOptions = {
      ...options,
      onresumptiontoken: (token) => {
        delivery.resumable = true;
        options?.onresumptiontoken?.(token);
      },
    };
    return exchangeContext.run({ id, delivery }, () => this.inner.send(message, sendOptions)).catch((error: unknown) => {
      this.settle(id);
      throw error;
    });
  }

  /** Ends the session on the server (HTTP DELETE); a server that is gone or refuses is the caller's to judge. */
  terminateSession(): Promise<void> {
    return this.inner.terminateSession();
  }

  /** Opens the standalone GET stream of a resumed session (the SDK opens it only after its own `initialize`). */
  resumeStream(lastEventId: string): Promise<void> {
    return this.inner.resumeStream(lastEventId);
  }

  close(): Promise<void> {
    this.closing = true;
    return this.inner.close();
  }

  private receive(message: JSONRPCMessage): void {
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined && this.probes.delete(message.id)) {
      this.settle(message.id);
      return;
    }
    if (isEndMarker(message)) {
      const delivery = this.pending.get(message.params.requestId);
      // Answered already (the normal case), or resumable: the SDK reconnects with Last-Event-ID.
      const tooLarge = message.params.tooLarge;
      if (delivery && tooLarge !== undefined) delivery.tooLarge = tooLarge;
      if (delivery && (!delivery.resumable || tooLarge !== undefined)) this.lose(message.params.requestId, delivery, message.params.reason);
      return;
    }
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined) this.settle(message.id);
    this.onmessage?.(message);
  }

  private failed(error: Error): void {
    // The SDK gave up resuming an answer stream: that request's answer will not come.
    const exchange = exchangeContext.getStore();
    if (exchange && this.pending.get(exchange.id) === exchange.delivery && /Maximum reconnection attempts/i.test(error.message)) {
      this.lose(exchange.id, exchange.delivery, 'the answer stream broke and could not be resumed');
    }
    this.onerror?.(error);
  }

  /** Fails one pending request now: the server accepted it, its answer can no longer arrive. */
  private lose(id: RequestId, delivery: Delivery, reason: string): void {
    this.settle(id);
    delivery.streamLost = true;
    if (this.lost) delivery.sessionGone = true;
    const code = delivery.tooLarge === undefined ? RESPONSE_LOST_CODE : MESSAGE_TOO_LARGE_CODE;
    this.onmessage?.({ jsonrpc: '2.0', id, error: { code, message: reason } });
  }

  private async fetchThrough(input: string | URL, init?: RequestInit): Promise<Response> {
    const method = (init?.method ?? 'GET').toUpperCase();
    const onEndpoint = sameEndpoint(input, this.options.url);
    const exchange = exchangeContext.getStore();
    const delivery = exchange && onEndpoint && method === 'POST' ? exchange.delivery : undefined;
    if (delivery) delivery.state = init?.signal?.aborted ? 'refused' : 'sending';
    let response: Response;
    try {
      response = await this.fetchImpl(input, init);
    } catch (error) {
      if (delivery?.state === 'sending' && connectPhaseCode(error) !== undefined) delivery.state = 'refused';
      throw error;
    }
    if (!onEndpoint) return response;
    if (response.status === 401 || response.status === 403) this.reportChallenge(response);
    if (method === 'GET') return this.standaloneStream(response, init);
    if (!delivery || !exchange) return response;
    delivery.httpStatus = response.status;
    if (response.ok) {
      delivery.state = 'accepted';
      const type = response.headers.get('content-type') ?? '';
      if (!response.body) return response;
      if (type.includes('text/event-stream')) return withEndMarker(response, exchange.id, this.limit, () => this.closing);
      if (!type.includes('json') && response.status !== 202) {
        // Whatever answered is not an MCP endpoint (an auth proxy's login page, say): the MCP
        // server never processed this request.
        delivery.state = 'rejected';
        throw new NotMcpAnswerError(response.status, type.split(';')[0]?.trim() ?? '', await firstLineOf(response));
      }
      // A JSON answer is one message: reading past the limit fails it (the SDK's json() rejects).
      return new Response(limitBody(response.body, this.limit, () => (delivery.tooLarge = this.limit)), { status: response.status, statusText: response.statusText, headers: response.headers });
    }
    if (response.status >= 500) {
      delivery.state = 'unknown';
      return response;
    }
    delivery.state = 'rejected';
    if (headerOf(init, 'mcp-session-id') !== null && (response.status === 404 || (response.status === 400 && (await namesSession(response))))) {
      delivery.sessionLost = true;
      this.sessionLost();
    }
    return response;
  }

  /**
   * The server no longer knows the session. Requests it had accepted can no longer be answered
   * (their answer streams went with the session, and a JSON answer would never be written): they
   * fail now, as requests that may have run. Requests still on their way get their own 404.
   */
  private sessionLost(): void {
    if (this.lost) return;
    this.lost = true;
    const reason = 'the server no longer knows the session that was carrying it';
    for (const [id, delivery] of [...this.pending]) {
      if (delivery.state === 'accepted' && !this.probes.has(id)) this.lose(id, delivery, reason);
    }
    // A POST still waiting for its status either reached the server before it forgot the session
    // (its JSON answer will never be written) or is about to get its own 404. Both are told
    // apart by its own answer, given a moment; after that it is lost as one that may have run.
    const sending = [...this.pending].filter(([id, delivery]) => delivery.state === 'sending' && !this.probes.has(id));
    if (sending.length > 0) {
      setTimeout(() => {
        for (const [id, delivery] of sending) {
          if (this.pending.get(id) === delivery && delivery.state === 'sending') this.lose(id, delivery, reason);
        }
      }, SENDING_GRACE_MS).unref();
    }
    this.options.onSessionLost?.();
  }

  /**
   * Asks the server, with a `ping` on the session, whether it still knows the session: the answer
   * to a POST is the only judge of that. Called when the standalone stream that used to open
   * answers 404. A 404/400 for the session leads to {@link sessionLost}.
   */
  private async probeSession(): Promise<void> {
    if (this.probing || this.lost || this.closing || this.inner.sessionId === undefined) return;
    this.probing = true;
    const id = `mcp-supervisor-probe-${++this.probeSeq}`;
    const delivery = newDelivery();
    this.probes.add(id);
    this.pending.set(id, delivery);
    try {
      await exchangeContext.run({ id, delivery }, () => this.inner.send({ jsonrpc: '2.0', id, method: 'ping' }));
    } catch {
      // Its verdict, if any, was taken from the answer's status.
    } finally {
      this.probing = false;
      if (delivery.state !== 'accepted') {
        this.probes.delete(id);
        this.settle(id);
      }
    }
  }

  /**
   * A GET without `Last-Event-ID` opens the optional standalone stream: 404 there means "no such
   * stream" (what Express-style servers answer), handed to the SDK as the 405 it understands. A
   * GET resuming an answer stream keeps its real status. A stream that opened before and now
   * answers 404 only makes the session suspect: {@link probeSession} asks with a POST.
   */
  private async standaloneStream(response: Response, init: RequestInit | undefined): Promise<Response> {
    if (response.ok) {
      this.standaloneStreamSeen = true;
      return guardStream(response, this.limit);
    }
    // A stream that used to open and now answers 404: the session may be gone. Ask with a POST.
    if (response.status === 404 && this.standaloneStreamSeen) void this.probeSession();
    if (response.status !== 404 || headerOf(init, 'last-event-id') !== null) return response;
    await response.body?.cancel().catch(() => undefined);
    return new Response(null, { status: 405, statusText: 'Method Not Allowed (no standalone stream)' });
  }

  private reportChallenge(response: Response): void {
    if (!this.options.onChallenge) return;
    const { resourceMetadataUrl, scope, error } = extractWWWAuthenticateParams(response);
    this.options.onChallenge({
      status: response.status,
      ...(resourceMetadataUrl ? { resourceMetadataUrl: resourceMetadataUrl.href } : {}),
      ...(scope ? { scope } : {}),
      ...(error ? { error } : {}),
    });
  }
}
