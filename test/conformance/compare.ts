/**
 * `npm run conformance`: the official MCP conformance client suites, each run against a bare SDK
 * baseline and against mcp-supervisor (./client.ts, the public API), printed side by side:
 * - @modelcontextprotocol/conformance 0.1.16 (2025 era): bare SDK v1 (./sdk-client.ts) and bare SDK
 *   v2 (./sdk-v2-client.ts, legacy era: the SDK the library is built on) vs ours;
 * - the 0.2.0 pre-release (`conformance-next`) at `--spec-version 2026-07-28`: bare SDK v2
 *   (./sdk-v2-client.ts, era negotiated automatically) vs ours.
 * `npm test` runs the mcp-supervisor halves (conformance.test.ts).
 *
 * A cell reads `pass`, `pass*` (every check passed but the CLI's own verdict is FAILED: the client
 * exited non-zero or timed out) or `FAIL (<failing check ids>)`. `--only=2025` / `--only=2026`
 * runs one of the two comparisons.
 */
import { fileURLToPath } from 'node:url';
import { conformanceCliVersion, listClientScenarios, runConformanceSuite, type CliSelection, type ScenarioResult } from './suite.js';

const file = (name: string): string => fileURLToPath(new URL(name, import.meta.url));
const command = (path: string): string => `"${process.execPath}" "${path}"`;

interface Comparison {
  title: string;
  selection: CliSelection;
  clients: Record<string, string>;
  /** Scenarios a baseline program does not implement (shown `n/a`, not run). */
  notImplemented?: Record<string, readonly string[]>;
}

const comparisons: Record<'2025' | '2026', Comparison> = {
  '2025': {
    title: `@modelcontextprotocol/conformance ${conformanceCliVersion('current')}, every client scenario`,
    selection: { cli: 'current' },
    clients: { 'bare SDK v1': file('./sdk-client.js'), 'bare SDK v2': file('./sdk-v2-client.js'), 'mcp-supervisor': file('./client.js') },
    // The SEP-990 token exchange is the program's own code in the v1 baseline and in ours; the v2
    // baseline was written for the 2026-07-28 scenarios and does not carry a copy of it.
    notImplemented: { 'bare SDK v2': ['auth/cross-app-access-complete-flow'] },
  },
  '2026': {
    title: `@modelcontextprotocol/conformance ${conformanceCliVersion('next')} --spec-version 2026-07-28`,
    selection: { cli: 'next', specVersion: '2026-07-28' },
    clients: { 'bare SDK v2': file('./sdk-v2-client.js'), 'mcp-supervisor': file('./client.js') },
  },
};

const only = process.argv.find((arg) => arg.startsWith('--only='))?.slice('--only='.length);
if (only !== undefined && !(only in comparisons)) throw new Error(`--only takes 2025 or 2026, got ${only}`);

const mark = (result: ScenarioResult | undefined, skipped: boolean): string => {
  if (skipped) return 'n/a';
  if (!result) return 'missing';
  if (!result.passed) return `FAIL (${[...new Set(result.failures.map((check) => check.id))].join(', ') || 'no checks'})`;
  return result.cliVerdict === 'PASSED' ? 'pass' : 'pass*';
};

async function compare({ title, selection, clients, notImplemented = {} }: Comparison): Promise<boolean> {
  process.stdout.write(`\n${title}\n`);
  const scenarios = await listClientScenarios(selection);
  const results = new Map<string, ScenarioResult[]>();
  for (const [name, path] of Object.entries(clients)) {
    const started = performance.now();
    const skipped = notImplemented[name] ?? [];
    results.set(name, await runConformanceSuite({ ...selection, clientCommand: command(path), scenarios: scenarios.filter((scenario) => !skipped.includes(scenario)) }));
    process.stderr.write(`${name}: ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  }
  const names = [...results.keys()];
  const width = Math.max(...scenarios.map((scenario) => scenario.length));
  process.stdout.write(`${'scenario'.padEnd(width)}  ${names.map((name) => name.padEnd(16)).join('')}\n`);
  for (const scenario of scenarios) {
    const row = names.map((name) => mark(results.get(name)!.find((result) => result.scenario === scenario), (notImplemented[name] ?? []).includes(scenario)).padEnd(16));
    process.stdout.write(`${scenario.padEnd(width)}  ${row.join('')}\n`);
  }
  const totals = names.map((name) => {
    const ran = results.get(name)!;
    const skipped = scenarios.length - ran.length;
    return `${name}: ${ran.filter((result) => result.passed).length}/${ran.length}${skipped > 0 ? ` (${skipped} n/a)` : ''}`;
  });
  process.stdout.write(`${totals.join('   ')}\n`);
  return names.every((name) => results.get(name)!.every((result) => result.passed));
}

let ok = true;
for (const [key, comparison] of Object.entries(comparisons)) {
  if (only === undefined || only === key) ok = (await compare(comparison)) && ok;
}
// Exit 1 when any client failed a scenario: a report, not a verdict on the library (npm test is).
process.exitCode = ok ? 0 : 1;
