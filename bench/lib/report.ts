/**
 * Turns scenario results into the report: ratios and pass/fail per metric, the printed table and
 * the JSON document. Scenarios only measure; every judgement is made here, the same way for all.
 */
import type { MachineInfo } from './machine.js';
import { formatNumber, formatWithUnit, renderTable } from './table.js';
import type { Metric, Target } from './types.js';

/** A metric with its ratio and verdict. */
export interface EvaluatedMetric extends Metric {
  /** `value/baseline` or `baseline/value` (see `Metric.ratio`); absent without a baseline or when either is 0. */
  ratioValue?: number;
  /** `pass`/`fail` against the target; `info` when there is none. */
  verdict: 'pass' | 'fail' | 'info';
}

/** One scenario in the report. */
export interface ScenarioReport {
  name: string;
  description: string;
  status: 'ok' | 'error';
  durationMs: number;
  /** Why the scenario errored (a thrown error, or processes that outlived it). */
  errors: string[];
  metrics: EvaluatedMetric[];
  notes: string[];
  details: Record<string, unknown>;
}

/** The JSON document written to `bench/results/`. */
export interface BenchReport {
  schema: 1;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  options: { quick: boolean; only: string[] | null; strict: boolean };
  machine: MachineInfo;
  loadAverageAtEnd: number[];
  scenarios: ScenarioReport[];
  summary: { scenarios: number; errored: number; targets: number; passed: number; failed: number };
}

function holds(target: Target, actual: number): boolean {
  return target.op === '<=' ? actual <= target.limit : actual >= target.limit;
}

/** Computes the ratio and the verdict of one metric. A NaN value or ratio fails its target. */
export function evaluate(metric: Metric): EvaluatedMetric {
  const evaluated: EvaluatedMetric = { ...metric, verdict: 'info' };
  if (metric.baseline !== undefined) {
    const { value: base } = metric.baseline;
    const ratio = (metric.ratio ?? 'value/baseline') === 'value/baseline' ? metric.value / base : base / metric.value;
    // A zero value or baseline gives no meaningful ratio (JSON cannot hold Infinity either).
    if (Number.isFinite(ratio)) evaluated.ratioValue = Math.round(ratio * 1000) / 1000;
  }
  if (metric.target !== undefined) {
    const actual = metric.target.of === 'value' ? metric.value : (evaluated.ratioValue ?? Number.NaN);
    evaluated.verdict = Number.isFinite(actual) && holds(metric.target, actual) ? 'pass' : 'fail';
  }
  return evaluated;
}

function targetText(metric: Metric): string {
  const target = metric.target;
  if (target === undefined) return '';
  return target.of === 'value' ? `${target.op} ${formatWithUnit(target.limit, metric.unit)}` : `ratio ${target.op} ${formatNumber(target.limit)}x`;
}

/** The table printed to stdout, followed by the scenarios' notes. */
export function renderReport(report: BenchReport): string {
  const rows: string[][] = [];
  for (const scenario of report.scenarios) {
    for (const metric of scenario.metrics) {
      const baseline = metric.baseline === undefined ? '' : `${formatWithUnit(metric.baseline.value, metric.unit)} (${metric.baseline.label})`;
      const ratio = metric.ratioValue === undefined ? (metric.baseline === undefined ? '' : 'n/a') : `${formatNumber(metric.ratioValue)}x${metric.ratio === 'baseline/value' ? ' (b/v)' : ''}`;
      rows.push([
        scenario.name,
        metric.name,
        formatWithUnit(metric.value, metric.unit),
        metric.samples === undefined ? '' : String(metric.samples),
        baseline,
        ratio,
        targetText(metric),
        metric.verdict === 'info' ? '-' : metric.verdict.toUpperCase(),
      ]);
    }
    if (scenario.errors.length > 0) rows.push([scenario.name, `errored (${scenario.errors.length}, see below)`, '', '', '', '', '', 'ERROR']);
  }
  const table = renderTable(['scenario', 'metric', 'value', 'n', 'baseline', 'ratio', 'target', 'result'], rows, [
    'left',
    'left',
    'right',
    'right',
    'left',
    'right',
    'left',
    'left',
  ]);
  const { machine, summary } = report;
  const header = [
    `mcp-supervisor bench — ${report.startedAt}${report.options.quick ? ' — QUICK (indicative only)' : ''}`,
    `node ${machine.node}, ${machine.cpus} × ${machine.cpuModel}, ${machine.totalMemoryMB} MB, load ${machine.loadAverage.join(' ')} → ${report.loadAverageAtEnd.join(' ')}` +
      `${machine.git ? `, commit ${machine.git.commit.slice(0, 10)}${machine.git.dirty ? ' (dirty)' : ''}` : ''}`,
    '',
  ];
  const notes = report.scenarios.flatMap((scenario) => scenario.notes);
  const errors = report.scenarios.flatMap((scenario) => scenario.errors.map((error) => `ERROR in ${scenario.name}: ${error.split('\n')[0] ?? ''}`));
  const footer = [
    '',
    'ratio = value / baseline, or baseline / value where marked (b/v); baselines are measured in the same run.',
    ...notes,
    '',
    ...(errors.length > 0 ? ['', ...errors] : []),
    `${summary.scenarios} scenario(s), ${summary.errored} errored; targets: ${summary.passed} passed, ${summary.failed} failed; ${(report.durationMs / 1000).toFixed(1)} s`,
  ];
  return [...header, table, ...footer].join('\n');
}
