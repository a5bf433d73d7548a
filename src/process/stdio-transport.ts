/**
 * A stdio `Transport` for the MCP SDK that spawns the server as the leader of its own process
 * group.
 *
 * Why not the SDK's `StdioClientTransport`: it spawns the child in the host's process group and
 * kills only the direct child, so the grandchildren of `npx`/`uvx`/shell wrappers outlive it, and
 * it offers no hook to learn the pid before the first await. Here the spawn is `detached` (setsid),
 * the pid is handed to `onSpawn` synchronously, every kill goes to the whole group, and liveness
 * comes from the child's own `exit` event rather than pid polling. A ring buffer keeps the tail
 * of stderr for error messages.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { deserializeMessage, isJSONRPCRequest, serializeMessage } from '@modelcontextprotocol/client';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { currentDelivery } from '../connection/delivery.js';
import { DEFAULT_MAX_MESSAGE_BYTES, LineSplitter, MessageTooLargeError } from '../connection/limits.js';
import { runningGroupMembers, signalGroup } from './proc.js';

/** How long to wait for the rest of a process group to die after its leader exited. */
const GROUP_REAP_TIMEOUT_MS = 2000;
/** After the group is gone, how long stdout may still take to deliver its last bytes. */
const STDOUT_DRAIN_GRACE_MS = 100;
/**
 * Window in which repeated `list_changed` notifications of one kind are coalesced; shorter than
 * the host's re-list debounce (200 ms by default), so the last change is always seen.
 */
const LIST_CHANGED_COALESCE_MS = 50;
/** Poll interval while waiting for a group to empty (only when members were still there). */
const GROUP_POLL_MS = 5;

/** Environment variables a server inherits from the host by default (as the SDK does). */
const INHERITED_ENV = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG', 'TMPDIR'];

/** The safe default environment for a stdio server: a few host variables, never the host's secrets. */
export function defaultServerEnvironment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_ENV) {
    const value = process.env[name];
    // Exported shell functions start with "()": never pass them on.
    if (value !== undefined && !value.startsWith('()')) env[name] = value;
  }
  return env;
}

/** How a stdio server process ended. */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What to start. */
export interface StdioServerParameters {
  command: string;
  args?: readonly string[];
  env?: Readonly<Record<string, string>>;
  cwd?: string;
  /** Bytes of stderr kept for messages. Default 4096. */
  stderrTailBytes?: number;
  /** The longest message (one stdout line) accepted; a longer one kills the server. Default 10 MB. */
  maxMessageBytes?: number;
  /**
   * Repeated `list_changed` notifications of one kind within this window are dropped unparsed
   * (default 50 ms; 0 keeps them all). Must stay below the re-list debounce so no change is missed.
   */
  coalesceListChangedMs?: number;
  /** Added last to the environment (the host's lifeline marker): a config can never override it. */
  markerEnv?: Readonly<Record<string, string>>;
}

/** Hooks called synchronously, so pid bookkeeping never waits on an await. */
export interface StdioTransportHooks {
  /** Right after a successful spawn, before any await. */
  onSpawn?(pid: number): void;
  /** The moment the group leader exits, before pending requests are failed. */
  onLeaderExit?(pid: number, exit: ExitInfo): void;
  /** When the group leader has exited and the rest of its group has been killed and is gone. */
  onExit?(pid: number, exit: ExitInfo): void;
}

/** Timings of the close ladder. */
export interface CloseLadderOptions {
  /** Wait after closing stdin before SIGTERM. Default 1000 ms. */
  stdinGraceMs?: number;
  /** Wait after SIGTERM before SIGKILL. Default 1000 ms. */
  termGraceMs?: number;
}

/** The MCP stdio transport over a process-group leader. */
export class ProcessGroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcess | undefined;
  private readonly lines: LineSplitter;
  /** Set when the server sent a message over the limit (it was killed for it). */
  private oversized: number | undefined;
  /** When each kind of `list_changed` notification was last let through. */
  private readonly lastListChanged = new Map<string, number>();
  private stderrChunks: Buffer[] = [];
  private stderrBytes = 0;
  private exitInfo: ExitInfo | undefined;
  private closedNotified = false;
  private groupReaped = false;
  private readonly exitWaiters: ((exit: ExitInfo) => void)[] = [];

  constructor(
    private readonly params: StdioServerParameters,
    private readonly hooks: StdioTransportHooks = {},
  ) {
    this.lines = new LineSplitter(params.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES);
  }

  /** The limit a message of this server exceeded (the server was killed for it), if one did. */
  get tooLarge(): number | undefined {
    return this.oversized;
  }

  /**
   * Not the SDK's stderr stream (the tail is kept here, {@link stderrTail}). Present because the
   * SDK client tells a stdio transport by a `stderr` and a `pid` property: on stdio a silent
   * `server/discover` probe means an old server and falls back to `initialize`; on HTTP it would
   * mean an outage.
   */
  get stderr(): null {
    return null;
  }

  /** The leader's pid (also the process group id) once spawned. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** How the leader exited, once it has (its group may still be being reaped). */
  get exit(): ExitInfo | undefined {
    return this.exitInfo;
  }

  /** The last bytes the server wrote to stderr, as text. */
  stderrTail(): string {
    return Buffer.concat(this.stderrChunks).toString('utf8').slice(-(this.params.stderrTailBytes ?? 4096));
  }

  /** Resolves when the leader has exited and no member of its group is still running. */
  exited(): Promise<ExitInfo> {
    if (this.exitInfo && this.groupReaped) return Promise.resolve(this.exitInfo);
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  /** Spawns the server. Rejects when the spawn itself fails (ENOENT, EACCES…). */
  start(): Promise<void> {
    if (this.child) throw new Error('ProcessGroupStdioTransport already started');
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, [...(this.params.args ?? [])], {
        env: { ...defaultServerEnvironment(), ...this.params.env, ...this.params.markerEnv },
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        shell: false,
        windowsHide: true,
      });
      this.child = child;
      if (child.pid !== undefined) this.hooks.onSpawn?.(child.pid);
      let spawned = false;
      child.once('spawn', () => {
        spawned = true;
        resolve();
      });
      child.on('error', (error) => {
        if (!spawned) reject(error);
        else this.onerror?.(error);
      });
      child.once('exit', (code, signal) => this.handleExit({ code, signal }));
      child.stdout?.on('data', (chunk: Buffer) => this.handleStdout(chunk));
      child.stdout?.on('error', (error) => this.onerror?.(error));
      child.stdin?.on('error', (error) => {
        // EPIPE after the server died is expected; the exit handler reports the death.
        if (!this.exitInfo) this.onerror?.(error);
      });
      child.stderr?.on('data', (chunk: Buffer) => this.keepStderr(chunk));
    });
  }

  private keepStderr(chunk: Buffer): void {
    const limit = this.params.stderrTailBytes ?? 4096;
    this.stderrChunks.push(chunk);
    this.stderrBytes += chunk.length;
    while (this.stderrBytes - (this.stderrChunks[0]?.length ?? 0) >= limit && this.stderrChunks.length > 1) {
      this.stderrBytes -= this.stderrChunks.shift()!.length;
    }
  }

  /**
   * Every exception stays here: a listener that throws would take the whole host down. A line over
   * the limit kills the server (its group) — it can fail only itself.
   */
  private handleStdout(chunk: Buffer): void {
    if (this.oversized !== undefined) return;
    try {
      this.lines.push(chunk, (line) => this.dispatch(line));
    } catch (error) {
      if (!(error instanceof MessageTooLargeError)) throw error;
      this.oversized = error.limit;
      this.onerror?.(error);
      const pid = this.child?.pid;
      if (pid !== undefined) signalGroup(pid, 'SIGKILL');
    }
  }

  private dispatch(line: Buffer): void {
    if (this.coalesced(line)) return;
    let message: JSONRPCMessage;
    try {
      message = deserializeMessage(line.toString('utf8').replace(/\r$/, ''));
    } catch (error) {
      this.onerror?.(error as Error);
      return;
    }
    try {
      this.onmessage?.(message);
    } catch (error) {
      this.onerror?.(error as Error);
    }
  }

  /**
   * A `…/list_changed` notification right after another of the same kind carries nothing new:
   * the host re-lists after a debounce longer than this window, so the latest list is read
   * anyway. Dropping it before parsing is what keeps a server that floods thousands of them per
   * second from taking the host's main thread (parsing is most of the cost).
   */
  private coalesced(line: Buffer): boolean {
    if (this.params.coalesceListChangedMs === 0 || line.length > 200 || line.indexOf('list_changed') === -1) return false;
    const method = /"method"\s*:\s*"(notifications\/[a-z]+\/list_changed)"/.exec(line.toString('utf8'))?.[1];
    if (method === undefined) return false;
    const now = performance.now();
    const last = this.lastListChanged.get(method);
    if (last !== undefined && now - last < (this.params.coalesceListChangedMs ?? LIST_CHANGED_COALESCE_MS)) return true;
    this.lastListChanged.set(method, now);
    return false;
  }

  private handleExit(exit: ExitInfo): void {
    this.exitInfo = exit;
    const pid = this.child?.pid;
    if (pid !== undefined) this.hooks.onLeaderExit?.(pid, exit);
    const reaped = this.reapGroup(pid).then(() => {
      if (pid !== undefined) this.hooks.onExit?.(pid, exit);
      this.groupReaped = true;
      for (const waiter of this.exitWaiters.splice(0)) waiter(exit);
    });
    // Node may report the exit before the last stdout bytes were read: an answer written just
    // before exiting would be lost and a successful call would read as a death. So pending
    // requests are failed when stdout has ended (everything read and dispatched) — bounded by the
    // group's reaping, after which nothing can write any more. Liveness (onLeaderExit) is not delayed.
    const stdout = this.child?.stdout;
    const drained = !stdout || stdout.readableEnded || stdout.destroyed ? Promise.resolve() : new Promise<void>((resolve) => stdout.once('close', () => resolve()));
    void Promise.race([drained, reaped.then(() => new Promise<void>((resolve) => setTimeout(resolve, STDOUT_DRAIN_GRACE_MS).unref()))]).then(() => this.notifyClosed());
  }

  /**
   * The leader is gone; take down whatever it left in its group (wrapper grandchildren) and wait,
   * bounded, until none of them is running, so "exited" means the whole group.
   */
  private async reapGroup(pgid: number | undefined): Promise<void> {
    if (pgid === undefined || !signalGroup(pgid, 'SIGKILL')) return;
    const deadline = Date.now() + GROUP_REAP_TIMEOUT_MS;
    while (runningGroupMembers(pgid).length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, GROUP_POLL_MS));
    }
  }

  private notifyClosed(): void {
    if (this.closedNotified) return;
    this.closedNotified = true;
    this.lines.clear();
    this.onclose?.();
  }

  /**
   * Writes one JSON-RPC message, honouring back-pressure. A request of a tracked call is recorded
   * as delivered once written; one refused because the server had already exited provably never
   * reached it.
   */
  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    const delivery = isJSONRPCRequest(message) ? currentDelivery() : undefined;
    if (!stdin || this.exitInfo || stdin.destroyed) {
      if (delivery) delivery.state = 'refused';
      return Promise.reject(new Error(this.exitInfo ? 'stdio server has exited' : 'stdio server not started'));
    }
    if (delivery) delivery.state = 'accepted';
    return new Promise((resolve, reject) => {
      // Resolve at once while the pipe takes more; otherwise wait for this chunk's own callback,
      // which also fires (with an error) when the pipe breaks — 'drain' never comes after EPIPE,
      // and a send waiting for it would hang a connect or a call forever.
      let settled = false;
      const accepted = stdin.write(serializeMessage(message), (error) => {
        if (settled) return;
        settled = true;
        if (error) {
          // The pipe is broken (EPIPE): the server's end is closed, it cannot have read this.
          if (delivery) delivery.state = 'refused';
          reject(error);
        } else resolve();
      });
      if (accepted && !settled) {
        settled = true;
        resolve();
      }
    });
  }

  /** Sends SIGKILL to the whole group now and waits for the leader's exit. */
  async kill(): Promise<ExitInfo | undefined> {
    const pid = this.child?.pid;
    if (pid === undefined) return undefined;
    if (!this.exitInfo) signalGroup(pid, 'SIGKILL');
    return this.exited();
  }

  /**
   * The close ladder: close stdin → wait → SIGTERM the group → wait → SIGKILL the group. Resolves
   * once the leader has exited (its group was then killed too). Timers are unref'd.
   */
  async close(options: CloseLadderOptions = {}): Promise<void> {
    const child = this.child;
    if (!child || child.pid === undefined) {
      this.notifyClosed();
      return;
    }
    if (!this.exitInfo) {
      child.stdin?.end();
      if (!(await this.exitWithin(options.stdinGraceMs ?? 1000))) {
        signalGroup(child.pid, 'SIGTERM');
        if (!(await this.exitWithin(options.termGraceMs ?? 1000))) {
          signalGroup(child.pid, 'SIGKILL');
        }
      }
    }
    await this.exited();
    this.notifyClosed();
  }

  private exitWithin(ms: number): Promise<boolean> {
    if (this.exitInfo) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      timer.unref();
      void this.exited().then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }
}
