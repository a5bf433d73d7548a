/**
 * Runs the official MCP conformance client suite (@modelcontextprotocol/conformance, `conformance
 * client`) against any client command and returns one result per scenario. Generic over the client:
 * ./sdk-client.ts (bare SDK baseline) today, a client built on mcp-supervisor later.
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
 *   listening: see preload.ts) in its own process group, which is killed (SIGTERM, then SIGKILL)
 *   after every run: the CLI kills only the shell it spawned a timed-out client through, so client
 *   processes could otherwise outlive it. Groups still alive when this process exits are SIGKILLed.
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
  checks: Check[];
  /** Checks with status FAILURE or WARNING (the suite's own pass criterion counts both). */
  failures: Check[];
  /** No failures and at least one SUCCESS check (some scenarios report nothing at all when the client never connects). */
  passed: boolean;
  /** How many times the scenario ran (more than 1 only for a timing-sensitive retry). */
  attempts: number;
  /** Wall time of the last attempt. */
  durationMs: number;
  /** The tail of the CLI's stdout and stderr (the client's own output is in it when the client failed). */
  output: string;
}

export interface SuiteOptions {
  /** The client command line; the CLI runs it through a shell and appends the server URL. */
  clientCommand: string;
  /** Scenario names; default: every client scenario `conformance list --client` prints. */
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
/** The conformance CLI (the package has no `exports` map, so its package.json resolves directly). */
export const CONFORMANCE_CLI = path.join(path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist', 'index.js');
export const PRELOAD = fileURLToPath(new URL('./preload.js', import.meta.url));

/** Scenarios whose verdict depends on wall-clock timing: run alone, retried on a timing-only failure. */
const TIMING_SENSITIVE = new Set(['sse-retry']);
/** Checks that fail on timing alone. */
const TIMING_CHECKS = new Set(['client-sse-retry-timing']);

const KILL_GRACE_MS = 20_000;
const OUTPUT_TAIL = 16_000;

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
}

/** Runs the conformance CLI with `args` in its own process group and leaves nothing of it behind. */
async function runCli(args: string[], env: NodeJS.ProcessEnv, deadlineMs: number): Promise<CliRun> {
  const child = spawn(process.execPath, ['--import', PRELOAD, CONFORMANCE_CLI, ...args], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-OUTPUT_TAIL);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
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
  return { code, signal, timedOut, output };
}

function childEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --dns-result-order=ipv4first`.trim();
  return env;
}

/** Every client scenario the installed suite knows, in its own order. */
export async function listClientScenarios(): Promise<string[]> {
  const run = await runCli(['list', '--client'], childEnv(undefined), 30_000);
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

function result(scenario: string, checks: Check[], attempts: number, durationMs: number, output: string): ScenarioResult {
  const failures = checks.filter((check) => check.status === 'FAILURE' || check.status === 'WARNING');
  const passed = failures.length === 0 && checks.some((check) => check.status === 'SUCCESS');
  return { scenario, checks, failures, passed, attempts, durationMs, output };
}

async function runScenarioOnce(scenario: string, options: Required<Pick<SuiteOptions, 'clientCommand' | 'timeoutMs'>>, env: NodeJS.ProcessEnv, outDir: string): Promise<{ checks: Check[]; output: string }> {
  const args = ['client', '--command', options.clientCommand, '--scenario', scenario, '--timeout', String(options.timeoutMs), '-o', outDir];
  const run = await runCli(args, env, options.timeoutMs + KILL_GRACE_MS);
  const output = run.output;
  const files = await findChecksFiles(outDir);
  const mine = files.filter((file) => isResultDirOf(scenario, path.dirname(file)));
  if (mine.length !== 1) {
    const why = run.timedOut ? `killed after ${options.timeoutMs + KILL_GRACE_MS} ms` : `exit ${run.code ?? run.signal}`;
    return { checks: [harnessFailure(`expected one checks.json for ${scenario}, found [${files.join(', ')}] (CLI ${why})`)], output };
  }
  let checks: unknown;
  try {
    checks = JSON.parse(await readFile(path.join(outDir, mine[0]!), 'utf8'));
  } catch (error) {
    return { checks: [harnessFailure(`${mine[0]}: ${String(error)}`)], output };
  }
  if (!Array.isArray(checks)) return { checks: [harnessFailure(`${mine[0]} is not an array`)], output };
  return { checks: checks as Check[], output };
}

/** Runs the given (default: all) client scenarios against `clientCommand`; results in scenario order. */
export async function runConformanceSuite(options: SuiteOptions): Promise<ScenarioResult[]> {
  const scenarios = options.scenarios ?? (await listClientScenarios());
  const settings = { clientCommand: options.clientCommand, timeoutMs: options.timeoutMs ?? 30_000 };
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
        const { checks, output } = await runScenarioOnce(scenario, settings, env, path.join(root, String(runs++)));
        const outcome = result(scenario, checks, attempt, Math.round(performance.now() - started), output);
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
