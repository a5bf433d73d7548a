/**
 * `mcp-supervisor doctor`: discovers the profiles of one or more config files through the library,
 * the way a host would, shows progress per server as it settles, then a table. Exit code 0 when
 * every enabled server is ready, 1 when one is not (or `--call` failed), 2 for bad input.
 *
 * A ready server is not always a usable one: the doctor declares the roots capability (with the
 * directories given by `--root`, none by default), so a server that needs roots asks for them —
 * and one that asked and got none is reported as a warning, not as a clean "ready" (its tools
 * would refuse every path). Tools a server's filter hides are counted in the table.
 *
 * Everything it writes (progress lines, the table, `--json`, error messages, a `--call` result)
 * passes through the scrubber of `config/redact.ts` on its way out: the configs it loaded
 * registered their secrets, so no env or header value, URL password or secret query value is ever
 * printed, even when a server echoed it.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadProfileFile } from '../config/load.js';
import { scrubDeep, scrubText } from '../config/redact.js';
import type { ProfileConfig } from '../config/types.js';
import { isMcpSupervisorError } from '../errors.js';
import { createHost } from '../host.js';
import { EXAMPLE_PROFILES, exampleEnvironment } from './examples.js';
import { type ServerRow, renderTable, rowsFor } from './report.js';
import { type TraceEntry, recordTrace, renderTrace } from './trace.js';

/** Parsed doctor arguments. */
export interface DoctorArgs {
  /** Profiles to check: name → config file. Empty means the bundled examples. */
  profiles: { name: string; file: string }[];
  json: boolean;
  /** Per-server connect timeout (ms). */
  timeoutMs: number | undefined;
  /** `server/tool` and its JSON arguments. */
  call: { server: string; tool: string; args: Record<string, unknown> } | undefined;
  /** Directories offered to servers as roots (`--root DIR`, repeatable). */
  roots: string[];
  /** Print the trace tree of the discovery and of the `--call` (`--trace`). */
  trace: boolean;
}

/** Where the doctor writes. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
  isTTY: boolean;
}

/** A usage error (exit code 2). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Parses `doctor` arguments. @throws UsageError naming the bad argument */
export function parseDoctorArgs(argv: readonly string[]): DoctorArgs {
  const args: DoctorArgs = { profiles: [], json: false, timeoutMs: undefined, call: undefined, roots: [], trace: false };
  const names = new Set<string>();
  const addProfile = (name: string, file: string): void => {
    if (names.has(name)) throw new UsageError(`profile name "${name}" is used twice; name one of them with --profile name=path`);
    names.add(name);
    args.profiles.push({ name, file: path.resolve(file) });
  };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    const value = (): string => {
      const next = argv[++index];
      if (next === undefined) throw new UsageError(`${arg} needs a value`);
      return next;
    };
    if (arg === '--json') args.json = true;
    else if (arg === '--trace') args.trace = true;
    else if (arg === '--timeout') {
      const raw = value();
      const ms = Number(raw);
      if (!Number.isInteger(ms) || ms <= 0) throw new UsageError(`--timeout expects a positive integer (ms), got \`${raw}\``);
      args.timeoutMs = ms;
    } else if (arg === '--root') {
      const dir = argv[++index];
      if (dir === undefined || dir.startsWith('--')) throw new UsageError('--root expects a directory');
      args.roots.push(path.resolve(dir));
    } else if (arg === '--profile') {
      const raw = value();
      const at = raw.indexOf('=');
      if (at <= 0 || at === raw.length - 1) throw new UsageError(`--profile expects name=path, got \`${raw}\``);
      addProfile(raw.slice(0, at), raw.slice(at + 1));
    } else if (arg === '--call') {
      const target = value();
      const slash = target.indexOf('/');
      if (slash <= 0 || slash === target.length - 1) throw new UsageError(`--call expects server/tool, got \`${target}\``);
      let parsed: unknown = {};
      const next = argv[index + 1];
      if (next !== undefined && !next.startsWith('--')) {
        index++;
        try {
          parsed = JSON.parse(next);
        } catch {
          throw new UsageError(`--call arguments must be a JSON object, got \`${next}\``);
        }
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError('--call arguments must be a JSON object');
      args.call = { server: target.slice(0, slash), tool: target.slice(slash + 1), args: parsed as Record<string, unknown> };
    } else if (arg.startsWith('--')) throw new UsageError(`unknown option ${arg}`);
    else addProfile(profileNameOf(arg), arg);
  }
  return args;
}

/**
 * The profile name of a file given without `--profile`: its base name without `.json` and without
 * leading dots (`.mcp.json` → `mcp`). A name that began with a dot would read as a relative path
 * where profile references are resolved, and name a profile that is not this file.
 */
export function profileNameOf(file: string): string {
  return path.basename(file).replace(/\.json$/i, '').replace(/^\.+/, '') || 'default';
}

/** Result of a doctor run, also used by the demo. */
export interface DoctorReport {
  rows: ServerRow[];
  allReady: boolean;
  call?: { ok: boolean; text: string };
  /** With `--trace`: every discovery and call attempt, as the tracing channels saw them. */
  trace?: TraceEntry[];
}

/** Runs the doctor; returns the exit code. */
export async function runDoctor(args: DoctorArgs, rawOutput: Output): Promise<number> {
  // One choke point for everything the doctor prints.
  const output: Output = {
    out: (text) => rawOutput.out(scrubText(text)),
    err: (text) => rawOutput.err(scrubText(text)),
    isTTY: rawOutput.isTTY,
  };
  const useExamples = args.profiles.length === 0;
  const profiles = useExamples ? Object.entries(EXAMPLE_PROFILES).map(([name, file]) => ({ name, file })) : args.profiles;
  const env = useExamples ? await exampleEnvironment() : process.env;

  // Validate every file before starting anything: a bad file is exit 2 with the field named.
  const configs = new Map<string, ProfileConfig>();
  try {
    for (const { name, file } of profiles) configs.set(name, await loadProfileFile(file, { profile: name, env }));
  } catch (error) {
    output.err(`${isMcpSupervisorError(error) ? error.message : String(error)}\n`);
    return 2;
  }

  const host = createHost({
    profiles: Object.fromEntries(configs),
    env,
    client: { roots: args.roots.map((dir) => ({ uri: pathToFileURL(dir).href, name: path.basename(dir) || dir })) },
    ...(args.timeoutMs === undefined ? {} : { discovery: { connectTimeoutMs: args.timeoutMs } }),
  });
  const recorder = args.trace ? recordTrace() : undefined;
  try {
    if (!args.json) {
      const mark = (status: string): string => (output.isTTY ? (status === 'ready' ? '\u2713' : '\u2717') : status === 'ready' ? 'ok  ' : 'FAIL');
      host.on('discovery:outcome', (event) => {
        const detail = event.status === 'ready' ? `${event.tools} tools` : event.status === 'failed' ? event.kind : event.status;
        output.out(`${mark(event.status)} ${event.key}/${event.server}: ${event.status} (${detail}, ${Math.round(event.ms)} ms)\n`);
      });
    }
    host.start();
    const report = await collect(host, [...configs.keys()], configs);
    if (args.call) report.call = await callOnce(host, [...configs.keys()], configs, args.call);
    if (recorder) report.trace = recorder.entries;
    if (args.json) output.out(`${JSON.stringify(scrubDeep(report), null, 2)}\n`);
    else {
      output.out(`\n${renderTable(report.rows)}\n`);
      if (report.call) output.out(`\n--call ${args.call?.server}/${args.call?.tool}: ${report.call.ok ? 'ok' : 'failed'}\n${report.call.text}\n`);
      if (recorder) output.out(`\n${renderTrace(recorder.entries)}\n`);
    }
    return report.allReady && (report.call?.ok ?? true) ? 0 : 1;
  } finally {
    recorder?.stop();
    await host.close();
  }
}

/** Waits for every profile and builds the rows. */
export async function collect(host: ReturnType<typeof createHost>, names: string[], configs: Map<string, ProfileConfig>): Promise<DoctorReport> {
  const views = await Promise.all(names.map((name) => host.ready(name)));
  const rows = views.flatMap((view, index) => rowsFor(names[index]!, configs.get(names[index]!), view));
  // A warning is not ready: a server that cannot do its job must not pass the doctor.
  const allReady = rows.every((row) => row.status === 'ready' || row.status === 'disabled');
  return { rows, allReady };
}

async function callOnce(
  host: ReturnType<typeof createHost>,
  names: string[],
  configs: Map<string, ProfileConfig>,
  call: NonNullable<DoctorArgs['call']>,
): Promise<{ ok: boolean; text: string }> {
  const profile = names.find((name) => configs.get(name)?.servers[call.server]);
  if (!profile) return { ok: false, text: `no profile has a server named "${call.server}"` };
  try {
    const result = await host.callTool(profile, call.server, call.tool, call.args);
    return { ok: result.isError !== true, text: JSON.stringify(result.content) };
  } catch (error) {
    return { ok: false, text: isMcpSupervisorError(error) ? `${error.code}: ${error.message}` : String(error) };
  }
}
