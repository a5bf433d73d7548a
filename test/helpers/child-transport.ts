/**
 * An SDK client `Transport` over the stdio of a child process that the test already spawned.
 *
 * The SDK's `StdioClientTransport` insists on spawning the process itself, without `detached`,
 * so the server shares the test runner's process group and cannot be killed as a group. The
 * fixture helpers spawn in a fresh group instead and talk to it through this transport.
 *
 * Closure semantics match the SDK's: `onclose` fires when the child's stdout closes, i.e. when
 * every process holding the pipe's write end is gone (a wrapper's grandchild may hold it long
 * after the server exited; that is real behaviour, not hidden here).
 */
import type { ChildProcess } from 'node:child_process';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** JSON-RPC over a spawned child's stdin/stdout (newline-delimited, as MCP stdio). */
export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly buffer = new ReadBuffer();
  private closed = false;

  /** @param child a process spawned with `stdio: ['pipe', 'pipe', …]`. */
  constructor(private readonly child: ChildProcess) {}

  async start(): Promise<void> {
    const { stdout, stdin } = this.child;
    if (stdout === null || stdin === null) throw new Error('ChildStdioTransport needs piped stdin and stdout');
    stdout.on('data', this.onData);
    stdout.on('error', this.onStreamError);
    stdin.on('error', this.onStreamError);
    stdout.once('close', this.onStdoutClose);
  }

  send(message: JSONRPCMessage): Promise<void> {
    const { stdin } = this.child;
    if (this.closed || stdin === null || !stdin.writable) return Promise.reject(new Error('Not connected'));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Stops reading and ends the child's stdin (a polite "please exit"); does not kill. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.child.stdin?.end();
    this.finish();
  }

  private readonly onData = (chunk: Buffer): void => {
    this.buffer.append(chunk);
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  };

  private readonly onStreamError = (error: Error): void => {
    this.onerror?.(error);
  };

  private readonly onStdoutClose = (): void => {
    this.finish();
  };

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    const { stdout, stdin } = this.child;
    stdout?.off('data', this.onData);
    stdout?.off('error', this.onStreamError);
    stdout?.off('close', this.onStdoutClose);
    stdin?.off('error', this.onStreamError);
    this.buffer.clear();
    this.onclose?.();
  }
}
