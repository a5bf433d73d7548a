/**
 * Delivery of one request, as a fact the transport records — never a guess the caller makes
 * from an error's text.
 *
 * A supervised call runs inside {@link trackDelivery}; the transport that carries it (the HTTP
 * fetch wrapper, the stdio pipe) updates the record as the request travels. When the call fails,
 * the record says whether the server can have run it:
 *
 * - `unsent`   – nothing was handed to the network or the pipe yet;
 * - `refused`  – the connection could not be opened (refused, unresolvable, bad port), or the
 *                transport was already closed: the request provably never reached the server;
 * - `rejected` – the server answered 4xx before processing (a 404/400 for an unknown session,
 *                401/403 for authorization): it did not run;
 * - `sending`  – the request was on its way and no answer came back (reset, timeout): it may have run;
 * - `accepted` – the server took it (2xx, or written into a stdio server's stdin): it may have run;
 * - `unknown`  – the server answered 5xx: it may have run.
 *
 * The record travels with the call through `AsyncLocalStorage`, so the fetch wrapper and the
 * stdio pipe find it without any change to the SDK's request path.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Where a request got to. */
export type DeliveryState = 'unsent' | 'refused' | 'rejected' | 'sending' | 'accepted' | 'unknown';

/** What the transport learned of one request. Mutated by the transport only. */
export interface Delivery {
  state: DeliveryState;
  /** HTTP status of the answer to the POST, when there was one. */
  httpStatus?: number;
  /** The request carried a session id the server no longer knows (404, or 400 naming the session). */
  sessionLost?: boolean;
  /** The answer's stream ended or broke after the server accepted the request, before the answer. */
  streamLost?: boolean;
  /** ...because the server forgot the session that was carrying the request. */
  sessionGone?: boolean;
  /** The answer exceeded `limits.maxMessageBytes` (this limit) and was refused. */
  tooLarge?: number;
  /** The server sent an event id on the answer's stream: the SDK resumes it instead of giving up. */
  resumable?: boolean;
}

const context = new AsyncLocalStorage<Delivery>();

/** A fresh record. */
export function newDelivery(): Delivery {
  return { state: 'unsent' };
}

/** Runs `call` with a fresh {@link Delivery} record that the transport fills in. */
export function trackDelivery<T>(call: () => Promise<T>): { promise: Promise<T>; delivery: Delivery } {
  const delivery = newDelivery();
  return { promise: context.run(delivery, call), delivery };
}

/** The record of the call running in this async context, if any. */
export function currentDelivery(): Delivery | undefined {
  return context.getStore();
}

/** True when the server can have run the request (it was accepted, or its fate is unknown). */
export function mayHaveRun(delivery: Delivery): boolean {
  return delivery.state === 'sending' || delivery.state === 'accepted' || delivery.state === 'unknown';
}
