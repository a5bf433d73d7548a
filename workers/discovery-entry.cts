/**
 * The module piscina loads in each discovery worker: CommonJS on purpose, starting the body's ESM
 * modules with an asynchronous `import()`.
 *
 * Why not the ESM body directly: piscina loads a worker's module with `require()` first, and on
 * Node ≥ 20.19 `require()` of an ES module instantiates it synchronously — a worker terminated in
 * that window (a pool closed, or a task aborted, while a fresh worker is still loading) aborts the
 * whole host process ("FATAL ERROR: v8::Module::IsGraphAsync … must be used on an instantiated
 * module"; reproduced: 1 in ≈ 200 pools destroyed 0–300 ms after creation). An asynchronous
 * `import()` can be terminated at any point. The import starts as soon as the worker loads this
 * file, so the body is usually ready before its first task.
 */
type Body = typeof import('./discovery-body.js');
const loading: Promise<Body> = import('./discovery-body.js');
// A failed load is reported by the first task that awaits it; never as an unhandled rejection.
loading.catch(() => undefined);

module.exports = async function runDiscoveryTask(task: Parameters<Body['default']>[0]): ReturnType<Body['default']> {
  return (await loading).default(task);
};
