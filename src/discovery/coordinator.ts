/**
 * The main-thread side of discovery: one owner (discovery body) per profile key, started in the
 * piscina pool, its outcomes accepted only while its generation is current, and retired through
 * the quiescence ladder (`./quiesce.ts`: cooperative cancel, then worker termination, then
 * SIGKILL of every recorded process group). The coordinator never starts a second owner for a key
 * while the first is alive.
 *
 * Options and their validation live in `./options.ts`; this module re-exports them (and the
 * ladder's report types) so that its importers need not know the split.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { type Clock, systemClock } from '../clock.js';
import type { ServerConfig, TransportKind } from '../config/types.js';
import { DEFAULT_CLIENT_INFO } from '../client/info.js';
import type { RpcReply, RpcRequest } from '../client/remote.js';
import { type ClientSideDescriptor, type SideCall, bareDescriptor } from '../connection/client-side.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SCHEMA_DEPTH } from '../connection/limits.js';
import { EraCache } from '../connection/era-cache.js';
import type { EraVerdict } from '../connection/era.js';
import { McpSupervisorError, describeError } from '../errors.js';
import { processState } from '../process/proc.js';
import { type DiscoveryOptions, type ResolvedDiscoveryOptions, resolveDiscoveryOptions } from './options.js';
import { type Entry, type Owner, type QuiesceReport, type QuiesceStats, QuiesceHistory, QuiescenceLadder } from './quiesce.js';
import type { SharingStats } from './shared.js';
import { EntrySlots } from './slots.js';
import type { BodyMessage, BodyResult, BodyTestHooks, DiscoveryLimits, DiscoveryTask, ServerOutcome, SettledOutcome } from './types.js';

/**
 * The environment variable that marks every server one discovery body spawns (value unique to the
 * body). A worker terminated between spawning a server and recording its pid leaves a process
 * nothing recorded: the kill rung finds it by this marker (`/proc/<pid>/environ`).
 */
export const DISCOVERY_MARKER_ENV = 'MCP_SUPERVISOR_DISCOVERY';

export { type DiscoveryOptions, type ResolvedDiscoveryOptions, resolveDiscoveryOptions } from './options.js';
export type { QuiesceReport, QuiesceRung, QuiesceStats } from './quiesce.js';

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
  /** The body began one server. */
  onServerStart?(info: { generation: number; server: string; transport: TransportKind }): void;
  /** One server settled. */
  onOutcome(outcome: SettledOutcome, generation: number): void;
  /** Every outcome has been delivered, or the body died (then `error` says why). */
  onDone(info: { generation: number; error?: McpSupervisorError }): void;
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
  quiesces: QuiesceStats;
  /** Discovery shared across profiles (absent for a bare coordinator). */
  sharing?: SharingStats;
}

/** The body's "I am done" (or "it died"), delivered at most once and only while current. */
type ReportDone = (error?: McpSupervisorError) => void;

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
  private readonly ladder: QuiescenceLadder;
  private readonly entries = new Map<string, Entry>();
  private peakWorkers = 0;
  private poolErrors = 0;
  private lastPoolError: string | undefined;
  private droppedStale = 0;
  private closed = false;
  private readonly quiesceHistory = new QuiesceHistory();
  /** Makes each body's spawn marker unique to this coordinator (several hosts may share a machine). */
  private readonly markerPrefix = randomBytes(6).toString('hex');
  private bodySeq = 0;

  constructor(
    options: DiscoveryOptions = {},
    private readonly sides: DiscoverySides = BARE_SIDES,
    private readonly limits: DiscoveryLimits = { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES, maxCatalogItems: DEFAULT_MAX_CATALOG_ITEMS, maxSchemaDepth: DEFAULT_MAX_SCHEMA_DEPTH },
    /** The host's lifeline marker, added to every server a body spawns. */
    private readonly markerEnv?: Readonly<Record<string, string>>,
    /** Times the ladder's waits (the grace, the hard waits, the kill poll). */
    clock: Clock = systemClock,
    /** The host's era verdicts: offered to bodies, updated from their outcomes. */
    private readonly eras: EraCache = new EraCache(),
  ) {
    this.options = resolveDiscoveryOptions(options);
    this.pool = new Piscina<DiscoveryTask, BodyResult>({
      // A CommonJS entry that imports the body asynchronously: see workers/discovery-entry.cts.
      filename: fileURLToPath(new URL('../../workers/discovery-entry.cjs', import.meta.url)),
      maxThreads: this.options.maxThreads,
      // One thread stays: piscina (5.x) replaces a worker whose running task was aborted (our
      // terminate rung) only up to `minThreads`, and with none kept a body queued behind the
      // aborted one would never start. Idle, the thread is unref'd and costs a few MB.
      minThreads: 1,
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
    this.ladder = new QuiescenceLadder({
      clock,
      graceMs: this.options.quiesceGraceMs,
      hardWaitMs: this.options.quiesceHardWaitMs,
      workerOf: (threadId) => this.pool.threads.find((candidate) => candidate.threadId === threadId),
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

  /** Thread ids of the pool's workers now (tests check a terminated one is gone). */
  threadIds(): number[] {
    return this.pool.threads.map((worker) => worker.threadId);
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
   * The entry of a key that may begin a new generation: the coordinator is open and no body of
   * the key is alive (one owner per key, always).
   */
  private claim(key: string): Entry {
    if (this.closed) throw new McpSupervisorError('HOST_CLOSED', 'discovery is closed', { profile: key });
    const entry = this.entry(key);
    if (this.hasOwner(key) || entry.slots.liveOwners() > 0) {
      throw new McpSupervisorError('QUIESCE_FAILED', `a discovery body of profile "${key}" is still alive; quiesce it before starting another`, { profile: key });
    }
    return entry;
  }

  /**
   * Starts discovery of `servers` for `key` in a new generation.
   * @throws McpSupervisorError `QUIESCE_FAILED` if a body of this key is still alive (quiesce it first),
   *   `HOST_CLOSED` after close().
   */
  start(key: string, servers: readonly ServerConfig[], handlers: RunHandlers, testHooks?: BodyTestHooks): { generation: number } {
    const entry = this.claim(key);
    const generation = entry.slots.beginGeneration();
    const channel = new MessageChannel();
    const reportDone = this.listen(key, entry, generation, servers, handlers, channel.port1);
    const marker = `${this.markerPrefix}.${++this.bodySeq}`;
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
      markerEnv: { ...this.markerEnv, [DISCOVERY_MARKER_ENV]: marker },
      eras: this.erasOf(servers),
      port: channel.port2,
      ...(testHooks === undefined ? {} : { testHooks }),
    };
    entry.owner = this.runBody(key, task, channel.port1, reportDone, `${DISCOVERY_MARKER_ENV}=${marker}`);
    return { generation };
  }

  /**
   * The main thread's end of a body's port: messages of the current generation go to `handlers`
   * (or, for forwarded calls, to the host's client side); stale ones are counted and dropped.
   * Returns the once-only "done" report, which the port's close also fires.
   */
  private listen(key: string, entry: Entry, generation: number, servers: readonly ServerConfig[], handlers: RunHandlers, port: MessagePort): ReportDone {
    let doneReported = false;
    const reportDone: ReportDone = (error) => {
      if (doneReported || !entry.slots.isCurrent(generation)) return;
      doneReported = true;
      handlers.onDone(error === undefined ? { generation } : { generation, error });
    };
    const calls = new Map<number, AbortController>();
    const byName = new Map(servers.map((server) => [server.name, server]));
    port.on('message', (message: BodyMessage) => {
      if (message.type === 'rpc-cancel') {
        calls.get(message.id)?.abort(new Error('the server withdrew the request'));
        return;
      }
      if (message.generation !== generation || !entry.slots.isCurrent(generation)) {
        this.droppedStale++;
        if (message.type === 'rpc' && message.id !== 0) port.postMessage({ type: 'rpc-reply', id: message.id, ok: false, error: { message: 'discovery was retired' } });
        return;
      }
      if (message.type === 'rpc') this.serveCall(key, byName, message, calls, port);
      else if (message.type === 'started') handlers.onStarted?.({ generation, threadId: message.threadId });
      else if (message.type === 'server-start') handlers.onServerStart?.({ generation, server: message.server, transport: message.transport });
      else if (message.type === 'outcome') {
        const outcome = readOutcome(message.server, message.json);
        this.noteEra(byName.get(message.server), outcome);
        handlers.onOutcome(outcome, generation);
      }
      else {
        reportDone(message.error === undefined ? undefined : McpSupervisorError.fromJSON(message.error));
        port.close();
      }
    });
    // The body closes its end when it finishes; a terminated worker closes it implicitly.
    port.once('close', () => {
      reportDone(new McpSupervisorError('DISCOVERY_FAILED', `the discovery worker of profile "${key}" ended without finishing`, { profile: key }));
    });
    return reportDone;
  }

  /** The cached verdicts of `servers`, by name. */
  private erasOf(servers: readonly ServerConfig[]): Record<string, EraVerdict> {
    const eras: Record<string, EraVerdict> = {};
    for (const server of servers) {
      const verdict = this.eras.get(server);
      if (verdict !== undefined) eras[server.name] = verdict;
    }
    return eras;
  }

  /** What an outcome says of its server's era: a verdict to keep, or one to drop. */
  private noteEra(server: ServerConfig | undefined, outcome: ServerOutcome): void {
    if (server === undefined || (outcome.status !== 'ready' && outcome.status !== 'failed')) return;
    if (outcome.eraStale) this.eras.forget(server);
    if (outcome.status === 'ready') this.eras.learn(server, outcome.era);
  }

  /** Runs a body in the pool; its owner's task settles (never rejects) when the body is over. */
  private runBody(key: string, task: DiscoveryTask, port: MessagePort, reportDone: ReportDone, marker: string): Owner {
    const abort = new AbortController();
    const owner: Owner = { generation: task.generation, abort, taskSettled: false, port, marker, task: Promise.resolve(undefined) };
    owner.task = this.pool
      .run(task, { transferList: [task.port], signal: abort.signal })
      .then(
        (result) => result,
        (error: unknown) => {
          // An aborted task is the ladder's doing: its report says what happened, not this.
          if (!abort.signal.aborted) {
            reportDone(new McpSupervisorError('DISCOVERY_FAILED', `discovery of profile "${key}" failed: ${describeError(error)}`, { profile: key }));
          }
          return undefined;
        },
      )
      .finally(() => {
        owner.taskSettled = true;
      });
    return owner;
  }

  /**
   * Starts a new generation of `key` with no body: every server of the run is answered from
   * elsewhere (a discovery another profile shares). Same rules as {@link start}.
   */
  beginGeneration(key: string): { generation: number } {
    return { generation: this.claim(key).slots.beginGeneration() };
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
        // A JSON-RPC code of the host's handler (a v1 `McpError` or a v2 `ProtocolError`) is kept.
        const raw = (error as { code?: unknown } | null)?.code;
        const code = typeof raw === 'number' && Number.isInteger(raw) ? raw : undefined;
        reply({ type: 'rpc-reply', id: message.id, ok: false, error: { message: describeError(error), ...(code === undefined ? {} : { code }) } });
      },
    );
  }

  /**
   * Retires the key's current generation (before the first await) and walks the quiescence
   * ladder until the body's worker has exited (or returned) and every process it recorded is gone.
   */
  async quiesce(key: string, reason: string): Promise<QuiesceReport> {
    const entry = this.entries.get(key);
    const report = await this.ladder.retire(key, reason, entry);
    // A key that never ran is not a quiescence: nothing to count.
    if (entry) this.quiesceHistory.record(report);
    return report;
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
      quiesces: this.quiesceHistory.snapshot(),
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
