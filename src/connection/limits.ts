/**
 * Bounds on what a server may send: one message (a stdio line, an HTTP JSON body, one SSE event)
 * may not exceed `limits.maxMessageBytes`. Over it, that server or that request fails with
 * `MESSAGE_TOO_LARGE` naming the limit; nothing is buffered past it, so a flooding or hostile
 * server costs at most one limit of memory per stream and can never crash the host.
 */

/** Default `limits.maxMessageBytes`: 10 MB, the SDK's own stdio buffer size. */
export const DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** JSON-RPC error code of a request failed because its answer exceeded the limit (private range). */
export const MESSAGE_TOO_LARGE_CODE = -32098;

/** A message over the limit. */
export class MessageTooLargeError extends Error {
  override readonly name = 'MessageTooLargeError';
  constructor(readonly limit: number) {
    super(`a message from the server exceeded limits.maxMessageBytes (${limit} bytes)`);
  }
}

/**
 * Splits a byte stream into newline-terminated lines, refusing any line longer than `limit`
 * (without buffering more than that). Chunks are kept as a list and joined once per line, so a
 * long line costs O(n), not O(n²) as repeated concatenation would.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;

  constructor(private readonly limit: number) {}

  /**
   * Feeds a chunk; calls `onLine` for each complete line (without its `\n`).
   * @throws MessageTooLargeError when the current line exceeds the limit
   */
  push(chunk: Buffer, onLine: (line: Buffer) => void): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(10, start);
      const end = newline === -1 ? chunk.length : newline;
      if (this.size + (end - start) > this.limit) {
        this.clear();
        throw new MessageTooLargeError(this.limit);
      }
      if (newline === -1) {
        if (end > start) {
          this.parts.push(chunk.subarray(start));
          this.size += end - start;
        }
        return;
      }
      const piece = chunk.subarray(start, newline);
      const line = this.parts.length === 0 ? piece : Buffer.concat([...this.parts, piece]);
      this.clear();
      start = newline + 1;
      onLine(line);
    }
  }

  clear(): void {
    this.parts = [];
    this.size = 0;
  }
}

/**
 * Counts the bytes of the current Server-Sent Event across chunks (an event ends at a blank
 * line). `check` throws once one event grows past the limit.
 */
export class SseEventGuard {
  private current = 0;
  /** The last two bytes seen, across chunks (-1: none yet). */
  private last = -1;
  private beforeLast = -1;

  constructor(private readonly limit: number) {}

  /** @throws MessageTooLargeError when the event being read exceeds the limit */
  check(chunk: Uint8Array): void {
    const byteAt = (index: number): number => (index >= 0 ? chunk[index]! : index === -1 ? this.last : this.beforeLast);
    let from = 0;
    for (let index = chunk.indexOf(10); index !== -1; index = chunk.indexOf(10, index + 1)) {
      // A blank line (`\n\n` or `\n\r\n`) ends the event.
      const previous = byteAt(index - 1);
      if (previous === 10 || (previous === 13 && byteAt(index - 2) === 10)) {
        this.current = 0;
        from = index + 1;
      }
    }
    this.current += chunk.length - from;
    if (chunk.length >= 2) {
      this.beforeLast = chunk[chunk.length - 2]!;
      this.last = chunk[chunk.length - 1]!;
    } else if (chunk.length === 1) {
      this.beforeLast = this.last;
      this.last = chunk[0]!;
    }
    if (this.current > this.limit) throw new MessageTooLargeError(this.limit);
  }
}

/**
 * Wraps a body so reading it fails with {@link MessageTooLargeError} once more than `limit` bytes
 * came (a JSON answer is one message).
 */
export function limitBody(body: ReadableStream<Uint8Array>, limit: number, onTooLarge: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let total = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      total += value.byteLength;
      if (total > limit) {
        onTooLarge();
        await reader.cancel().catch(() => undefined);
        controller.error(new MessageTooLargeError(limit));
        return;
      }
      controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/** Default `limits.maxSchemaDepth`: nesting of a tool's input or output schema. */
export const DEFAULT_MAX_SCHEMA_DEPTH = 64;

/** Default `limits.maxCatalogItems`: tools (and, separately, prompts and resources) of one server. */
export const DEFAULT_MAX_CATALOG_ITEMS = 5000;

/** A catalogue that breaks a limit: the server fails with this reason (kind `too_large`). */
export class CatalogLimitError extends Error {
  override readonly name = 'CatalogLimitError';
}

/**
 * True when plain data nests deeper than `maxDepth` (objects and arrays count one level each).
 * Iterative: a recursive walk is exactly what an absurdly deep schema would overflow.
 */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    if (depth >= maxDepth) return true;
    for (const inner of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof inner === 'object' && inner !== null) stack.push([inner, depth + 1]);
    }
  }
  return false;
}

/** Safety cap on pagination, against a server that keeps returning cursors. */
export const MAX_LIST_PAGES = 1000;
