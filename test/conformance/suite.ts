/**
 * Runs the official MCP conformance client suite (`conformance client`) against any client command
 * and returns one result per scenario. Generic over the client: ./client.ts (mcp-supervisor's public
 * API), ./sdk-client.ts (bare v1 SDK baseline), ./sdk-v2-client.ts (bare v2 SDK baseline).
 *
 * Which CLI: `cli: 'current'` (default) is @modelcontextprotocol/conformance 0.1.16, the 2025-era
 * suite `npm test` holds the library to; `cli: 'next'` is the 0.2.0 pre-release, installed as the
 * devDependency alias @modelcontextprotocol/conformance-next, which adds the 2026-07-28 scenarios
 * (stateless era: `server/discover`, the `_meta` envelope, `input_required`, header mirroring…).
 * `specVersion` is handed to both `list --client` and `client` as `--spec-version`: it picks the
 * scenarios (cumulative by date) and, on the 0.2.0 CLI, the era every scenario server speaks; the
 * CLI tells the client in `MCP_CONFORMANCE_PROTOCOL_VERSION` (0.2.0: the given version, else
 * 2026-07-28 for scenarios introduced then and 2025-11-25 for the rest).
 *
 * How it runs:
 * - One CLI process per scenario (`client --scenario <name>`), not `--suite all`. Suite mode starts
 *   all 26 scenarios and their 26 client processes at once; on a 2-core machine that starves the
 *   timing-sensitive `sse-retry` scenario (the client must reconnect 500 ms after a stream closes,
 *   +200 ms tolerance: suite mode measured 1248 ms here, a FAILURE), and it cannot run a subset.
 *   Here `concurrency` (default 2) scenarios run at a time and the timing-sensitive ones run
 *   afterwards, alone (and once more if only their timing check failed). Each run has its own
 *   output directory, so a `checks.json` maps to its scenario by construction; the CLI's directory
 *   name (`<scenario>-<timestamp>`, nested for `auth/…`) is checked as well.
 * - The CLI runs as `node --import ./preload.js <cli>` (Node 20 `fs.globSync` shim, loopback-only
 *   listening: see preload.ts; both CLI versions need exactly the same preload) in its own process
 *   group, which is killed (SIGTERM, then SIGKILL) after every run: the CLI kills only the shell it
 *   spawned a timed-out client through, so client processes could otherwise outlive it. Groups
 *   still alive when this process exits are SIGKILLed.
 * - Besides the checks, a result carries the CLI's own verdict (`OVERALL: …`, which also counts a
 *   client that crashed or hung) and the client's saved stderr, for failure messages.
 * - Clients get `--dns-result-order=ipv4first` in NODE_OPTIONS: the scenario URLs say `localhost`,
 *   the servers listen on 127.0.0.1 only, and a resolver that lists ::1 first would otherwise cost a
 *   refused connection attempt (Node 20's happy-eyeballs would still recover) per connection.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { killTree } from '../helpers/processes.js';

/** One check as the CLI writes it to `checks.json`. */
export interface Check {
  id: string;
  name: string;
  description?: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | (string & {});
  timestamp?: string;
  errorMessage?: string;
  details?: Record<string, unknown>;
  specReferences?: { id: string; url?: string }[];
}

export interface ScenarioResult {
  scenario: string;
  /** The `--spec-version` the scenario ran at (absent: the CLI's default for the scenario). */
  specVersion?: string;
  checks: Check[];
  /** Checks with status FAILURE or WARNING (the suite's own pass criterion counts both). */
  failures: Check[];
  /** No failures and at least one SUCCESS check (some scenarios report nothing at all when the client never connects). */
  passed: boolean;
  /**
   * The CLI's own verdict (`OVERALL: PASSED|FAILED`), absent when it printed none. Stricter than
   * `passed`: it also fails a run whose client exited non-zero or timed out, unless the scenario
   * allows a client error (the ones where the right outcome is a refusal). Not part of `passed`.
   */
  cliVerdict?: 'PASSED' | 'FAILED';
  /** What the CLI said about the client process when it did not end well (`exited with code 1`, `timed out`). */
  clientError?: string;
  /** How many times the scenario ran (more than 1 only for a timing-sensitive retry). */
  attempts: number;
  /** Wall time of the last attempt. */
  durationMs: number;
  /** The tail of the CLI's stdout and stderr (the client's own output is in it when the client failed). */
  output: string;
  /** The tail of the client's own stderr, as the CLI saved it next to `checks.json` (empty when there is none). */
  clientStderr: string;
}

/** Which conformance CLI runs, and at which spec version. */
export interface CliSelection {
  /** `current` (default): @modelcontextprotocol/conformance 0.1.16; `next`: the 0.2.0 pre-release (`conformance-next`). */
  cli?: ConformanceCliName;
  /** `--spec-version` for `list` and `client` (e.g. `2026-07-28`); default none (the CLI's own default). */
  specVersion?: string;
}

export interface SuiteOptions extends CliSelection {
  /** The client command line; the CLI runs it through a shell and appends the server URL. */
  clientCommand: string;
  /** Scenario names; default: every client scenario `conformance list --client [--spec-version v]` prints. */
  scenarios?: string[];
  /** Per-scenario client timeout handed to the CLI (`--timeout`), default 30 000 ms. The CLI process gets 20 s more before it is killed. */
  timeoutMs?: number;
  /** Extra environment for the CLI and, through it, the client. */
  env?: Record<string, string>;
  /** Scenarios run at once (timing-sensitive ones always alone), default 2. */
  concurrency?: number;
  /** Reruns of a timing-sensitive scenario whose only failures are timing checks, default 1. */
  timingRetries?: number;
}

const require = createRequire(import.meta.url);

export type ConformanceCliName = 'current' | 'next';
/** The package (directory under node_modules) of each CLI. */
const CLI_PACKAGES: Record<ConformanceCliName, string> = {
  current: '@modelcontextprotocol/conformance',
  next: '@modelcontextprotocol/conformance-next',
};

/** A conformance CLI's entry point (the packages have no `exports` map, so package.json resolves directly). */
export function conformanceCli(name: ConformanceCliName = 'current'): string {
  return path.join(path.dirname(require.resolve(`${CLI_PACKAGES[name]}/package.json`)), 'dist', 'index.js');
}

/** The installed version of a conformance CLI (`0.1.16`, `0.2.0-alpha.12`…). */
export function conformanceCliVersion(name: ConformanceCliName = 'current'): string {
  return (require(`${CLI_PACKAGES[name]}/package.json`) as { version: string }).version;
}

export const PRELOAD = fileURLToPath(new URL('./preload.js', import.meta.url));

/** Scenarios whose verdict depends on wall-clock timing: run alone, retried on a timing-only failure. */
const TIMING_SENSITIVE = new Set(['sse-retry']);
/** Checks that fail on timing alone. */
const TIMING_CHECKS = new Set(['client-sse-retry-timing']);

const KILL_GRACE_MS = 20_000;
const OUTPUT_TAIL = 16_000;
const STDERR_TAIL = 4_000;

/** Process groups of CLI runs still in flight; SIGKILLed if this process exits first. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function trackGroup(pgid: number): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const group of liveGroups) {
        try {
          process.kill(-group, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  liveGroups.add(pgid);
}

interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  output: string;
  /** Every line of the whole output that states a verdict (see NOTABLE), however long the output. */
  notable: string;
}

/** Lines of the CLI's output that say how a run ended: kept even when they scroll out of the tail. */
const NOTABLE = /OVERALL: |Client exited with code|Client timed out after|SKIPPED: scenario/;

/** Collects one stream: its text into `sink`, its notable lines (whole lines, across chunks) into `notable`. */
function lineWatcher(sink: (text: string) => void, notable: string[]): { data: (chunk: Buffer) => void; end: () => void } {
  let partial = '';
  const take = (line: string) => {
    if (NOTABLE.test(line)) notable.push(line);
  };
  return {
    data(chunk) {
      const text = chunk.toString();
      sink(text);
      const lines = (partial + text).split('\n');
      partial = lines.pop() ?? '';
      lines.forEach(take);
    },
    end: () => take(partial),
  };
}

/** Runs a conformance CLI with `args` in its own process group and leaves nothing of it behind. */
async function runCli(cli: string, args: string[], env: NodeJS.ProcessEnv, deadlineMs: number): Promise<CliRun> {
  const child = spawn(process.execPath, ['--import', PRELOAD, cli, ...args], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let output = '';
  const collect = (text: string) => {
    output = (output + text).slice(-OUTPUT_TAIL);
  };
  const notable: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    const watcher = lineWatcher(collect, notable);
    stream.on('data', watcher.data);
    stream.once('end', watcher.end);
  }
  const closed = once(child, 'close').catch(() => undefined);
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('exit', (code, signal) => resolve([code, signal]));
    child.once('error', reject);
  });
  const pgid = child.pid;
  if (pgid === undefined) {
    await exited; // rejects with the spawn error
    throw new Error('conformance CLI did not start');
  }
  trackGroup(pgid);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void killTree(pgid);
  }, deadlineMs);
  let code: number | null;
  let signal: NodeJS.Signals | null;
  try {
    [code, signal] = await exited;
  } finally {
    clearTimeout(timer);
    // Whatever the CLI left in its group (a client it gave up on) goes with it.
    await killTree(pgid);
    liveGroups.delete(pgid);
  }
  // Drain what is left in the pipes (bounded: nothing of the group is alive any more).
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  return { code, signal, timedOut, output, notable: notable.join('\n') };
}

function childEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --dns-result-order=ipv4first`.trim();
  return env;
}

function specVersionArgs(selection: CliSelection): string[] {
  return selection.specVersion === undefined ? [] : ['--spec-version', selection.specVersion];
}

/**
 * Every client scenario the chosen CLI knows (at `specVersion`, when given), in its own order. The
 * lines read `  - <name> [<versions>]` (both CLIs); only the name is kept.
 */
export async function listClientScenarios(selection: CliSelection = {}): Promise<string[]> {
  const run = await runCli(conformanceCli(selection.cli), ['list', '--client', ...specVersionArgs(selection)], childEnv(undefined), 30_000);
  if (run.code !== 0) throw new Error(`conformance list failed (${run.code ?? run.signal}):\n${run.output}`);
  const names: string[] = [];
  let inClientSection = false;
  for (const line of run.output.split('\n')) {
    if (/^Client scenarios/.test(line)) inClientSection = true;
    else if (/^\S/.test(line)) inClientSection = false;
    const match = inClientSection ? /^\s+-\s+(\S+)/.exec(line) : null;
    if (match?.[1]) names.push(match[1]);
  }
  if (names.length === 0) throw new Error(`no client scenarios in conformance list output:\n${run.output}`);
  return names;
}

/** Every `checks.json` below `dir`, as paths relative to it. */
async function findChecksFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((entry) => entry.isFile() && entry.name === 'checks.json')
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

/** `<scenario>-<ISO timestamp with : and . as ->`, the CLI's result directory name (runner/utils.ts). */
function isResultDirOf(scenario: string, relativeDir: string): boolean {
  const posix = relativeDir.split(path.sep).join('/');
  return posix.startsWith(`${scenario}-`) && /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/.test(posix.slice(scenario.length + 1));
}

function harnessFailure(message: string): Check {
  return { id: 'conformance-harness', name: 'ConformanceHarness', status: 'FAILURE', errorMessage: message };
}

/** The CLI's verdict and its word on the client process, from its notable lines (same wording in 0.1.16 and 0.2.0). */
function cliReport(output: string): Pick<ScenarioResult, 'cliVerdict' | 'clientError'> {
  const verdict = /OVERALL: (PASSED|FAILED)/.exec(output)?.[1] as 'PASSED' | 'FAILED' | undefined;
  const exited = /Client exited with code (-?\d+)/.exec(output)?.[1];
  const clientError = /Client timed out after \d+ms/.test(output) ? 'timed out' : exited !== undefined ? `exited with code ${exited}` : undefined;
  return { ...(verdict === undefined ? {} : { cliVerdict: verdict }), ...(clientError === undefined ? {} : { clientError }) };
}

function result(scenario: string, specVersion: string | undefined, run: ScenarioRun, attempts: number, durationMs: number): ScenarioResult {
  const { checks, output, notable, clientStderr } = run;
  const failures = checks.filter((check) => check.status === 'FAILURE' || check.status === 'WARNING');
  const passed = failures.length === 0 && checks.some((check) => check.status === 'SUCCESS');
  return { scenario, ...(specVersion === undefined ? {} : { specVersion }), checks, failures, passed, ...cliReport(notable), attempts, durationMs, output, clientStderr };
}

interface RunSettings extends CliSelection {
  cliPath: string;
  clientCommand: string;
  timeoutMs: number;
}

interface ScenarioRun {
  checks: Check[];
  output: string;
  notable: string;
  clientStderr: string;
}

async function runScenarioOnce(scenario: string, settings: RunSettings, env: NodeJS.ProcessEnv, outDir: string): Promise<ScenarioRun> {
  const args = ['client', '--command', settings.clientCommand, '--scenario', scenario, ...specVersionArgs(settings), '--timeout', String(settings.timeoutMs), '-o', outDir];
  const run = await runCli(settings.cliPath, args, env, settings.timeoutMs + KILL_GRACE_MS);
  const { output, notable } = run;
  const files = await findChecksFiles(outDir);
  const mine = files.filter((file) => isResultDirOf(scenario, path.dirname(file)));
  if (mine.length !== 1) {
    // The 0.2.0 CLI writes nothing for a scenario that does not apply at the requested version.
    const skipped = /SKIPPED: scenario '[^']*' is not applicable[^\n]*/.exec(notable)?.[0];
    const why = skipped ?? (run.timedOut ? `killed after ${settings.timeoutMs + KILL_GRACE_MS} ms` : `exit ${run.code ?? run.signal}`);
    return { checks: [harnessFailure(`expected one checks.json for ${scenario}, found [${files.join(', ')}] (CLI ${why})`)], output, notable, clientStderr: '' };
  }
  // Both CLIs save the client's stdout.txt and stderr.txt next to checks.json.
  const clientStderr = (await readFile(path.join(outDir, path.dirname(mine[0]!), 'stderr.txt'), 'utf8').catch(() => '')).slice(-STDERR_TAIL);
  let checks: unknown;
  try {
    checks = JSON.parse(await readFile(path.join(outDir, mine[0]!), 'utf8'));
  } catch (error) {
    return { checks: [harnessFailure(`${mine[0]}: ${String(error)}`)], output, notable, clientStderr };
  }
  if (!Array.isArray(checks)) return { checks: [harnessFailure(`${mine[0]} is not an array`)], output, notable, clientStderr };
  return { checks: checks as Check[], output, notable, clientStderr };
}

/** Runs the given (default: all) client scenarios against `clientCommand`; results in scenario order. */
export async function runConformanceSuite(options: SuiteOptions): Promise<ScenarioResult[]> {
  const selection: CliSelection = { ...(options.cli === undefined ? {} : { cli: options.cli }), ...(options.specVersion === undefined ? {} : { specVersion: options.specVersion }) };
  const scenarios = options.scenarios ?? (await listClientScenarios(selection));
  const settings: RunSettings = { ...selection, cliPath: conformanceCli(options.cli), clientCommand: options.clientCommand, timeoutMs: options.timeoutMs ?? 30_000 };
  const concurrency = Math.max(1, options.concurrency ?? 2);
  const timingRetries = Math.max(0, options.timingRetries ?? 1);
  const env = childEnv(options.env);
  const root = await mkdtemp(path.join(tmpdir(), 'mcp-conformance-'));
  const results = new Map<number, ScenarioResult>();
  try {
    let runs = 0;
    const runScenario = async (index: number): Promise<void> => {
      const scenario = scenarios[index]!;
      const retries = TIMING_SENSITIVE.has(scenario) ? timingRetries : 0;
      for (let attempt = 1; ; attempt++) {
        const started = performance.now();
        const run = await runScenarioOnce(scenario, settings, env, path.join(root, String(runs++)));
        const outcome = result(scenario, options.specVersion, run, attempt, Math.round(performance.now() - started));
        const timingOnly = outcome.failures.length > 0 && outcome.failures.every((check) => TIMING_CHECKS.has(check.id));
        if (outcome.passed || !timingOnly || attempt > retries) {
          results.set(index, outcome);
          return;
        }
      }
    };
    const shared = scenarios.map((_, index) => index).filter((index) => !TIMING_SENSITIVE.has(scenarios[index]!));
    const alone = scenarios.map((_, index) => index).filter((index) => TIMING_SENSITIVE.has(scenarios[index]!));
    const worker = async () => {
      for (let index = shared.shift(); index !== undefined; index = shared.shift()) await runScenario(index);
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, shared.length) }, worker));
    for (const index of alone) await runScenario(index);
    return scenarios.map((_, index) => results.get(index)!);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
