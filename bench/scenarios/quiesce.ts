/**
 * Scenario `quiesce`: how long it takes from retiring a discovery body to "fully quiesced"
 * (worker returned or exited, every recorded process group gone), against the bare cost of the
 * operating-system work underneath, measured in the same run and interleaved sample by sample so
 * both see the same machine noise.
 *
 * Series (one sample of each per round):
 *   - base-kill/<fixture>  the same fixture spawned directly in its own group (detached), and
 *                          timed from `kill(-pgid, SIGKILL)` to the leader's `exit` event with no
 *                          member of its group still running: the floor of any quiesce;
 *   - cooperative/<fixture>  a body with that one server, retired once its child pid is recorded
 *                          and the fixture tree is up; default grace, so the body itself kills
 *                          its group and returns (rung `cooperative`);
 *   - base-terminate       `worker.terminate()` → `exit` of a bare worker thread that loaded the
 *                          body's modules and spins in a synchronous loop;
 *   - hard/wrapper         a body stuck by `blockAfterSpawnMs: -1` with `quiesceGraceMs` 50: the
 *                          ladder has to terminate the worker, then kill the recorded group.
 *
 * Fixtures: `--hang-initialize` (one process that never answers) and `--hang-initialize
 * --wrapper` (node wrapper → /bin/sh → real server + a `sleep` grandchild: four processes).
 * "Up" means every role of the tree wrote its pid to the `--pid-file`, so the measurement is of a
 * hung server, not of a process still being exec'd.
 */
import { once } from 'node:events';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { DiscoveryCoordinator, type BodyTestHooks, type QuiesceReport, type QuiesceRung } from '../../src/discovery/index.js';
import { parseProfileConfig, type ServerConfig } from '../../src/index.js';
import { startStdioFixture, stdioFixtureConfig } from '../../test/helpers/fixtures.js';
import { pidsInGroup } from '../../test/helpers/processes.js';
import { round2, roundSummary, summarize, type Summary } from '../lib/stats.js';
import type { Metric, Scenario, ScenarioContext, ScenarioResult } from '../lib/types.js';
import { assertPidFileDead, hasRoles, waitFor, withDeadline } from '../lib/wait.js';

interface FixtureKind {
  id: 'hang' | 'wrapper';
  flags: readonly string[];
  /** Roles that must be in the pid file before the tree counts as up. */
  roles: readonly string[];
}

const HANG: FixtureKind = { id: 'hang', flags: ['--hang-initialize'], roles: ['server'] };
const WRAPPER: FixtureKind = { id: 'wrapper', flags: ['--hang-initialize', '--wrapper'], roles: ['wrapper', 'shell', 'sleeper', 'server'] };

/** Grace of the hard-rung coordinator: short, so the sample is dominated by the hard rungs. */
const HARD_GRACE_MS = 50;
/** Targets of the cooperative rung (retire → fully quiesced). */
const COOPERATIVE_P50_TARGET_MS = 50;
const COOPERATIVE_P99_TARGET_MS = 300;
const KEY = 'bench-quiesce';
const SPIN_WORKER = new URL('../lib/spin-worker.js', import.meta.url);

function profileServers(name: string, config: ReturnType<typeof stdioFixtureConfig>): ServerConfig[] {
  return Object.values(parseProfileConfig({ mcpServers: { [name]: config } }, { profile: KEY }).servers);
}

/**
 * True when no member of the group is running. `kill(-pgid, 0)` failing (ESRCH) settles it
 * without a /proc scan, as the library's transport does; members left as zombies make it succeed,
 * and then only a scan can tell.
 */
function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return true;
  }
  return pidsInGroup(pgid).length === 0;
}

/** Bare cost: spawn the fixture detached, wait until it is up, time kill(-pgid) → group gone. */
async function baseKillSample(context: ScenarioContext, fixture: FixtureKind, index: number): Promise<number> {
  const pidFile = join(context.tmpDir, `base-kill-${fixture.id}-${index}.pids`);
  const proc = await startStdioFixture([...fixture.flags, '--pid-file', pidFile], { tag: context.tag });
  try {
    await waitFor(`the ${fixture.id} fixture tree (baseline) to be up`, () => hasRoles(pidFile, fixture.roles) || proc.child.exitCode !== null);
    if (proc.child.exitCode !== null) throw new Error(`baseline ${fixture.id} fixture exited early (${proc.child.exitCode}): ${proc.stderr()}`);
    const started = performance.now();
    process.kill(-proc.pgid, 'SIGKILL');
    await proc.exited;
    await waitFor(`process group ${proc.pgid} to empty`, () => groupGone(proc.pgid), { intervalMs: 1 });
    const elapsed = performance.now() - started;
    assertPidFileDead(pidFile, `baseline ${fixture.id}`);
    return elapsed;
  } finally {
    await proc.stop();
  }
}

/** Bare cost of ending a stuck worker thread: terminate() → exit. */
async function baseTerminateSample(): Promise<number> {
  const worker = new Worker(SPIN_WORKER);
  try {
    await withDeadline('the spinning baseline worker to start', once(worker, 'message'), 10_000);
    const exited = once(worker, 'exit');
    const started = performance.now();
    await worker.terminate();
    await exited;
    return performance.now() - started;
  } finally {
    await worker.terminate();
  }
}

interface LadderSample {
  ms: number;
  report: QuiesceReport;
}

/** Starts a body with one server, waits until its child is recorded and up, and times quiesce(). */
async function ladderSample(
  context: ScenarioContext,
  coordinator: DiscoveryCoordinator,
  fixture: FixtureKind,
  label: string,
  index: number,
  hooks: BodyTestHooks | undefined,
): Promise<LadderSample> {
  const pidFile = join(context.tmpDir, `${label}-${fixture.id}-${index}.pids`);
  const servers = profileServers(fixture.id, stdioFixtureConfig([...fixture.flags, '--pid-file', pidFile], { tag: context.tag }));
  const accepted: string[] = [];
  coordinator.start(KEY, servers, { onOutcome: (outcome) => accepted.push(outcome.server), onDone: () => undefined }, hooks);
  await waitFor(`the ${label} body to record its child pid`, () => coordinator.stats().recordedChildren === 1);
  await waitFor(`the ${fixture.id} fixture tree (${label}) to be up`, () => hasRoles(pidFile, fixture.roles));
  const started = performance.now();
  const report = await coordinator.quiesce(KEY, 'bench');
  const ms = performance.now() - started;
  if (!report.quiesced || report.survivors.length > 0) throw new Error(`${label}/${fixture.id}: not quiesced: ${JSON.stringify(report)}`);
  if (coordinator.liveOwners(KEY) !== 0) throw new Error(`${label}/${fixture.id}: a live owner remains after quiesce`);
  if (accepted.length > 0) throw new Error(`${label}/${fixture.id}: outcomes were accepted from a hung server: ${accepted.join(', ')}`);
  assertPidFileDead(pidFile, `${label}/${fixture.id}`);
  return { ms, report };
}

function rungCounts(samples: readonly LadderSample[]): Record<QuiesceRung, number> {
  const counts: Record<QuiesceRung, number> = { idle: 0, cooperative: 0, terminate: 0, kill: 0 };
  for (const { report } of samples) counts[report.rung]++;
  return counts;
}

function percentileRows(
  name: string,
  value: Summary,
  baseline: Summary | undefined,
  baselineLabel: string,
  targets: { p50?: number; p99?: number } = {},
): Metric[] {
  return (['p50', 'p99'] as const).map((stat) => {
    const metric: Metric = { name: `${name} ${stat}`, unit: 'ms', value: round2(value[stat]), samples: value.n };
    if (baseline !== undefined) metric.baseline = { label: `${baselineLabel} ${stat}`, value: round2(baseline[stat]) };
    const limit = targets[stat];
    if (limit !== undefined) metric.target = { of: 'value', op: '<=', limit };
    return metric;
  });
}

/** Retire → fully-quiesced latency of the cooperative and the hard rungs of the ladder. */
export const quiesceScenario: Scenario = {
  name: 'quiesce',
  description: 'retire → fully quiesced (worker done, process groups gone), cooperative and hard rungs, vs bare kill(-pgid) and Worker.terminate()',
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const rounds = context.samples(40, 5);
    // Default grace (250 ms): the cooperative rung is what production gets.
    const cooperative = new DiscoveryCoordinator({ maxThreads: 1, connectTimeoutMs: 600_000 });
    const hard = new DiscoveryCoordinator({ maxThreads: 1, connectTimeoutMs: 600_000, quiesceGraceMs: HARD_GRACE_MS });
    const series = {
      baseKillHang: [] as number[],
      baseKillWrapper: [] as number[],
      baseTerminate: [] as number[],
      cooperativeHang: [] as LadderSample[],
      cooperativeWrapper: [] as LadderSample[],
      hardWrapper: [] as LadderSample[],
    };
    try {
      for (let round = 0; round < rounds; round++) {
        series.baseKillHang.push(await baseKillSample(context, HANG, round));
        series.cooperativeHang.push(await ladderSample(context, cooperative, HANG, 'cooperative', round, undefined));
        series.baseKillWrapper.push(await baseKillSample(context, WRAPPER, round));
        series.cooperativeWrapper.push(await ladderSample(context, cooperative, WRAPPER, 'cooperative', round, undefined));
        series.baseTerminate.push(await baseTerminateSample());
        series.hardWrapper.push(await ladderSample(context, hard, WRAPPER, 'hard', round, { blockAfterSpawnMs: -1 }));
        if ((round + 1) % 10 === 0 || round + 1 === rounds) context.log(`round ${round + 1}/${rounds}`);
      }
    } finally {
      await Promise.all([cooperative.close(), hard.close()]);
    }

    const killHang = summarize(series.baseKillHang);
    const killWrapper = summarize(series.baseKillWrapper);
    const terminate = summarize(series.baseTerminate);
    const coopHang = summarize(series.cooperativeHang.map((sample) => sample.ms));
    const coopWrapper = summarize(series.cooperativeWrapper.map((sample) => sample.ms));
    const hardReports = series.hardWrapper.map((sample) => sample.report);
    for (const report of hardReports) {
      if (report.rung !== 'kill' || report.terminateMs === undefined || report.killMs === undefined) {
        throw new Error(`hard/wrapper: expected the terminate and kill rungs, got ${JSON.stringify(report)}`);
      }
    }
    const hardTotal = summarize(series.hardWrapper.map((sample) => sample.ms));
    const hardTerminate = summarize(hardReports.map((report) => report.terminateMs ?? Number.NaN));
    const hardKill = summarize(hardReports.map((report) => report.killMs ?? Number.NaN));
    // The floor of the whole hard ladder: the grace it must wait, plus the two bare costs.
    const ladderFloor: Summary = {
      ...killWrapper,
      p50: HARD_GRACE_MS + terminate.p50 + killWrapper.p50,
      p99: HARD_GRACE_MS + terminate.p99 + killWrapper.p99,
    };
    const escalated = [...series.cooperativeHang, ...series.cooperativeWrapper].filter((sample) => sample.report.rung !== 'cooperative').length;

    const metrics: Metric[] = [
      ...percentileRows('cooperative/hang', coopHang, killHang, 'kill(-pgid) hang', { p50: COOPERATIVE_P50_TARGET_MS, p99: COOPERATIVE_P99_TARGET_MS }),
      ...percentileRows('cooperative/wrapper', coopWrapper, killWrapper, 'kill(-pgid) wrapper', { p50: COOPERATIVE_P50_TARGET_MS, p99: COOPERATIVE_P99_TARGET_MS }),
      ...percentileRows('hard/wrapper total', hardTotal, ladderFloor, `grace ${HARD_GRACE_MS}+terminate+kill`),
      ...percentileRows('hard/wrapper terminate rung', hardTerminate, terminate, 'Worker.terminate()'),
      ...percentileRows('hard/wrapper kill rung', hardKill, killWrapper, 'kill(-pgid) wrapper'),
      { name: 'cooperative samples escalated', unit: 'count', value: escalated, samples: coopHang.n + coopWrapper.n, target: { of: 'value', op: '<=', limit: 0 } },
    ];
    return {
      metrics,
      notes: [
        'quiesce: value = retire (coordinator.quiesce) → fully quiesced, timed by the caller. Baselines, interleaved sample by sample:',
        '  kill(-pgid) <fixture>: spawn the same fixture detached, wait until its tree is up, time SIGKILL to the group → leader exit + no member running.',
        '  Worker.terminate(): terminate → exit of a bare worker thread that loaded the body modules and spins synchronously.',
        `  grace+terminate+kill: the floor of the hard ladder = quiesceGraceMs (${HARD_GRACE_MS}) + terminate baseline + kill baseline (per percentile).`,
        '  p99 is nearest-rank: with fewer than 100 samples it is the maximum.',
      ],
      details: {
        rounds,
        hardGraceMs: HARD_GRACE_MS,
        cooperativeGraceMs: cooperative.options.quiesceGraceMs,
        summaries: {
          baseKillHang: roundSummary(killHang),
          baseKillWrapper: roundSummary(killWrapper),
          baseTerminate: roundSummary(terminate),
          cooperativeHang: roundSummary(coopHang),
          cooperativeWrapper: roundSummary(coopWrapper),
          hardWrapperTotal: roundSummary(hardTotal),
          hardWrapperCooperativeRung: roundSummary(summarize(hardReports.map((report) => report.cooperativeMs ?? Number.NaN))),
          hardWrapperTerminateRung: roundSummary(hardTerminate),
          hardWrapperKillRung: roundSummary(hardKill),
        },
        rungs: {
          cooperativeHang: rungCounts(series.cooperativeHang),
          cooperativeWrapper: rungCounts(series.cooperativeWrapper),
          hardWrapper: rungCounts(series.hardWrapper),
        },
        zombiesLeftByHardRung: hardReports.reduce((sum, report) => sum + report.zombies.length, 0),
        samplesMs: {
          baseKillHang: series.baseKillHang.map(round2),
          baseKillWrapper: series.baseKillWrapper.map(round2),
          baseTerminate: series.baseTerminate.map(round2),
          cooperativeHang: series.cooperativeHang.map((sample) => round2(sample.ms)),
          cooperativeWrapper: series.cooperativeWrapper.map((sample) => round2(sample.ms)),
          hardWrapper: series.hardWrapper.map((sample) => round2(sample.ms)),
        },
      },
    };
  },
};
