/**
 * The bench harness (`npm run bench`): runs every scenario of `bench/scenarios/index.ts` in one
 * process, one after the other, prints a table and writes `bench/results/latest.json` plus a
 * timestamped copy.
 *
 *   node dist/bench/run.js [--only NAME[,NAME…]] [--quick] [--strict] [--list]
 *
 * Each scenario gets its own fixture tag; once it is over (passed, failed or thrown), the harness
 * waits briefly for tagged processes to finish exiting and fails the scenario loudly if any is
 * still alive (after killing it). The run then simply returns: if a scenario left a worker,
 * socket or timer behind, Node does not exit, and a watchdog names what is holding it.
 *
 * Exit code: 0, or 1 if a scenario errored or leaked (with `--strict`, also if a target was
 * missed), 2 on a usage error.
 */
import { mkdtemp, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { newFixtureTag, reapTag } from '../test/helpers/fixtures.js';
import { pidsWithTag } from '../test/helpers/processes.js';
import { machineInfo } from './lib/machine.js';
import { evaluate, renderReport, type BenchReport, type ScenarioReport } from './lib/report.js';
import type { Scenario, ScenarioResult } from './lib/types.js';
import { withDeadline } from './lib/wait.js';
import { scenarios } from './scenarios/index.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RESULTS_DIR = join(ROOT, 'bench', 'results');
/**
 * A scenario that takes longer is abandoned as errored (it should clean up in its own finally).
 * A scenario may ask for more (`Scenario.timeoutMs`) for its full run.
 */
const SCENARIO_TIMEOUT_MS = 150_000;
/** How long tagged processes may take to finish exiting after their scenario returned. */
const LEAK_GRACE_MS = 2000;
/** If Node has not exited this long after the report, something was left open: say what. */
const EXIT_WATCHDOG_MS = 10_000;

const USAGE = `usage: node dist/bench/run.js [--only NAME[,NAME...]] [--quick] [--strict] [--list]
  --only    run only these scenarios (repeatable or comma-separated)
  --quick   few samples and a smaller catalog: a smoke run, figures indicative only
  --strict  exit 1 when a target is missed (default: only errors and leaks fail the run)
  --list    list the scenarios and exit`;

/** A bad command line (or `--help`, with an empty message). */
class UsageError extends Error {
  override name = 'UsageError';
}

interface Options {
  only: string[] | undefined;
  quick: boolean;
  strict: boolean;
  list: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      only: { type: 'string', multiple: true },
      quick: { type: 'boolean', default: false },
      strict: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) throw new UsageError('');
  const only = values.only?.flatMap((value) => value.split(',')).map((name) => name.trim()).filter(Boolean);
  return { only, quick: values.quick, strict: values.strict, list: values.list };
}

function select(only: readonly string[] | undefined): Scenario[] {
  if (only === undefined) return [...scenarios];
  const unknown = only.filter((name) => !scenarios.some((scenario) => scenario.name === name));
  if (unknown.length > 0) throw new UsageError(`unknown scenario(s) ${unknown.join(', ')}; known: ${scenarios.map((scenario) => scenario.name).join(', ')}`);
  return scenarios.filter((scenario) => only.includes(scenario.name));
}

function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}

function describeError(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

/** Runs one scenario and checks that it left no tagged process behind. Never throws. */
async function runScenario(scenario: Scenario, quick: boolean, tags: string[]): Promise<ScenarioReport> {
  const tag = newFixtureTag(`bench-${scenario.name}`);
  tags.push(tag);
  const tmpDir = await mkdtemp(join(os.tmpdir(), `mcp-bench-${scenario.name}-`));
  const errors: string[] = [];
  let result: ScenarioResult | undefined;
  const started = performance.now();
  log(`${scenario.name}: ${scenario.description}`);
  try {
    result = await withDeadline(
      `scenario ${scenario.name}`,
      scenario.run({
        quick,
        tag,
        tmpDir,
        samples: (full, few) => (quick ? few : full),
        log: (line) => log(`${scenario.name}: ${line}`),
      }),
      quick ? SCENARIO_TIMEOUT_MS : Math.max(SCENARIO_TIMEOUT_MS, scenario.timeoutMs ?? 0),
    );
  } catch (error) {
    errors.push(describeError(error));
    log(`${scenario.name}: ERROR ${describeError(error)}`);
  } finally {
    const { leaked, survivors } = await reapTag(tag, { graceMs: LEAK_GRACE_MS });
    if (leaked.length > 0) {
      const list = leaked.map(({ pid, cmdline }) => `pid ${pid}: ${cmdline || '(no cmdline)'}`).join('; ');
      const message = `LEAK: ${leaked.length} process(es) tagged ${tag} outlived the scenario and had to be killed${survivors.length > 0 ? ` (${survivors.length} survived SIGKILL)` : ''}: ${list}`;
      errors.push(message);
      log(`${scenario.name}: ${message}`);
    }
    await rm(tmpDir, { recursive: true, force: true });
  }
  const durationMs = Math.round(performance.now() - started);
  log(`${scenario.name}: ${errors.length === 0 ? 'done' : 'FAILED'} in ${(durationMs / 1000).toFixed(1)} s`);
  return {
    name: scenario.name,
    description: scenario.description,
    status: errors.length === 0 ? 'ok' : 'error',
    durationMs,
    errors,
    metrics: (result?.metrics ?? []).map(evaluate),
    notes: result?.notes ?? [],
    details: result?.details ?? {},
  };
}

/** Writes `latest.json` and `<ISO time>.json` (each through a `.tmp.json` and a rename). */
async function writeResults(report: BenchReport): Promise<string[]> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const text = `${JSON.stringify(report, null, 2)}\n`;
  const stamp = report.startedAt.replace(/:/g, '-');
  const written: string[] = [];
  for (const name of [`${stamp}.json`, 'latest.json']) {
    const file = join(RESULTS_DIR, name);
    const temporary = join(RESULTS_DIR, `${name.replace(/\.json$/, '')}.tmp.json`);
    await writeFile(temporary, text);
    await rename(temporary, file);
    written.push(file);
  }
  return written;
}

async function main(argv: string[]): Promise<number> {
  let options: Options;
  let selected: Scenario[];
  try {
    options = parseOptions(argv);
    selected = select(options.only);
  } catch (error) {
    process.stderr.write(`${error instanceof UsageError || error instanceof TypeError ? error.message : describeError(error)}\n${USAGE}\n`.trimStart());
    return error instanceof UsageError && error.message === '' ? 0 : 2;
  }
  if (options.list) {
    for (const scenario of scenarios) process.stdout.write(`${scenario.name.padEnd(17)} ${scenario.description}\n`);
    return 0;
  }

  const startedAt = new Date();
  const started = performance.now();
  const machine = machineInfo(ROOT);
  const tags: string[] = [];
  const reports: ScenarioReport[] = [];
  for (const scenario of selected) reports.push(await runScenario(scenario, options.quick, tags));

  // Belt and braces: nothing tagged by any scenario may be alive now.
  const stragglers = tags.flatMap((tag) => pidsWithTag(tag).map((pid) => `${pid} (${tag})`));
  const metrics = reports.flatMap((scenario) => scenario.metrics);
  const report: BenchReport = {
    schema: 1,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    durationMs: Math.round(performance.now() - started),
    options: { quick: options.quick, only: options.only ?? null, strict: options.strict },
    machine,
    loadAverageAtEnd: os.loadavg().map((load) => Math.round(load * 100) / 100),
    scenarios: reports,
    summary: {
      scenarios: reports.length,
      errored: reports.filter((scenario) => scenario.status === 'error').length,
      targets: metrics.filter((metric) => metric.verdict !== 'info').length,
      passed: metrics.filter((metric) => metric.verdict === 'pass').length,
      failed: metrics.filter((metric) => metric.verdict === 'fail').length,
    },
  };
  process.stdout.write(`\n${renderReport(report)}\n`);
  for (const file of await writeResults(report)) log(`wrote ${file}`);

  let code = 0;
  if (stragglers.length > 0) {
    process.stderr.write(`\nLEAK: fixture processes still alive at the end of the run: ${stragglers.join(', ')}\n`);
    code = 1;
  }
  if (report.summary.errored > 0) code = 1;
  if (options.strict && report.summary.failed > 0) code = 1;
  return code;
}

process.exitCode = await main(process.argv.slice(2));
// Everything was ended above, so Node should now exit by itself. If it does not, say why.
setTimeout(() => {
  process.stderr.write(`\nbench: still running ${EXIT_WATCHDOG_MS / 1000} s after the report; open resources: ${process.getActiveResourcesInfo().join(', ')}\n`);
  process.exitCode = 1;
}, EXIT_WATCHDOG_MS).unref();
