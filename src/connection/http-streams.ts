/**
 * The answer and standalone streams of Streamable HTTP, as `TrackedHttpTransport` hands them to
 * the SDK: an answer stream is followed by a private end marker naming its request (so a stream
 * that ends without the answer fails that request at once), and every event is held to the size
 * limit (one event over it fails its request, or cuts a standalone stream).
 */
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/client';
import { describeError } from '../errors.js';
import { MessageTooLargeError, SseEventGuard } from './limits.js';

/** Method of the private end-of-stream marker (never sent to a server, never seen by a caller). */
const STREAM_END_METHOD = 'notifications/mcp-supervisor/stream-end';

function endEvent(id: RequestId, reason: string, tooLarge?: number): string {
  const marker = { jsonrpc: '2.0', method: STREAM_END_METHOD, params: { requestId: id, reason, ...(tooLarge === undefined ? {} : { tooLarge }) } };
  // The leading blank lines terminate a partial event the stream may have been cut inside.
  return `\n\nevent: message\ndata: ${JSON.stringify(marker)}\n\n`;
}

/**
 * Wraps an answer stream so that its end (or break, or an event over the size limit) is followed
 * by the end marker of `id`. A stream broken because the transport itself is closing gets no
 * marker: closing fails every pending request anyway.
 */
export function withEndMarker(response: Response, id: RequestId, limit: number, closing: () => boolean): Response {
  const source = response.body!.getReader();
  const encoder = new TextEncoder();
  const guard = new SseEventGuard(limit);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let reason: string;
      let tooLarge: number | undefined;
      try {
        const { done, value } = await source.read();
        if (!done) {
          guard.check(value);
          controller.enqueue(value);
          return;
        }
        reason = 'the server ended the answer stream without the answer';
      } catch (error) {
        if (error instanceof MessageTooLargeError) {
          tooLarge = error.limit;
          reason = error.message;
          await source.cancel().catch(() => undefined);
        } else if (closing()) {
          controller.error(error);
          return;
        } else {
          reason = `the answer stream broke (${describeError(error)})`;
        }
      }
      controller.enqueue(encoder.encode(endEvent(id, reason, tooLarge)));
      controller.close();
    },
    cancel(reason) {
      return source.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** Cuts a standalone stream whose event grows past the limit (its notifications are lost, nothing else). */
export function guardStream(response: Response, limit: number): Response {
  if (!response.body) return response;
  const source = response.body.getReader();
  const guard = new SseEventGuard(limit);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await source.read();
      if (done) {
        controller.close();
        return;
      }
      try {
        guard.check(value);
      } catch (error) {
        await source.cancel().catch(() => undefined);
        controller.error(error);
        return;
      }
      controller.enqueue(value);
    },
    cancel(reason) {
      return source.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/** True for the private end-of-stream marker {@link withEndMarker} appends. */
export function isEndMarker(message: JSONRPCMessage): message is { jsonrpc: '2.0'; method: string; params: { requestId: RequestId; reason: string; tooLarge?: number } } {
  return 'method' in message && message.method === STREAM_END_METHOD && !('id' in message);
}

