/**
 * Baseline worker for the terminate rung: loads the same module graph as a discovery body
 * (the piscina worker entry, hence the SDK client, p-queue, the transports), says so, and then
 * spins in a synchronous loop, like a body stuck by the `blockAfterSpawnMs: -1` test hook.
 * The bench times `worker.terminate()` → `exit` on it: the bare cost of ending such a thread.
 */
import { parentPort } from 'node:worker_threads';
import '../../workers/discovery-body.js';

parentPort?.postMessage('spinning');
for (;;) {
  // Deliberately synchronous: only termination ends this thread.
}
