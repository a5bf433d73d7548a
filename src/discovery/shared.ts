/**
 * Discovery shared across profiles. Fifty tenants that list the same server with the same client
 * must not spawn and list it fifty times: profiles whose server has the same *sharing key* (its
 * fingerprint, its connect timeout, and the client-side inputs that could change what it answers)
 * share one discovery of it.
 *
 * - **Single flight.** The first profile to discover a server *leads* it: its own body (in its own
 *   generation, under its own key) discovers it as before. A profile that starts while that flight
 *   runs *follows* it: its body (if it has other servers) leaves the server out, and the flight's
 *   outcome is handed to it under its own server name, in its own generation.
 * - **Recent results.** A ready outcome stays available for `reuseForMs` to profiles that have not
 *   seen it yet (a tenant's first turn minutes after another's). A profile never reuses a result it
 *   has already been given: its own re-discoveries (reload, retry, refresh) always ask the server.
 *   A server that announces a list change drops its remembered result.
 * - **Generation rules unchanged.** Outcomes reach a profile only while the generation that asked
 *   for them is current; quiescing a profile unsubscribes it synchronously.
 * - **Quiescence unchanged.** Quiescing the leader stops its body exactly as before (worker and
 *   processes). Flights it was running that other profiles still wait for are *re-homed*: one new
 *   body under a `shared#n` key discovers them again for those followers. Such a body is quiesced as
 *   soon as no follower waits for it any more, and when it is done.
 *
 * What is never shared: an HTTP session discovery created (followers initialise their own), and
 * anything of a server whose sharing key is undefined (`shareDiscovery: false`, or a client side
 * that differs by profile: OAuth, handlers told the profile).
 */
import type { Clock } from '../clock.js';
import type { ServerConfig } from '../config/types.js';
import { serverFingerprint } from '../config/fingerprint.js';
import { type McpSupervisorError } from '../errors.js';
import type { DiscoveryCoordinator, DiscoveryStats, QuiesceReport, RunHandlers } from './coordinator.js';
import type { SettledOutcome } from './types.js';
import { startDiscoverTrace } from '../observability/channels.js';
import { RecentResults } from './recent.js';

/** How discovery is shared. */
export interface SharingOptions {
  /** The sharing key of a server of a profile; undefined when its discovery must be the profile's own. */
  shareKey(key: string, server: ServerConfig): string | undefined;
  /** How long a ready result is handed to profiles that have not seen it (ms); 0: only to flights in progress. */
  reuseForMs: number;
  clock: Clock;
}

/** Options of one run. */
export interface RunOptions {
  /** May this run use a recent result another profile's discovery produced? (First use: yes.) */
  reuse?: boolean;
}

/** Counters of sharing, part of the discovery stats. */
export interface SharingStats {
  /** Servers a profile got from a flight another body ran. */
  joined: number;
  /** Servers a profile got from a recent result. */
  reused: number;
  /** Flights re-discovered for their followers after their leader was retired. */
  rehomed: number;
  /** Flights in progress now. */
  flights: number;
  /** Recent results remembered now. */
  remembered: number;
}

/** One profile's current run. */
interface Run {
  readonly key: string;
  generation: number;
  readonly handlers: RunHandlers;
  /** Servers (by this profile's names) answered from elsewhere, still to arrive. */
  readonly awaiting: Map<string, Flight | 'recent'>;
  /** Whether the profile's own body discovers some servers, and its done report once it came. */
  hasBody: boolean;
  bodyDone: { error?: McpSupervisorError } | undefined;
  live: boolean;
  doneSent: boolean;
}

/** One server's discovery in progress, with the profiles waiting for it. */
interface Flight {
  readonly shareKey: string;
  readonly config: ServerConfig;
  /** The coordinator key whose body discovers it: the leading profile, or `shared#n` once re-homed. */
  runner: string;
  /** Followers and the name each gives the server. */
  readonly followers: Map<Run, string>;
}

const SYNTHETIC_PREFIX = 'shared#';

/**
 * The sharing key of a server: its fingerprint and connect timeout, or undefined when it opts out
 * (`shareDiscovery: false`) or when the client differs by profile for it (then every profile's
 * discovery is its own: a tenant's OAuth tokens or answers never serve another tenant).
 */
export function discoveryShareKey(server: ServerConfig, client: { differsByProfile(server: ServerConfig): boolean }): string | undefined {
  if (!server.shareDiscovery || client.differsByProfile(server)) return undefined;
  return `${serverFingerprint(server)}\0${server.connectTimeoutMs ?? ''}`;
}

/** A ready outcome without what belongs to the profile that ran it (its resumable HTTP session). */
function shareable(outcome: SettledOutcome): SettledOutcome {
  if (outcome.status !== 'ready' || outcome.session === undefined) return outcome;
  const { session: _ownedByTheLeader, ...rest } = outcome;
  return rest;
}

/** The discovery driver readiness uses: the coordinator, with discoveries shared across profiles. */
export class SharedDiscovery {
  private readonly runs = new Map<string, Run>();
  private readonly flights = new Map<string, Flight>();
  /** Flights by runner key, then by the server's name in that runner's body. */
  private readonly byRunner = new Map<string, Map<string, Flight>>();
  private readonly recent: RecentResults;
  private readonly counters = { joined: 0, reused: 0, rehomed: 0 };
  private syntheticSeq = 0;
  /** Runs started and neither done nor retired. */
  private activeRuns = 0;
  private readonly quietWaiters: (() => void)[] = [];
  /** Discovery traces begun and not ended yet, by runner then server. */
  private readonly openTraces = new Map<string, Map<string, ReturnType<typeof startDiscoverTrace>>>();
  private closed = false;

  constructor(
    private readonly coordinator: DiscoveryCoordinator,
    private readonly options: SharingOptions,
  ) {
    this.recent = new RecentResults(options.reuseForMs, options.clock);
  }

  /**
   * Starts a generation of `key` over `servers`: the servers no one else is discovering go to the
   * profile's own body; the others follow a flight in progress or a recent result.
   * @throws McpSupervisorError as {@link DiscoveryCoordinator.start}; nothing is changed then.
   */
  start(key: string, servers: readonly ServerConfig[], handlers: RunHandlers, runOptions: RunOptions = {}): { generation: number } {
    const own: ServerConfig[] = [];
    const leads: [ServerConfig, string][] = [];
    const joins: [string, Flight][] = [];
    const reused: [string, SettledOutcome][] = [];
    const keysSeen = new Set<string>();
    for (const server of servers) {
      const shareKey = this.options.shareKey(key, server);
      // A server listed twice in one profile is simply discovered twice: no flight follows itself.
      if (shareKey === undefined || keysSeen.has(shareKey)) {
        own.push(server);
        continue;
      }
      keysSeen.add(shareKey);
      const recent = runOptions.reuse ? this.recent.take(shareKey, key) : undefined;
      const flight = this.flights.get(shareKey);
      if (recent) reused.push([server.name, recent]);
      else if (flight) joins.push([server.name, flight]);
      else {
        own.push(server);
        leads.push([server, shareKey]);
      }
    }
    // The only step that can throw comes before any change.
    const { generation } = own.length > 0 ? this.coordinator.start(key, own, this.bodyHandlers(key)) : this.coordinator.beginGeneration(key);
    const run: Run = { key, generation, handlers, awaiting: new Map(), hasBody: own.length > 0, bodyDone: undefined, live: true, doneSent: false };
    const previous = this.runs.get(key);
    if (previous) this.leave(previous);
    this.runs.set(key, run);
    this.activeRuns++;
    for (const [server, shareKey] of leads) this.addFlight({ shareKey, config: server, runner: key, followers: new Map() }, server.name);
    for (const [name, flight] of joins) {
      flight.followers.set(run, name);
      run.awaiting.set(name, flight);
    }
    for (const [name, outcome] of reused) {
      run.awaiting.set(name, 'recent');
      this.counters.reused++;
      // After start() returns: readiness records the generation before it accepts outcomes.
      queueMicrotask(() => this.deliver(run, name, outcome));
    }
    if (!run.hasBody && run.awaiting.size === 0) queueMicrotask(() => this.maybeFinish(run));
    return { generation };
  }

  private addFlight(flight: Flight, nameInBody: string): void {
    this.flights.set(flight.shareKey, flight);
    let flights = this.byRunner.get(flight.runner);
    if (!flights) {
      flights = new Map();
      this.byRunner.set(flight.runner, flights);
    }
    flights.set(nameInBody, flight);
  }

  /** Handlers of the body run under `runner` (a profile key or a re-homing key). */
  private bodyHandlers(runner: string): RunHandlers {
    const ownRun = (generation: number): Run | undefined => {
      const run = this.runs.get(runner);
      return run?.live && run.generation === generation ? run : undefined;
    };
    return {
      onStarted: (info) => ownRun(info.generation)?.handlers.onStarted?.(info),
      onServerStart: (info) => this.traceStart(runner, info),
      onOutcome: (outcome, generation) => {
        this.traceEnd(runner, outcome.server, outcome);
        ownRun(generation)?.handlers.onOutcome(outcome, generation);
        const flight = this.byRunner.get(runner)?.get(outcome.server);
        if (flight) this.land(runner, outcome.server, flight, outcome);
      },
      onDone: (info) => {
        this.traceAbandon(runner);
        // Flights the body ended without answering failed as the body did: tell their followers.
        for (const [name, flight] of [...(this.byRunner.get(runner) ?? [])]) {
          const message = `discovery ended without a result for this server${info.error ? `: ${info.error.message}` : ''}`;
          this.land(runner, name, flight, { status: 'failed', server: name, failure: { kind: 'cancelled', message }, timings: { totalMs: 0 } });
        }
        this.byRunner.delete(runner);
        const run = ownRun(info.generation);
        if (run) {
          run.bodyDone = info.error === undefined ? {} : { error: info.error };
          this.maybeFinish(run);
        }
        if (runner.startsWith(SYNTHETIC_PREFIX)) this.retireSynthetic(runner, 'shared discovery done');
      },
    };
  }

  // ---------------------------------------------------------------- traces

  /** A body began a server: publish it on `mcp-supervisor:discover` (bodies run in other threads). */
  private traceStart(runner: string, info: { generation: number; server: string; transport: ServerConfig['transport'] }): void {
    const end = startDiscoverTrace({ profile: runner, server: info.server, generation: info.generation, transport: info.transport });
    let open = this.openTraces.get(runner);
    if (!open) {
      open = new Map();
      this.openTraces.set(runner, open);
    }
    open.set(info.server, end);
  }

  private traceEnd(runner: string, server: string, outcome: SettledOutcome): void {
    const open = this.openTraces.get(runner);
    const end = open?.get(server);
    if (!end) return;
    open!.delete(server);
    end({ status: outcome.status, ...(outcome.status === 'ready' ? { tools: outcome.tools.length } : {}), ...(outcome.status === 'failed' ? { kind: outcome.failure.kind } : {}) });
  }

  /** Ends the traces of a body that ended or was retired without an outcome for them. */
  private traceAbandon(runner: string): void {
    const open = this.openTraces.get(runner);
    this.openTraces.delete(runner);
    for (const end of open?.values() ?? []) end({ status: 'failed', kind: 'cancelled' });
  }

  /** A flight settled: remember a ready result and hand it to every follower. */
  private land(runner: string, nameInBody: string, flight: Flight, outcome: SettledOutcome): void {
    this.byRunner.get(runner)?.delete(nameInBody);
    if (this.flights.get(flight.shareKey) === flight) this.flights.delete(flight.shareKey);
    const shared = shareable(outcome);
    const followers = [...flight.followers];
    flight.followers.clear();
    if (shared.status === 'ready') {
      const seenBy = new Set(followers.map(([run]) => run.key));
      if (!runner.startsWith(SYNTHETIC_PREFIX)) seenBy.add(runner);
      this.recent.remember(flight.shareKey, shared, seenBy);
    }
    for (const [run, name] of followers) {
      this.counters.joined++;
      this.deliver(run, name, shared);
    }
  }

  private deliver(run: Run, name: string, outcome: SettledOutcome): void {
    if (!run.live || !run.awaiting.delete(name)) return;
    run.handlers.onOutcome({ ...outcome, server: name }, run.generation);
    this.maybeFinish(run);
  }

  /** Reports the run done once its own body is done and everything it awaited has arrived. */
  private maybeFinish(run: Run): void {
    if (!run.live || run.doneSent || run.awaiting.size > 0 || (run.hasBody && !run.bodyDone)) return;
    run.doneSent = true;
    this.runEnded();
    const error = run.bodyDone?.error;
    run.handlers.onDone(error === undefined ? { generation: run.generation } : { generation: run.generation, error });
  }

  /** Resolves when no profile's discovery run is in progress (warm sessions wait for it); undefined when none is now. */
  whenQuiet(): Promise<void> | undefined {
    if (this.activeRuns === 0) return undefined;
    return new Promise((resolve) => this.quietWaiters.push(resolve));
  }

  private runEnded(): void {
    this.activeRuns--;
    if (this.activeRuns === 0) for (const wake of this.quietWaiters.splice(0)) wake();
  }

  /** A server of `key` announced new lists: its remembered result is stale for everyone. */
  listsChanged(key: string, server: ServerConfig): void {
    const shareKey = this.options.shareKey(key, server);
    if (shareKey !== undefined) this.recent.forget(shareKey);
  }

  // ---------------------------------------------------------------- retirement

  /** Unsubscribes a run from everything it awaited; a re-homed flight no one awaits is stopped. */
  private leave(run: Run): void {
    if (run.live && !run.doneSent) this.runEnded();
    run.live = false;
    for (const flight of run.awaiting.values()) {
      if (flight === 'recent') continue;
      flight.followers.delete(run);
      if (!this.closed && flight.runner.startsWith(SYNTHETIC_PREFIX)) this.retireIfUnwanted(flight.runner);
    }
    run.awaiting.clear();
  }

  /**
   * Retires `key`'s generation synchronously (unsubscribing it and orphaning the flights its body
   * ran), then walks the quiescence ladder as {@link DiscoveryCoordinator.quiesce} does.
   */
  quiesce(key: string, reason: string): Promise<QuiesceReport> {
    const run = this.runs.get(key);
    if (run) {
      this.runs.delete(key);
      this.leave(run);
    }
    const orphans = this.byRunner.get(key);
    this.byRunner.delete(key);
    this.traceAbandon(key);
    const report = this.coordinator.quiesce(key, reason);
    if (orphans) this.rehome(orphans);
    return report;
  }

  /** Discovers again, in one new body, the orphaned flights that still have followers. */
  private rehome(orphans: Map<string, Flight>): void {
    const wanted: [string, Flight][] = [];
    for (const [name, flight] of orphans) {
      if (flight.followers.size > 0 && !this.closed) wanted.push([name, flight]);
      else if (this.flights.get(flight.shareKey) === flight) this.flights.delete(flight.shareKey);
    }
    if (wanted.length === 0) return;
    const runner = `${SYNTHETIC_PREFIX}${++this.syntheticSeq}`;
    try {
      this.coordinator.start(runner, wanted.map(([, flight]) => flight.config), this.bodyHandlers(runner));
    } catch (error) {
      const message = `the shared discovery of this server could not be restarted: ${(error as Error).message}`;
      for (const [name, flight] of wanted) {
        this.land(runner, name, flight, { status: 'failed', server: name, failure: { kind: 'cancelled', message }, timings: { totalMs: 0 } });
      }
      return;
    }
    for (const [name, flight] of wanted) {
      flight.runner = runner;
      this.addFlight(flight, name);
    }
    this.counters.rehomed += wanted.length;
  }

  private retireIfUnwanted(runner: string): void {
    const flights = this.byRunner.get(runner);
    if (flights && [...flights.values()].some((flight) => flight.followers.size > 0)) return;
    for (const flight of flights?.values() ?? []) {
      if (this.flights.get(flight.shareKey) === flight) this.flights.delete(flight.shareKey);
    }
    this.byRunner.delete(runner);
    this.retireSynthetic(runner, 'no profile waits for it');
  }

  private retireSynthetic(runner: string, reason: string): void {
    this.traceAbandon(runner);
    // Never rejects in practice; a failure here must still not become an unhandled rejection.
    void this.coordinator.quiesce(runner, reason).then(
      () => this.coordinator.forget(runner),
      () => undefined,
    );
  }

  // ---------------------------------------------------------------- the rest of the driver

  /** True while a body of this key may still be running, or its run still awaits shared results. */
  hasOwner(key: string): boolean {
    const run = this.runs.get(key);
    return this.coordinator.hasOwner(key) || (run !== undefined && run.live && !run.doneSent);
  }

  /** Live bodies of a key, as its SharedArrayBuffer counts them. */
  liveOwners(key: string): number {
    return this.coordinator.liveOwners(key);
  }

  /** The coordinator's stats with the sharing counters. */
  stats(): DiscoveryStats {
    return { ...this.coordinator.stats(), sharing: { ...this.counters, flights: this.flights.size, remembered: this.recent.size } };
  }

  /** Unsubscribes everyone, forgets every result, then closes the coordinator. */
  close(): Promise<QuiesceReport[]> {
    this.closed = true;
    for (const run of this.runs.values()) this.leave(run);
    this.runs.clear();
    this.flights.clear();
    this.byRunner.clear();
    this.recent.clear();
    for (const runner of [...this.openTraces.keys()]) this.traceAbandon(runner);
    return this.coordinator.close();
  }
}
