/**
 * The discovery body: one profile's discovery, run as one piscina task in a worker thread.
 *
 * It owns its worker for its whole life and everything it starts. It registers itself as the
 * entry's live owner in the SharedArrayBuffer, re-checks its generation before every side effect
 * (spawn, connect, posting an outcome), streams one outcome per server as soon as it settles, and
 * — when the main thread raises the cancel flag — closes every transport and kills every process
 * group it started from its own event loop, so the children are reaped before it returns. If it
 * cannot (a synchronous loop), the main thread terminates the worker and kills the recorded groups.
 */
import { setMaxListeners } from 'node:events';
import { setPriority } from 'node:os';
import { threadId } from 'node:worker_threads';
import PQueue from 'p-queue';
import { McpSupervisorError, describeError } from '../errors.js';
import { WorkerRpc, remoteSide } from '../client/remote.js';
import { DEFAULT_CLIENT_INFO } from '../client/info.js';
import { type ClientSideDescriptor, bareDescriptor } from '../connection/client-side.js';
import { type ServerDiscoveryContext, discoverServer } from './server-discovery.js';
import { autogroups, lowerProcessPriority } from '../process/priority.js';
import { StarvationWatch } from './starvation.js';
import { EntrySlots } from './slots.js';
import type { BodyMessage, BodyResult, DiscoveryTask, SettledOutcome } from './types.js';

/**
 * The highest nice value a discovery *thread* takes, whatever `discovery.niceness` says. Most of
 * discovery's CPU is the servers' start-up, and they get the full niceness (see
 * {@link lowerProcessPriority}); the thread itself only reads and parses catalogues. It competes
 * with the host's main thread inside the host's own scheduling group, and it must still get a
 * core to stop when it is retired: at nice 19 a busy host starved it for seconds (cooperative
 * quiescence missed its grace, the terminated worker took longer than the hard wait to exit, and
 * reloads failed closed). Measured on 2 cores with two busy threads beside it: quiesce 11–26 ms at
 * nice 5, 48–236 ms at 10, up to 562 ms at 19; the event loop during a 20-server discovery was the
 * same at 5 as at 19.
 */
const MAX_THREAD_NICENESS = 5;

/**
 * Lowers this worker thread's scheduling priority (Linux applies `setpriority` to the calling
 * thread), once per thread, to at most {@link MAX_THREAD_NICENESS}. A thread can only be made
 * nicer, never less nice without privileges, so a lower value asked for later is ignored.
 */
let threadNiceness: number | undefined;
function yieldTheCpu(niceness: number): void {
  if (threadNiceness !== undefined && threadNiceness >= niceness) return;
  try {
    setPriority(0, niceness);
    threadNiceness = niceness;
  } catch {
    // Not permitted or not supported here: discovery still works, at the host's priority.
  }
}

/** Blocks the thread synchronously: only for the test hook that forces the hard rungs. */
function blockThread(ms: number): void {
  const until = ms < 0 ? Number.POSITIVE_INFINITY : Date.now() + ms;
  while (Date.now() < until) {
    // Deliberately synchronous: nothing on this thread's event loop can run.
  }
}

/**
 * An outcome as the JSON text it crosses the thread as. One whose answers cannot be serialised
 * (something it holds throws) fails that server alone, with the reason: it must never end the
 * body and cancel its neighbours.
 */
function outcomeJson(outcome: SettledOutcome): string {
  try {
    return JSON.stringify(outcome);
  } catch (error) {
    const reason = `its answers cannot be handed to the host: ${describeError(error)}`;
    return JSON.stringify({ status: 'failed', server: outcome.server, failure: { kind: 'protocol', message: reason }, timings: 'timings' in outcome ? outcome.timings : { totalMs: 0 } });
  }
}

/**
 * What every server of one body is discovered with: its bounds, the generation checks and pid
 * slots of the SharedArrayBuffer, the retirement signal, and the graceful release of connections
 * (tracked so the body ends only once they are let go — or killed, when it is retired).
 */
function serverHooks(task: DiscoveryTask, slots: EntrySlots, retired: AbortSignal, releasing: Map<Promise<void>, () => Promise<void>>): ServerDiscoveryContext {
  let spawnedForHook = false;
  let blockedBeforeRecord = false;
  return {
    connectTimeoutMs: task.connectTimeoutMs,
    ...task.limits,
    ...(task.markerEnv === undefined ? {} : { markerEnv: task.markerEnv }),
    eraOf: (server) => task.eras?.[server],
    signal: retired,
    isCurrent: () => slots.isCurrent(task.generation),
    recordPid: (pid) => {
      const block = task.testHooks?.blockBeforeRecordMs;
      if (block !== undefined && !blockedBeforeRecord) {
        blockedBeforeRecord = true;
        blockThread(block);
      }
      // The server leads a session of its own: its process and its scheduler autogroup get the
      // body's niceness, or it competes with the host at full weight. (Before recording: a
      // recorded pid says its priority is settled.)
      if (task.niceness > 0) lowerProcessPriority(pid, task.niceness);
      return slots.recordPid(pid);
    },
    clearPid: (pid) => {
      // The pid is no longer ours: a queued autogroup write must not reach its next owner.
      autogroups.forget(pid);
      slots.clearPid(pid);
    },
    ...(task.niceness > 0 ? { watchStarvation: () => new StarvationWatch() } : {}),
    afterSpawn: () => {
      const block = task.testHooks?.blockAfterSpawnMs;
      if (block !== undefined && !spawnedForHook) {
        spawnedForHook = true;
        blockThread(block);
      }
    },
    adoptForClose: (release) => {
      if (retired.aborted) {
        void release.kill().catch(() => undefined);
        return;
      }
      const closing = release.close().catch(() => undefined);
      releasing.set(closing, release.kill);
      void closing.finally(() => releasing.delete(closing));
    },
  };
}

/** Runs one discovery body. Never throws: failures become outcomes, and `done` is always posted. */
export async function runDiscoveryBody(task: DiscoveryTask): Promise<BodyResult> {
  const { generation } = task;
  yieldTheCpu(Math.min(task.niceness, MAX_THREAD_NICENESS));
  const slots = new EntrySlots(task.slots);
  const port = task.port;
  const post = (message: BodyMessage): void => {
    if (slots.isCurrent(generation)) port.postMessage(message);
  };
  if (!slots.isCurrent(generation)) {
    port.close();
    return { generation, cancelled: true };
  }
  const postOutcome = (outcome: SettledOutcome): void => post({ type: 'outcome', generation, server: outcome.server, json: outcomeJson(outcome) });

  slots.enterOwner(generation, threadId);
  const retired = new AbortController();
  // One retirement signal is shared by every server of the body and each of their requests: many
  // listeners on it are the design, not a leak (Node warns past 10).
  setMaxListeners(0, retired.signal);
  let finished = false;
  void slots.waitForCancel(generation, () => finished).then(() => {
    if (!finished) retired.abort(new Error('generation retired'));
  });
  // Handlers and the OAuth provider live on the main thread: the servers' requests go there.
  const rpc = new WorkerRpc(port, generation, retired.signal);
  const releasing = new Map<Promise<void>, () => Promise<void>>();
  const queue = new PQueue({ concurrency: task.serverConcurrency });
  retired.signal.addEventListener(
    'abort',
    () => {
      queue.clear();
      // A graceful close can take a second or two; a retired body kills instead.
      for (const kill of releasing.values()) void kill().catch(() => undefined);
    },
    { once: true },
  );
  const hooks = serverHooks(task, slots, retired.signal, releasing);

  try {
    post({ type: 'started', generation, threadId });
    for (const server of task.servers) {
      if (server.disabled) {
        postOutcome({ status: 'disabled', server: server.name });
        continue;
      }
      void queue.add(async () => {
        post({ type: 'server-start', generation, server: server.name, transport: server.transport });
        const descriptor: ClientSideDescriptor = task.sides.get(server.name) ?? bareDescriptor(DEFAULT_CLIENT_INFO);
        postOutcome(await discoverServer(server, remoteSide(server.name, descriptor, rpc), hooks));
      });
    }
    await queue.onIdle();
    await Promise.all([...releasing.keys()]);
    post({ type: 'done', generation });
  } catch (error) {
    post({
      type: 'done',
      generation,
      error: new McpSupervisorError('DISCOVERY_FAILED', `discovery body failed: ${describeError(error)}`, { profile: task.profile }).toJSON(),
    });
  } finally {
    finished = true;
    slots.releaseWaiters();
    slots.leaveOwner(generation);
    port.close();
  }
  return { generation, cancelled: retired.signal.aborted };
}
