/**
 * The contract between the harness (`bench/run.ts`) and its scenarios.
 *
 * A scenario is a module under `bench/scenarios/` that exports one {@link Scenario}. It measures
 * its figures *and* their baselines in the same run (the machines are shared and noisy, so only
 * ratios travel between runs), and returns them as {@link Metric}s. The harness computes ratios
 * and pass/fail, prints the table, writes the JSON, and checks that nothing tagged with the
 * scenario's fixture tag outlived it.
 */

/** What a scenario gets from the harness. */
export interface ScenarioContext {
  /** `--quick`: a smoke run with few samples; figures are indicative only. */
  readonly quick: boolean;
  /**
   * `MCP_FIXTURE_TAG` value for every fixture process this scenario starts (pass it to
   * `stdioFixtureConfig(flags, { tag })` / `startStdioFixture`). After the scenario the harness
   * fails it loudly if any live process still carries this tag.
   */
  readonly tag: string;
  /** A scratch directory of this scenario (pid files…), removed afterwards. */
  readonly tmpDir: string;
  /** Picks a sample count: `full` normally, `quick` under `--quick`. */
  samples(full: number, quick: number): number;
  /** A progress line on stderr (the table goes to stdout). */
  log(line: string): void;
}

/** `value <= limit` or `value >= limit`, on the metric's value or on its ratio. */
export interface Target {
  of: 'value' | 'ratio';
  op: '<=' | '>=';
  limit: number;
}

/** A baseline measured in the same run. */
export interface Baseline {
  /** Short name shown in the table, e.g. `kill(-pgid) p50`. */
  label: string;
  value: number;
}

/** One row of the table. */
export interface Metric {
  /** e.g. `cooperative/hang p50`. */
  name: string;
  unit: 'ms' | 'µs' | 'count' | 'MB';
  value: number;
  /** How many samples the value summarises (omitted for single-shot figures). */
  samples?: number;
  baseline?: Baseline;
  /**
   * How the ratio is formed. `value/baseline` (default): the overhead of the thing measured over
   * the bare cost. `baseline/value`: how many times smaller the value is than the baseline.
   */
  ratio?: 'value/baseline' | 'baseline/value';
  target?: Target;
}

/** What a scenario returns. */
export interface ScenarioResult {
  metrics: Metric[];
  /** Explanations printed under the table (what each baseline is, caveats). */
  notes?: string[];
  /** Anything else worth keeping in the JSON: raw samples, configuration, counters. */
  details?: Record<string, unknown>;
}

/** A benchmark scenario. Register it in `bench/scenarios/index.ts`. */
export interface Scenario {
  /** Used by `--only`; lowercase, dash-separated. */
  readonly name: string;
  /** One line for `--list` and the JSON. */
  readonly description: string;
  /**
   * How long the harness lets the full run of this scenario take before abandoning it as errored
   * (ms). Default 150 000; `--quick` runs always get the default.
   */
  readonly timeoutMs?: number;
  /**
   * Runs the scenario. Must end every process and worker it started before it resolves or
   * rejects (use `try/finally`); a rejection marks the scenario errored (exit code 1).
   */
  run(context: ScenarioContext): Promise<ScenarioResult>;
}
