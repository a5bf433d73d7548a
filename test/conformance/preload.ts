/**
 * `node --import <dist/test/conformance/preload.js>` preload for the MCP conformance CLIs
 * (node_modules/@modelcontextprotocol/conformance/dist/index.js, 0.1.16, and
 * node_modules/@modelcontextprotocol/conformance-next/dist/index.js, 0.2.0), used by ./suite.ts
 * only. Both bundles need both parts: 0.2.0 still imports `globSync` at top level, and its scenario
 * servers still `listen(0)` without a host.
 *
 * 1. On Node < 22 it registers ./node20-fs-hook.ts, which gives the CLI an `fs` with a throwing
 *    `globSync` so that its bundle can load at all (see ./node20-fs-shim.ts).
 * 2. It makes every TCP server that listens without an explicit host bind to 127.0.0.1. The CLI's
 *    scenario servers call `listen(0)`, which binds all interfaces (`::` / `0.0.0.0`), and the rule
 *    on this machine is that servers started by tests bind loopback only. The scenarios advertise
 *    `http://localhost:<port>`; here `localhost` resolves to 127.0.0.1, and for hosts whose resolver
 *    puts ::1 first, suite.ts starts the clients with `--dns-result-order=ipv4first` (and Node 20's
 *    default happy-eyeballs `autoSelectFamily` would fall back from a refused ::1 anyway).
 *
 * This file runs in the CLI process only: the clients it spawns do not inherit `--import`.
 */
import { register } from 'node:module';
import * as fs from 'node:fs';
import net from 'node:net';

if (typeof (fs as { globSync?: unknown }).globSync !== 'function') {
  register('./node20-fs-hook.js', import.meta.url);
}

const LOOPBACK = '127.0.0.1';

/**
 * Loopback-only listening. Not done by wrapping `listen` to add a host: `listen(port, host)` binds
 * asynchronously (after a `dns.lookup`, even for an IP literal), so `server.address()` is `null`
 * right after the call, and the suite reads `app.listen(0).address().port` synchronously in every
 * scenario. So the wrap sits one level down, on `_listen2` (Node's long-standing alias of its
 * internal `setupListenHandle`, present in Node 20 through 24), which `listen` reaches synchronously
 * with `address === null` exactly when the caller named no host. There a TCP bind goes to 127.0.0.1;
 * calls that name a host, pipes (`path`) and inherited descriptors (`fd`) pass through untouched.
 */
type SetupListenHandle = (
  this: net.Server,
  address: string | null | undefined,
  port: number,
  addressType: number,
  backlog: number | undefined,
  fd: number | undefined,
  flags: number | undefined,
) => void;
const proto = net.Server.prototype as unknown as { _listen2?: SetupListenHandle };
const setupListenHandle = proto._listen2;
if (typeof setupListenHandle !== 'function') {
  // Fail loudly rather than silently bind every interface.
  throw new Error(`conformance preload: net.Server.prototype._listen2 is missing on Node ${process.version}`);
}
proto._listen2 = function listenOnLoopback(address, port, addressType, backlog, fd, flags) {
  if (!address && typeof fd !== 'number' && port >= 0) {
    return setupListenHandle.call(this, LOOPBACK, port, 4, backlog, fd, flags);
  }
  return setupListenHandle.call(this, address, port, addressType, backlog, fd, flags);
};
