/**
 * The main-thread side of discovery: one owner (discovery body) per profile key, started in the
 * piscina pool, its outcomes accepted only while its generation is current, and retired through
 * the quiescence ladder:
 *
 *   1. cooperative — bump the generation, raise the cancel flag, `Atomics.notify`; the body kills
 *      its process groups from its own loop and returns;
 *   2. terminate   — after `quiesceGraceMs`, abort the piscina task: the worker is terminated, and
 *      we wait for its `exit` event;
 *   3. kill        — SIGKILL every process group whose leader the body recorded in the
 *      SharedArrayBuffer, and wait (bounded) until `/proc` shows none of them running.
 *
 * `quiesce()` resolves only when the worker has exited and every recorded process is gone
 * (zombies are counted as dead, and reported); it says how long each rung took. The coordinator
 * never starts a second owner for a key while the first is alive.
 */
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { ServerConfig } from '../config/types.js';
import { DEFAULT_CLIENT_INFO } from '../client/info.js';
import type { RpcReply, RpcRequest } from '../client/remote.js';
import { type ClientSideDescriptor, type SideCall, bareDescriptor } from '../connection/client-side.js';
import { McpSupervisorError, describeError } from '../errors.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { processState, runningGroupMembers, signalGroup } from '../process/proc.js';
import { EntrySlots, PID_SLOTS } from './slots.js';
import type { SharingStats } from './shared.js';
import type { BodyMessage, BodyResult, BodyTestHooks, DiscoveryLimits, DiscoveryTask, SettledOutcome } from './types.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SCHEMA_DEPTH } from '../connection/limits.js';

/** Tuning of discovery. Every field is optional; defaults are in {@link resolveDiscoveryOptions}. */
export interface DiscoveryOptions {
  /**
   * Worker threads in the pool. Default: one less than the machine's cores (at least 1, at most
   * 4), so a core stays free for the host's own main thread.
   */
  maxThreads?: number;
  /**
   * OS scheduling priority (nice, 0–19) of discovery workers and of the servers they spawn for
   * discovery. Default 19: discovery yields the CPU to the host; sessions keep normal priority.
   */
  niceness?: number;
  /** Idle workers are ended after this long (ms). Default 30 000. */
  idleTimeoutMs?: number;
  /** Servers of one profile connected at once. Default 4. */
  serverConcurrency?: number;
  /** Per-server deadline for connect + listing (ms). Default 15 000. */
  connectTimeoutMs?: number;
  /** Cooperative rung of the quiescence ladder (ms) before the worker is terminated. Default 250. */
  quiesceGraceMs?: number;
  /** How long the terminate and kill rungs may wait for an exit before giving up (ms). Default 2000. */
  quiesceHardWaitMs?: number;
}

/** {@link DiscoveryOptions} with every default filled in. */
export type ResolvedDiscoveryOptions = Required<DiscoveryOptions>;

function positiveInteger(name: string, value: number | undefined, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value <= 0 || value > max) {
    throw new McpSupervisorError(
      'INVALID_CONFIG',
      `Expected \`discovery.${name}\` to be a positive integer${max < Number.MAX_SAFE_INTEGER ? ` up to ${max}` : ''}, got \`${String(value)}\` (${typeof value})`,
    );
  }
  return value;
}

function niceness(value: number | undefined): number {
  if (value === undefined) return 19;
  if (!Number.isInteger(value) || value < 0 || value > 19) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`discovery.niceness\` to be an integer from 0 to 19, got \`${String(value)}\` (${typeof value})`);
  }
  return value;
}

/** Validates discovery options and fills in defaults. @throws McpSupervisorError INVALID_CONFIG */
export function resolveDiscoveryOptions(options: DiscoveryOptions = {}): ResolvedDiscoveryOptions {
  return {
    maxThreads: positiveInteger('maxThreads', options.maxThreads, Math.max(1, Math.min(4, availableParallelism() - 1))),
    niceness: niceness(options.niceness),
    idleTimeoutMs: positiveInteger('idleTimeoutMs', options.idleTimeoutMs, 30_000),
    serverConcurrency: positiveInteger('serverConcurrency', options.serverConcurrency, 4, PID_SLOTS),
    connectTimeoutMs: positiveInteger('connectTimeoutMs', options.connectTimeoutMs, 15_000),
    quiesceGraceMs: positiveInteger('quiesceGraceMs', options.quiesceGraceMs, 250),
    quiesceHardWaitMs: positiveInteger('quiesceHardWaitMs', options.quiesceHardWaitMs, 2000),
  };
}

/**
 * The host's client side, as discovery needs it: a plain-data description of each server's side
 * for the worker, and the main-thread answer to every call the worker forwards (elicitation,
 * OAuth provider, challenges).
 */
export interface DiscoverySides {
  describe(key: string, server: ServerConfig): ClientSideDescriptor;
  serve(key: string, server: ServerConfig, call: SideCall, signal: AbortSignal): Promise<unknown>;
}

/** No handlers, no auth: what a coordinator built without a host declares. */
const BARE_SIDES: DiscoverySides = {
  describe: () => bareDescriptor(DEFAULT_CLIENT_INFO),
  serve: () => Promise.reject(new Error('no client-side handlers are configured')),
};

/** Callbacks of one discovery run; called only for messages of the still-current generation. */
export interface RunHandlers {
  /** The body started on a worker thread. */
  onStarted?(info: { generation: number; threadId: number }): void;
  /** One server settled. */
  onOutcome(outcome: SettledOutcome, generation: number): void;
  /** Every outcome has been delivered, or the body died (then `error` says why). */
  onDone(info: { generation: number; error?: McpSupervisorError }): void;
}

/** Which rung finished the job. */
export type QuiesceRung = 'idle' | 'cooperative' | 'terminate' | 'kill';

/** What `quiesce()` did and how long each rung took. */
export interface QuiesceReport {
  key: string;
  /** The generation that was retired (undefined when no body had run). */
  generation: number | undefined;
  reason: string;
  /** The highest rung that was needed. */
  rung: QuiesceRung;
  cooperativeMs?: number;
  terminateMs?: number;
  killMs?: number;
  totalMs: number;
  /** True when the worker exited and no recorded process is still running. */
  quiesced: boolean;
  /** Recorded pids (or group members) still running after the kill rung: a failure. */
  survivors: number[];
  /** Recorded pids left as zombies (dead, not reaped: their worker was terminated). */
  zombies: number[];
}

/** Counters and gauges of the discovery layer. */
export interface DiscoveryStats {
  liveOwners: number;
  /** Times a body started while another of the same key was alive. Must be 0. */
  ownerOverlaps: number;
  workers: number;
  peakWorkers: number;
  recordedChildren: number;
  zombies: number;
  droppedStaleMessages: number;
  /** Worker failures piscina could not attribute to a task (and the last one's message). */
  poolErrors: number;
  lastPoolError?: string;
  quiesces: { total: number; byRung: Record<QuiesceRung, number>; cooperativeMs: number[]; terminateMs: number[]; killMs: number[] };
  /** Discovery shared across profiles (absent for a bare coordinator). */
  sharing?: SharingStats;
}

interface Owner {
  generation: number;
  abort: AbortController;
  /** Settles (never rejects) when the piscina task is over. */
  task: Promise<BodyResult | undefined>;
  taskSettled: boolean;
  port: MessagePort;
}

interface Entry {
  slots: EntrySlots;
  owner: Owner | undefined;
  /** Zombies left by terminated workers, remembered for stats. */
  zombies: Set<number>;
}

const KILL_POLL_MS = 5;
/** Durations kept per rung for the stats (a ring; enough for p99). */
const TIMING_HISTORY = 512;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function elapsedSince(start: number): number {
  return Math.round((performance.now() - start) * 100) / 100;
}

function pushBounded(list: number[], value: number): void {
  list.push(value);
  if (list.length > TIMING_HISTORY) list.shift();
}

/** Parses an outcome a body sent as JSON; one that cannot be read fails that server alone. */
function readOutcome(server: string, json: string): SettledOutcome {
  try {
    return JSON.parse(json) as SettledOutcome;
  } catch (error) {
    return { status: 'failed', server, failure: { kind: 'protocol', message: `its answers could not be read: ${describeError(error)}` }, timings: { totalMs: 0 } };
  }
}

/** Main-thread owner of discovery bodies, one per profile key. */
export class DiscoveryCoordinator {
  readonly options: ResolvedDiscoveryOptions;
  private readonly pool: Piscina<DiscoveryTask, BodyResult>;
  private readonly entries = new Map<string, Entry>();
  private peakWorkers = 0;
  private poolErrors = 0;
  private lastPoolError: string | undefined;
  private droppedStale = 0;
  private closed = false;
  private readonly quiesceStats: DiscoveryStats['quiesces'] = {
    total: 0,
    byRung: { idle: 0, cooperative: 0, terminate: 0, kill: 0 },
    cooperativeMs: [],
    terminateMs: [],
    killMs: [],
  };

  constructor(
    options: DiscoveryOptions = {},
    private readonly sides: DiscoverySides = BARE_SIDES,
    private readonly limits: DiscoveryLimits = { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES, maxCatalogItems: DEFAULT_MAX_CATALOG_ITEMS, maxSchemaDepth: DEFAULT_MAX_SCHEMA_DEPTH },
    /** The host's lifeline marker, added to every server a body spawns. */
    private readonly markerEnv?: Readonly<Record<string, string>>,
  ) {
    this.options = resolveDiscoveryOptions(options);
    this.pool = new Piscina<DiscoveryTask, BodyResult>({
      filename: fileURLToPath(new URL('../../workers/discovery-body.js', import.meta.url)),
      maxThreads: this.options.maxThreads,
      minThreads: 0,
      idleTimeout: this.options.idleTimeoutMs,
      // One body per worker: terminating a worker must end exactly one body.
      concurrentTasksPerWorker: 1,
      // Let a worker's event loop run between tasks instead of blocking in Atomics.wait.
      atomics: 'async',
    });
    this.pool.on('workerCreate', () => {
      this.peakWorkers = Math.max(this.peakWorkers, this.pool.threads.length);
    });
    // Piscina emits 'error' for a worker that failed with no task to blame (one that could not
    // load its module, say). Unheard, that event would crash the host: count it instead; the
    // tasks of such a worker are failed by piscina itself, and their profiles settle as failed.
    this.pool.on('error', (error: unknown) => {
      this.poolErrors++;
      this.lastPoolError = describeError(error);
    });
  }

  private entry(key: string): Entry {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { slots: new EntrySlots(), owner: undefined, zombies: new Set() };
      this.entries.set(key, entry);
    }
    return entry;
  }

  /** The current generation of a key (0 before its first run). */
  generation(key: string): number {
    return this.entries.get(key)?.slots.generation() ?? 0;
  }

  /** True when `generation` is the key's current, uncancelled generation. */
  isCurrent(key: string, generation: number): boolean {
    return this.entries.get(key)?.slots.isCurrent(generation) ?? false;
  }

  /** True while a body of this key may still be running (its task has not settled). */
  hasOwner(key: string): boolean {
    const owner = this.entries.get(key)?.owner;
    return owner !== undefined && !owner.taskSettled;
  }

  /** Live owners of a key, as the SharedArrayBuffer counts them. */
  liveOwners(key: string): number {
    return this.entries.get(key)?.slots.liveOwners() ?? 0;
  }

  /**
   * Starts discovery of `servers` for `key` in a new generation.
   * @throws McpSupervisorError `QUIESCE_FAILED` if a body of this key is still alive (quiesce it first),
   *   `HOST_CLOSED` after close().
   */
  start(key: string, servers: readonly ServerConfig[], handlers: RunHandlers, testHooks?: BodyTestHooks): { generation: number } {
    if (this.closed) throw new McpSupervisorError('HOST_CLOSED', 'discovery is closed', { profile: key });
    const entry = this.entry(key);
    if (this.hasOwner(key) || entry.slots.liveOwners() > 0) {
      throw new McpSupervisorError('QUIESCE_FAILED', `a discovery body of profile "${key}" is still alive; quiesce it before starting another`, {
        profile: key,
      });
    }
    const generation = entry.slots.beginGeneration();
    const channel = new MessageChannel();
    const abort = new AbortController();
    let doneReported = false;
    const reportDone = (error?: McpSupervisorError): void => {
      if (doneReported || !entry.slots.isCurrent(generation)) return;
      doneReported = true;
      handlers.onDone(error === undefined ? { generation } : { generation, error });
    };
    const calls = new Map<number, AbortController>();
    const byName = new Map(servers.map((server) => [server.name, server]));
    channel.port1.on('message', (message: BodyMessage) => {
      if (message.type === 'rpc-cancel') {
        calls.get(message.id)?.abort(new Error('the server withdrew the request'));
        return;
      }
      if (message.generation !== generation || !entry.slots.isCurrent(generation)) {
        this.droppedStale++;
        if (message.type === 'rpc' && message.id !== 0) channel.port1.postMessage({ type: 'rpc-reply', id: message.id, ok: false, error: { message: 'discovery was retired' } });
        return;
      }
      if (message.type === 'rpc') this.serveCall(key, byName, message, calls, channel.port1);
      else if (message.type === 'started') handlers.onStarted?.({ generation, threadId: message.threadId });
      else if (message.type === 'outcome') handlers.onOutcome(readOutcome(message.server, message.json), generation);
      else {
        reportDone(message.error === undefined ? undefined : McpSupervisorError.fromJSON(message.error));
        channel.port1.close();
      }
    });
    // The body closes its end when it finishes; a terminated worker closes it implicitly.
    channel.port1.once('close', () => {
      reportDone(new McpSupervisorError('DISCOVERY_FAILED', `the discovery worker of profile "${key}" ended without finishing`, { profile: key }));
    });
    const task: DiscoveryTask = {
      profile: key,
      generation,
      slots: entry.slots.buffer,
      servers: servers.map((server) => ({ ...server })),
      sides: new Map(servers.map((server) => [server.name, this.sides.describe(key, server)])),
      serverConcurrency: this.options.serverConcurrency,
      connectTimeoutMs: this.options.connectTimeoutMs,
      niceness: this.options.niceness,
      limits: this.limits,
      ...(this.markerEnv === undefined ? {} : { markerEnv: { ...this.markerEnv } }),
      port: channel.port2,
      ...(testHooks === undefined ? {} : { testHooks }),
    };
    const owner: Owner = {
      generation,
      abort,
      taskSettled: false,
      port: channel.port1,
      task: Promise.resolve(undefined),
    };
    owner.task = this.pool
      .run(task, { transferList: [channel.port2], signal: abort.signal })
      .then(
        (result) => result,
        (error: unknown) => {
          if (!abort.signal.aborted) {
            reportDone(new McpSupervisorError('DISCOVERY_FAILED', `discovery of profile "${key}" failed: ${describeError(error)}`, { profile: key }));
          }
          return undefined;
        },
      )
      .finally(() => {
        owner.taskSettled = true;
      });
    entry.owner = owner;
    return { generation };
  }

  /**
   * Starts a new generation of `key` with no body: every server of the run is answered from
   * elsewhere (a discovery another profile shares). Same rules as {@link start}.
   */
  beginGeneration(key: string): { generation: number } {
    if (this.closed) throw new McpSupervisorError('HOST_CLOSED', 'discovery is closed', { profile: key });
    const entry = this.entry(key);
    if (this.hasOwner(key) || entry.slots.liveOwners() > 0) {
      throw new McpSupervisorError('QUIESCE_FAILED', `a discovery body of profile "${key}" is still alive; quiesce it before starting another`, { profile: key });
    }
    return { generation: entry.slots.beginGeneration() };
  }

  /** Drops the slots of a key nothing runs under any more (keys of finished shared flights). */
  forget(key: string): void {
    const entry = this.entries.get(key);
    if (entry && !this.hasOwner(key) && entry.slots.liveOwners() === 0 && entry.slots.pids().length === 0 && entry.slots.overlaps() === 0 && entry.zombies.size === 0) this.entries.delete(key);
  }

  /** Answers one call a body forwarded; the reply is dropped if the port closed meanwhile. */
  private serveCall(key: string, servers: ReadonlyMap<string, ServerConfig>, message: RpcRequest, calls: Map<number, AbortController>, port: MessagePort): void {
    const server = servers.get(message.server);
    const controller = new AbortController();
    if (message.id !== 0) calls.set(message.id, controller);
    const answer = server ? this.sides.serve(key, server, message.call, controller.signal) : Promise.reject(new Error(`unknown server "${message.server}"`));
    const reply = (payload: RpcReply): void => {
      calls.delete(message.id);
      if (message.id === 0) return;
      try {
        port.postMessage(payload);
      } catch (error) {
        // A value that cannot cross threads (a handler returned a function, say): say so instead.
        if (payload.ok) port.postMessage({ type: 'rpc-reply', id: message.id, ok: false, error: { message: `the handler's answer cannot be sent to the discovery worker: ${describeError(error)}` } });
      }
    };
    void answer.then(
      (value) => reply({ type: 'rpc-reply', id: message.id, ok: true, value }),
      (error: unknown) => {
        const code = error instanceof McpError ? error.code : undefined;
        reply({ type: 'rpc-reply', id: message.id, ok: false, error: { message: describeError(error), ...(code === undefined ? {} : { code }) } });
      },
    );
  }

  /**
   * Retires the key's current generation and walks the quiescence ladder until the body's worker
   * has exited (or returned) and every process it recorded is gone.
   */
  async quiesce(key: string, reason: string): Promise<QuiesceReport> {
    const started = performance.now();
    const entry = this.entries.get(key);
    const owner = entry?.owner;
    const report: QuiesceReport = {
      key,
      generation: owner?.generation,
      reason,
      rung: 'idle',
      totalMs: 0,
      quiesced: true,
      survivors: [],
      zombies: [],
    };
    if (!entry) return report;
    entry.slots.retire();
    if (owner) owner.port.close();

    if (owner && !owner.taskSettled) {
      report.rung = 'cooperative';
      const cooperativeStart = performance.now();
      const finished = await Promise.race([owner.task.then(() => true), sleep(this.options.quiesceGraceMs).then(() => false)]);
      report.cooperativeMs = elapsedSince(cooperativeStart);
      if (!finished) {
        report.rung = 'terminate';
        const terminateStart = performance.now();
        const exited = await this.terminateOwner(entry, owner);
        report.terminateMs = elapsedSince(terminateStart);
        if (!exited) report.quiesced = false;
      }
    }

    const recorded = entry.slots.pids();
    if (recorded.length > 0) {
      // Processes outlived the body (terminated worker, or a cooperative cancel that missed one).
      report.rung = 'kill';
      const killStart = performance.now();
      const { survivors, zombies } = await this.killRecorded(entry, recorded);
      report.killMs = elapsedSince(killStart);
      report.survivors = survivors;
      report.zombies = zombies;
      if (survivors.length > 0) report.quiesced = false;
    }
    if (entry.slots.liveOwners() > 0) report.quiesced = false;
    if (entry.owner === owner && owner?.taskSettled) entry.owner = undefined;
    report.totalMs = elapsedSince(started);
    this.recordQuiesce(report);
    return report;
  }

  /** Terminate rung: abort the piscina task and wait for the worker's exit. */
  private async terminateOwner(entry: Entry, owner: Owner): Promise<boolean> {
    const threadId = entry.slots.ownerThread(owner.generation);
    const worker: Worker | undefined = threadId === undefined ? undefined : this.pool.threads.find((candidate) => candidate.threadId === threadId);
    const exit = worker ? once(worker, 'exit').then(() => true) : Promise.resolve(true);
    owner.abort.abort(new Error('quiescence: cooperative cancel did not finish in time'));
    const exited = await Promise.race([Promise.all([exit, owner.task]).then(() => true), sleep(this.options.quiesceHardWaitMs).then(() => false)]);
    // The body cannot decrement its ownership from a terminated thread: do it for it, exactly once.
    if (exited) entry.slots.leaveOwner(owner.generation);
    return exited;
  }

  /** Kill rung: SIGKILL each recorded group and wait until none of its members is running. */
  private async killRecorded(entry: Entry, pids: number[]): Promise<{ survivors: number[]; zombies: number[] }> {
    for (const pid of pids) signalGroup(pid, 'SIGKILL');
    const deadline = performance.now() + this.options.quiesceHardWaitMs;
    let running = pids.filter((pid) => processState(pid) === 'alive' || runningGroupMembers(pid).length > 0);
    while (running.length > 0 && performance.now() < deadline) {
      await sleep(KILL_POLL_MS);
      for (const pid of running) signalGroup(pid, 'SIGKILL');
      running = running.filter((pid) => processState(pid) === 'alive' || runningGroupMembers(pid).length > 0);
    }
    const zombies: number[] = [];
    for (const pid of pids) {
      if (running.includes(pid)) continue;
      if (processState(pid) === 'zombie') {
        zombies.push(pid);
        entry.zombies.add(pid);
      }
      entry.slots.clearPid(pid);
    }
    return { survivors: running, zombies };
  }

  private recordQuiesce(report: QuiesceReport): void {
    const stats = this.quiesceStats;
    stats.total++;
    stats.byRung[report.rung]++;
    if (report.rung === 'cooperative') pushBounded(stats.cooperativeMs, report.totalMs);
    if (report.terminateMs !== undefined) pushBounded(stats.terminateMs, report.terminateMs);
    if (report.killMs !== undefined) pushBounded(stats.killMs, report.killMs);
  }

  /** A snapshot of counters and gauges. */
  stats(): DiscoveryStats {
    let liveOwners = 0;
    let overlaps = 0;
    let recordedChildren = 0;
    let zombies = 0;
    for (const entry of this.entries.values()) {
      liveOwners += entry.slots.liveOwners();
      overlaps += entry.slots.overlaps();
      recordedChildren += entry.slots.pids().length;
      for (const pid of entry.zombies) {
        if (processState(pid) === 'zombie') zombies++;
        else entry.zombies.delete(pid);
      }
    }
    return {
      liveOwners,
      ownerOverlaps: overlaps,
      workers: this.pool.threads.length,
      peakWorkers: this.peakWorkers,
      recordedChildren,
      zombies,
      droppedStaleMessages: this.droppedStale,
      poolErrors: this.poolErrors,
      ...(this.lastPoolError === undefined ? {} : { lastPoolError: this.lastPoolError }),
      quiesces: {
        total: this.quiesceStats.total,
        byRung: { ...this.quiesceStats.byRung },
        cooperativeMs: [...this.quiesceStats.cooperativeMs],
        terminateMs: [...this.quiesceStats.terminateMs],
        killMs: [...this.quiesceStats.killMs],
      },
    };
  }

  /** Quiesces every key, then ends every worker. Idempotent. */
  async close(): Promise<QuiesceReport[]> {
    if (this.closed) return [];
    this.closed = true;
    const reports = await Promise.all([...this.entries.keys()].map((key) => this.quiesce(key, 'close')));
    await this.pool.destroy();
    return reports;
  }
}
