/**
 * Scenario `lifeline`: how long marked servers outlive a host that was SIGKILLed, against the bare
 * cost of killing the same process groups directly, measured in the same run and interleaved
 * round by round.
 *
 * Series (one sample of each per round):
 *   - lifeline       a host program (`test/programs/lifeline-host.ts`, layout `bench`) starts a
 *                    `Lifeline` and five marked servers in groups of their own — four stdio fixtures
 *                    `--ignore-stdin-eof --ignore-sigterm` and one `--wrapper` tree (node wrapper →
 *                    /bin/sh → node server + sleep grandchild): eight processes. Once all are up,
 *                    timed from `kill(host, SIGKILL)` to the moment the last of them is no longer
 *                    running (a zombie counts as gone). Nothing but the reaper ends them: the
 *                    servers ignore stdin EOF and nobody else signals them;
 *   - kill(-pgid)    the same five groups spawned by the bench itself, timed from `kill(-pgid,
 *                    SIGKILL)` of each group to the last process gone: the floor under any reaper.
 *
 * Also reported: the reaper's RSS while it waits (VmRSS of the `/bin/sh` process), and how long
 * after the SIGKILL the reaper itself had exited.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { killGroups, spawnTree, type TreeProcess } from '../../test/helpers/lifeline-trees.js';
import { cmdline, procState } from '../../test/helpers/processes.js';
import { round2, roundSummary, summarize } from '../lib/stats.js';
import type { Metric, Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { waitFor } from '../lib/wait.js';

const HOST_PROGRAM = fileURLToPath(new URL('../../test/programs/lifeline-host.js', import.meta.url));
/** The promise the tests make: every marked process gone within 2 s of the host's death. */
const GONE_WITHIN_MS = 2000;
const REAPER_RSS_LIMIT_MB = 5;

interface HostReport {
  host: number;
  reaper: number;
  processes: TreeProcess[];
}

interface LifelineSample {
  goneMs: number;
  reaperExitMs: number;
  reaperRssKb: number;
}

const running = (pids: readonly number[]) => pids.filter((pid) => procState(pid) === 'alive');

/** SIGKILLs the reaper if it is still there (verified by its command line, against pid reuse). */
function killReaper(pid: number | undefined): void {
  if (pid === undefined || procState(pid) !== 'alive' || !cmdline(pid).includes('mcp-supervisor-lifeline')) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
}

function rssKb(pid: number): number {
  try {
    return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

/** Host with a lifeline and five marked servers: SIGKILL the host, time until every server is gone. */
async function lifelineSample(context: ScenarioContext, index: number): Promise<LifelineSample> {
  const child = spawn(process.execPath, [HOST_PROGRAM, 'wait', context.tag, context.tmpDir, 'bench'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, MCP_FIXTURE_TAG: context.tag },
  });
  child.stdin.on('error', () => undefined);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let report: HostReport | undefined;
  try {
    await waitFor(`lifeline host ${index} to report its servers up`, () => stdout.includes('\n') || child.exitCode !== null, { timeoutMs: 30_000, intervalMs: 5 });
    if (child.exitCode !== null) throw new Error(`lifeline host exited early (${child.exitCode}); stdout: ${stdout}; stderr: ${stderr}`);
    report = JSON.parse(stdout.slice(0, stdout.indexOf('\n'))) as HostReport;
    const pids = report.processes.map((entry) => entry.pid);
    if (running(pids).length !== pids.length || procState(report.reaper) !== 'alive') {
      const states = [...report.processes.map((entry) => `${entry.role} ${entry.pid} ${procState(entry.pid)}`), `reaper ${report.reaper} ${procState(report.reaper)}`];
      throw new Error(`lifeline host ${index}: tree or reaper not running before the kill: ${states.join(', ')}; host exit ${child.exitCode}/${child.signalCode}; stdout: ${stdout}; stderr: ${stderr}`);
    }
    const reaperRssKb = rssKb(report.reaper);
    const reaper = report.reaper;

    const started = performance.now();
    process.kill(report.host, 'SIGKILL');
    await waitFor(`every marked server of host ${index} to be gone`, () => running(pids).length === 0, { timeoutMs: GONE_WITHIN_MS, intervalMs: 1 });
    const goneMs = performance.now() - started;
    await waitFor(`the reaper of host ${index} to exit`, () => procState(reaper) !== 'alive', { timeoutMs: GONE_WITHIN_MS, intervalMs: 1 });
    const reaperExitMs = performance.now() - started;
    return { goneMs, reaperExitMs, reaperRssKb };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (report !== undefined) {
      killGroups(report.processes.map((entry) => entry.pgid));
      killReaper(report.reaper);
    }
    await closed;
  }
}

/** The same five groups spawned directly; time kill(-pgid) of each → every process gone. */
async function baseKillSample(context: ScenarioContext, index: number): Promise<number> {
  const tree = await spawnTree('bench', { env: { MCP_FIXTURE_TAG: context.tag }, tmpDir: context.tmpDir, label: `base-${index}` });
  const exits = tree.leaders.map((child) => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve()))));
  const pids = tree.processes.map((entry) => entry.pid);
  try {
    const started = performance.now();
    killGroups(tree.leaderGroups);
    await waitFor(`the baseline groups ${index} to be gone`, () => running(pids).length === 0, { timeoutMs: GONE_WITHIN_MS, intervalMs: 1 });
    return performance.now() - started;
  } finally {
    killGroups(tree.processes.map((entry) => entry.pgid));
    await Promise.all(exits);
  }
}

function percentileRows(name: string, values: readonly number[], baseline: readonly number[], target?: { p50: number; p99: number }): Metric[] {
  const value = summarize(values);
  const base = summarize(baseline);
  return (['p50', 'p99'] as const).map((stat) => {
    const metric: Metric = { name: `${name} ${stat}`, unit: 'ms', value: round2(value[stat]), samples: value.n, baseline: { label: `kill(-pgid) ${stat}`, value: round2(base[stat]) } };
    if (target !== undefined) metric.target = { of: 'value', op: '<=', limit: target[stat] };
    return metric;
  });
}

/** Host SIGKILLed → last marked server gone, against a bare kill(-pgid) of the same groups. */
export const lifelineScenario: Scenario = {
  name: 'lifeline',
  description: 'host SIGKILLed → its 5 marked servers (8 processes) gone via the /bin/sh reaper, vs a bare kill(-pgid) of the same groups',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const rounds = context.samples(20, 3);
    const lifeline: LifelineSample[] = [];
    const baseKill: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // Alternate which goes first so neither always runs right after the other's teardown.
      if (round % 2 === 0) {
        baseKill.push(await baseKillSample(context, round));
        lifeline.push(await lifelineSample(context, round));
      } else {
        lifeline.push(await lifelineSample(context, round));
        baseKill.push(await baseKillSample(context, round));
      }
      if ((round + 1) % 5 === 0 || round + 1 === rounds) context.log(`round ${round + 1}/${rounds}`);
    }
    const gone = lifeline.map((sample) => sample.goneMs);
    const reaperExit = summarize(lifeline.map((sample) => sample.reaperExitMs));
    const rss = summarize(lifeline.map((sample) => sample.reaperRssKb / 1024));
    const added = summarize(gone.map((ms, index) => ms - (baseKill[index] ?? Number.NaN)));
    const metrics: Metric[] = [
      ...percentileRows('SIGKILL host → servers gone', gone, baseKill, { p50: 250, p99: GONE_WITHIN_MS }),
      { name: 'added over kill(-pgid), paired p50', unit: 'ms', value: round2(added.p50), samples: added.n },
      { name: 'reaper exited after host SIGKILL p50', unit: 'ms', value: round2(reaperExit.p50), samples: reaperExit.n },
      { name: 'reaper RSS (max)', unit: 'MB', value: round2(rss.max), samples: rss.n, target: { of: 'value', op: '<=', limit: REAPER_RSS_LIMIT_MB } },
    ];
    return {
      metrics,
      notes: [
        'lifeline: value = kill(host, SIGKILL) → last of the 8 marked processes (4 stdio fixtures --ignore-stdin-eof --ignore-sigterm + a --wrapper tree of 4) no longer running (zombies count as gone), polled every 1 ms. The host never ran close(); only the reaper ends them.',
        '  baseline kill(-pgid): the same 5 groups spawned by the bench, timed from kill(-pgid, SIGKILL) of each to the last process gone. Interleaved round by round, order alternating; "added" is lifeline minus baseline of the same round.',
        `  reaper RSS: VmRSS of the /bin/sh reaper while it waits on its stdin. Targets: p50 <= 250 ms, p99 <= ${GONE_WITHIN_MS} ms (the tests' promise), RSS <= ${REAPER_RSS_LIMIT_MB} MB.`,
      ],
      details: {
        rounds,
        layout: 'bench: 4 x stdio fixture + 1 x --wrapper (node → sh → node + sleep), each in its own process group',
        summaries: {
          lifelineGone: roundSummary(summarize(gone)),
          baseKill: roundSummary(summarize(baseKill)),
          addedOverBaseline: roundSummary(added),
          reaperExit: roundSummary(reaperExit),
          reaperRssMb: roundSummary(rss),
        },
        samplesMs: {
          lifelineGone: gone.map(round2),
          baseKill: baseKill.map(round2),
          reaperExit: lifeline.map((sample) => round2(sample.reaperExitMs)),
        },
      },
    };
  },
};
