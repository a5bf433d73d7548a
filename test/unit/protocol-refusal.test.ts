/**
 * A server's refusal of our protocol version (-32022, MCP 2026-07-28) read from both shapes it
 * arrives in: a `ProtocolError` (stdio, or an HTTP error answer to the request) and a JSON-RPC
 * body inside an HTTP error that is not such an answer. What the server says
 * is quoted, bounded, never trusted.
 */
import test from 'ava';
import { ProtocolError as McpError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { classifyFailure, refusedProtocolVersion } from '../../src/connection/classify.js';
import { UNSUPPORTED_PROTOCOL_VERSION_CODE } from '../../src/connection/era.js';

/** The SDK's error for a 4xx whose body is not an answer to the request it sent. */
class StreamableHTTPError extends SdkHttpError {
  constructor(status: number, text: string) {
    super(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${text}`, { status, text });
  }
}

const body = (error: unknown): string => JSON.stringify({ jsonrpc: '2.0', id: 0, error });

test('stdio (McpError) and HTTP (the JSON-RPC body of a 400) give the same reading', (t) => {
  const data = { supported: ['2026-07-28'], requested: '2025-11-25' };
  t.deepEqual(refusedProtocolVersion(new McpError(UNSUPPORTED_PROTOCOL_VERSION_CODE, 'Unsupported protocol version', data)), data);
  t.deepEqual(refusedProtocolVersion(new StreamableHTTPError(400, body({ code: -32022, message: 'Unsupported protocol version', data }))), data);
});

test('anything else is not a refusal: another code, a body that is not JSON, no error at all', (t) => {
  t.is(refusedProtocolVersion(new McpError(-32601, 'Method not found')), undefined);
  t.is(refusedProtocolVersion(new StreamableHTTPError(400, body({ code: -32600, message: 'Bad request' }))), undefined);
  t.is(refusedProtocolVersion(new StreamableHTTPError(400, '{not json')), undefined);
  t.is(refusedProtocolVersion(new Error('-32022')), undefined);
  t.is(refusedProtocolVersion(undefined), undefined);
});

test('a hostile refusal is bounded: at most 8 versions of at most 40 characters, strings only; a missing `requested` is ours', (t) => {
  const supported = [...Array.from({ length: 20 }, (_, index) => `v${index}`.padEnd(100, 'x')), 42, { nested: true }];
  const read = refusedProtocolVersion(new McpError(UNSUPPORTED_PROTOCOL_VERSION_CODE, 'no', { supported }));
  t.is(read?.supported.length, 8);
  t.true(read!.supported.every((version) => version.length === 40));
  t.is(read?.requested, '2025-11-25');
  t.deepEqual(refusedProtocolVersion(new McpError(UNSUPPORTED_PROTOCOL_VERSION_CODE, 'no', 'not an object'))?.supported, []);
});

test('classified as protocol — before the exit that follows it on stdio — naming what the server speaks', (t) => {
  const refusal = new McpError(UNSUPPORTED_PROTOCOL_VERSION_CODE, 'Unsupported protocol version', { supported: ['2026-07-28'], requested: '2025-11-25' });
  const failure = classifyFailure(refusal, { exit: { code: 0, signal: null }, stderrTail: 'Rejected 2025-era request' });
  t.is(failure.kind, 'protocol');
  t.is(failure.message, 'the server does not speak MCP 2025-11-25 (it speaks 2026-07-28): set "protocol": "2026-07-28" (or "auto") on this server to speak its era');
  t.is(failure.stderrTail, 'Rejected 2025-era request');
  const silent = classifyFailure(new McpError(UNSUPPORTED_PROTOCOL_VERSION_CODE, 'no'), {});
  t.is(silent.message, 'the server does not speak MCP 2025-11-25 (it did not say which it speaks)', 'no era is claimed that the server did not name');
});
