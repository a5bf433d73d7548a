/**
 * The official MCP reference servers (devDependencies, exact versions in package.json) as real
 * processes for the tests in test/reference/: `@modelcontextprotocol/server-everything`,
 * `server-filesystem` and `server-memory`, each run as `node <the bin file of its package>` —
 * never `npx` at run time (no registry, no network, no version drift).
 *
 * Facts about the installed versions (2026.8.31) that these helpers and the tests rely on, read
 * from their dist/ code and checked by hand with a bare SDK 1.32.2 client:
 *
 * server-everything (serverInfo `mcp-servers/everything` 2.0.0; bin `dist/index.js`)
 * - argv[2] picks the transport: `stdio` (default), `sse`, `streamableHttp`.
 * - `streamableHttp` is an express app, `POST|GET|DELETE /mcp`, one MCP session per
 *   `initialize` (stateful, `Mcp-Session-Id`, in-memory event store for resumability). It listens
 *   on `process.env.PORT || 3001` with `app.listen(PORT)` — NO host, i.e. every interface (`*:port`
 *   in `ss -ltnp`) — and logs "MCP Streamable HTTP Server listening on port ${PORT}" to stderr, the
 *   configured value (0 stays 0). stdout carries its request log ("Received MCP POST request").
 *   It exits on SIGINT (handler) or SIGTERM (default action); it never reads stdin.
 *   So {@link startEverythingHttp} runs it with two preloads: ../conformance/preload.ts (a listen()
 *   without a host binds 127.0.0.1) and ../programs/listen-report.ts (reports the real port on
 *   stderr; exits when stdin ends; refuses to run without the first), with `PORT=0`. Verified
 *   with `ss -ltnp`: `127.0.0.1:<port>`, nothing on `*`.
 * - Streamable HTTP sessions keep an in-memory event store: a message sent on the standalone
 *   stream while no GET is attached is stored and replayed only to a GET with `Last-Event-ID`.
 *   Server-initiated messages not tied to a request (roots/list, logs, list_changed) use that
 *   stream; those tied to a tool call (sampling, elicitation, progress) use the call's POST stream.
 * - Server capabilities: logging, completions, prompts{listChanged}, resources{subscribe,
 *   listChanged}, tools{listChanged}, tasks.
 * - Always listed (12 + 1): echo, get-annotated-message, get-env, get-resource-links,
 *   get-resource-reference, get-structured-content (the only one with an outputSchema: temperature,
 *   conditions, humidity), get-sum, get-tiny-image, gzip-file-as-resource,
 *   toggle-simulated-logging, toggle-subscriber-updates, trigger-long-running-operation, and
 *   simulate-research-query (a tasks tool).
 * - Capability-gated, registered in `oninitialized` from the client's declared capabilities:
 *   get-roots-list (roots), trigger-elicitation-request (elicitation), trigger-sampling-request
 *   (sampling); trigger-url-elicitation (elicitation url mode), trigger-*-request-async (tasks
 *   requests capabilities), none of which this library declares.
 * - trigger-sampling-request {prompt, maxTokens=100}: sends sampling/createMessage with one user
 *   message "Resource trigger-sampling-request context: <prompt>", systemPrompt "You are a helpful
 *   test server.", maxTokens, temperature 0.7; answers "LLM sampling result: \n" + the client's
 *   CreateMessageResult as pretty JSON.
 * - trigger-elicitation-request {}: sends elicitation/create, message "Please provide inputs for
 *   the following fields:", a schema with `name` required and defaults (integer 42, number 3.14, …);
 *   on accept it answers "✅ User provided the requested information!", "User inputs:\n- Name: …"
 *   (plus "- Favorite Integer: 42" when defaults were applied), and the raw result.
 * - get-roots-list {}: "Current MCP Roots (<n> total):\n\n1. <name>\n   URI: <uri>…". Roots are
 *   fetched with roots/list 350 ms after `initialized` (then logged at info, logger
 *   "everything-server": "Roots updated: <n> root(s) received from client"), cached per session,
 *   and re-fetched on notifications/roots/list_changed.
 * - toggle-simulated-logging {}: starts (or stops) per-session logging: one notifications/message
 *   at once, then one every 5 s, each of a random level debug…emergency with data
 *   "<Level>-level message[ - SessionId <id>]" (one says "Alert level-message"), filtered by the
 *   level the client set with logging/setLevel.
 * - trigger-long-running-operation {duration=10 s, steps=5}: read-only and idempotent; sends
 *   notifications/progress {progress: i, total: steps} after each of `steps` equal sleeps, only when
 *   the request carries a progressToken. Over stdio a bare SDK 1.32.2 client usually misses the LAST
 *   one: it is written right before the response, the SDK dispatches notifications on a microtask
 *   but responses synchronously, and the response removes the progress handler first.
 * - Resources: demo://resource/static/document/<file>.md (architecture, extension, features,
 *   how-it-works, instructions, startup, structure; text/markdown); templates
 *   demo://resource/dynamic/text/{resourceId} ("Resource <id>: This is a plaintext resource created
 *   at <time>") and demo://resource/dynamic/blob/{resourceId}.
 * - Prompts: simple-prompt, args-prompt (city required, state optional → "What's weather in
 *   <city>[, <state>]?"), completable-prompt, resource-prompt.
 *
 * server-filesystem (serverInfo `secure-filesystem-server` 0.2.0; bin `dist/index.js`; stdio only)
 * - Directories come from argv. Without any it prints its usage on stderr and "Started without
 *   allowed directories - waiting for client to provide roots via MCP protocol", and still starts.
 * - In `oninitialized` (i.e. on `notifications/initialized`), if the client declared roots, it
 *   sends roots/list at once; the valid directories (realpath'd, must exist) REPLACE the allowed
 *   ones. On notifications/roots/list_changed it asks again. If the client declared no roots and
 *   there is no directory, it throws "Server cannot operate: No allowed directories available…" —
 *   inside a notification handler, so the SDK swallows it: the server stays up, lists all its
 *   tools and refuses every path.
 * - A tools/call sent right behind `initialized` is handled BEFORE the roots answer is applied
 *   (the refusal below, with an empty list) — seen with a bare SDK client that calls at once.
 * - Tools: read_file, read_text_file, read_media_file, read_multiple_files, write_file, edit_file,
 *   create_directory, list_directory, list_directory_with_sizes, directory_tree, move_file,
 *   search_files, get_file_info, list_allowed_directories ("Allowed directories:\n<dirs>").
 * - Outside the allowed directories: a result with isError true and the text "Access denied - path
 *   outside allowed directories: <path> not in <dirs>" (an ASCII hyphen).
 *
 * server-memory (serverInfo `memory-server` 0.6.3; bin `dist/index.js`; stdio only)
 * - Storage: `MEMORY_FILE_PATH` (absolute, or relative to its dist/), JSON lines; default
 *   dist/memory.jsonl inside node_modules — tests must always set it.
 * - Tools (all with outputSchema): create_entities {entities:[{name, entityType, observations}]} →
 *   structuredContent {entities: <the ones created; existing names are skipped>}, create_relations,
 *   add_observations, delete_entities, delete_observations, delete_relations, read_graph,
 *   search_nodes {query}, open_nodes {names} → {entities, relations}.
 * - One resource: memory://knowledge-graph (application/json, the whole graph).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FIXTURE_TAG_ENV, probePort, spawnFixture } from './fixtures.js';
import type { ExitInfo, StdioServerConfig } from './fixtures.js';
import { pollUntil } from './processes.js';

export type ReferenceServerName = 'everything' | 'filesystem' | 'memory';

const PACKAGES: Record<ReferenceServerName, string> = {
  everything: '@modelcontextprotocol/server-everything',
  filesystem: '@modelcontextprotocol/server-filesystem',
  memory: '@modelcontextprotocol/server-memory',
};

const require = createRequire(import.meta.url);

/** Absolute path of the file the package's `bin` names (each of these packages has exactly one). */
export function referenceServerBin(name: ReferenceServerName): string {
  const manifestPath = require.resolve(`${PACKAGES[name]}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin?: string | Record<string, string> };
  const bin = typeof manifest.bin === 'string' ? manifest.bin : Object.values(manifest.bin ?? {})[0];
  if (bin === undefined) throw new Error(`${PACKAGES[name]} names no bin in its package.json`);
  return path.resolve(path.dirname(manifestPath), bin);
}

/**
 * The `mcpServers` stdio entry that runs a reference server with `node <bin> ...args`, for the
 * library under test to spawn. `env` holds the fixture tag (the leak guard finds the process and
 * its descendants by it) and `opts.env` (e.g. `MEMORY_FILE_PATH`).
 */
export function referenceServerConfig(name: ReferenceServerName, args: readonly string[] = [], opts: { tag: string; env?: Record<string, string> }): StdioServerConfig {
  return {
    command: process.execPath,
    args: [referenceServerBin(name), ...args],
    env: { ...opts.env, [FIXTURE_TAG_ENV]: opts.tag },
  };
}

/** Loopback-only listening for processes that listen without a host (a colleague's preload). */
const LOOPBACK_PRELOAD = fileURLToPath(new URL('../conformance/preload.js', import.meta.url));
/** Reports the real port on stderr, exits with stdin, fails closed (../programs/listen-report.ts). */
const LISTEN_REPORT_PRELOAD = fileURLToPath(new URL('../programs/listen-report.js', import.meta.url));
/** Holds a session's second standalone-stream GET (../programs/delay-resumed-get.ts). */
const DELAY_RESUMED_GET_PRELOAD = fileURLToPath(new URL('../programs/delay-resumed-get.js', import.meta.url));
const LISTEN_REPORT = /^mcp-listen-report (\{.*\})$/m;

/** server-everything in its Streamable HTTP mode, as a real child process. */
export interface EverythingHttp {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** What the listening socket is bound to, as the server's own `address()` says. */
  readonly address: string;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** The last 64 KiB of its stdout: its request log ("Received MCP POST request", "Session initialized with ID: …"). */
  stdout(): string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<ExitInfo>;
  /** Kills its process group (SIGTERM, then SIGKILL) and waits until it is gone. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `node --import <loopback preload> --import <listen report> <server-everything bin>
 * streamableHttp` with `PORT=0`: detached (its own process group), stdin piped from this process
 * (it exits when that pipe ends), tagged. Resolves once the server listens on 127.0.0.1 and
 * accepts a TCP connection; rejects (after stopping it) if it exits, binds anything but
 * 127.0.0.1, or does not listen within `readyTimeoutMs`.
 */
export async function startEverythingHttp(opts: {
  tag: string;
  env?: Record<string, string>;
  readyTimeoutMs?: number;
  /** Latency on a session's second standalone-stream GET (../programs/delay-resumed-get.ts). */
  delaySecondGetMs?: number;
}): Promise<EverythingHttp> {
  const delay = opts.delaySecondGetMs ?? 0;
  const preloads = [LISTEN_REPORT_PRELOAD, ...(delay > 0 ? [DELAY_RESUMED_GET_PRELOAD] : [])].map((file) => `--import=${file}`);
  // spawnFixture runs `node <script> ...args`; Node options go first, so the first preload takes
  // the script's place (`--import=<file>` is one argument). The loopback preload must be first.
  const proc = await spawnFixture(`--import=${LOOPBACK_PRELOAD}`, [...preloads, referenceServerBin('everything'), 'streamableHttp'], {
    tag: opts.tag,
    env: { ...opts.env, PORT: '0', ...(delay > 0 ? { MCP_TEST_DELAY_SECOND_GET_MS: String(delay) } : {}) },
  });
  // It logs every request on stdout, and Node writes to a pipe synchronously on Linux: a pipe
  // nobody reads would fill up and block the server in console.log. Keep reading (and the tail).
  let stdoutText = '';
  proc.child.stdout?.setEncoding('utf8');
  proc.child.stdout?.on('data', (chunk: string) => {
    stdoutText = (stdoutText + chunk).slice(-64 * 1024);
  });
  let stopped: Promise<void> | undefined;
  const stop = () => (stopped ??= proc.stop());
  try {
    const stderr = await proc.waitForStderr(LISTEN_REPORT, opts.readyTimeoutMs ?? 15_000);
    const report = JSON.parse(LISTEN_REPORT.exec(stderr)?.[1] ?? '{}') as { port?: number; address?: string };
    if (typeof report.port !== 'number' || report.port <= 0) throw new Error(`server-everything reported no port: ${stderr}`);
    if (report.address !== '127.0.0.1') throw new Error(`server-everything listens on ${report.address}:${report.port}, not on 127.0.0.1 only`);
    const url = `http://127.0.0.1:${report.port}/mcp`;
    // The report is written on 'listening', so the socket already accepts: one probe proves it.
    if ((await probePort(url)) !== 'open') throw new Error(`server-everything reported port ${report.port} but refuses connections`);
    return { url, port: report.port, pid: proc.pid, address: report.address, stderr: proc.stderr, stdout: () => stdoutText, exited: proc.exited, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export { guardOpenHandles } from './processes.js';
