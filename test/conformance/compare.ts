/**
 * `npm run conformance`: the official MCP conformance client suite, run in one go against the bare
 * SDK client (./sdk-client.ts, the baseline) and against mcp-supervisor (./client.ts, the public
 * API), printed side by side. `npm test` runs the mcp-supervisor half (conformance.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { runConformanceSuite, type ScenarioResult } from './suite.js';

const clients = {
  'bare SDK': fileURLToPath(new URL('./sdk-client.js', import.meta.url)),
  'mcp-supervisor': fileURLToPath(new URL('./client.js', import.meta.url)),
};

const results = new Map<string, ScenarioResult[]>();
for (const [name, file] of Object.entries(clients)) {
  const started = performance.now();
  results.set(name, await runConformanceSuite({ clientCommand: `"${process.execPath}" "${file}"` }));
  process.stderr.write(`${name}: ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
const names = [...results.keys()];
const scenarios = results.get(names[0]!)!.map((result) => result.scenario);
const width = Math.max(...scenarios.map((scenario) => scenario.length));
const mark = (result: ScenarioResult | undefined): string => (result?.passed ? 'pass' : `FAIL (${result?.failures.map((check) => check.id).join(', ') || 'no checks'})`);
process.stdout.write(`${'scenario'.padEnd(width)}  ${names.map((name) => name.padEnd(16)).join('')}\n`);
for (const scenario of scenarios) {
  const row = names.map((name) => mark(results.get(name)!.find((result) => result.scenario === scenario)).padEnd(16));
  process.stdout.write(`${scenario.padEnd(width)}  ${row.join('')}\n`);
}
const totals = names.map((name) => `${name}: ${results.get(name)!.filter((result) => result.passed).length}/${scenarios.length}`);
process.stdout.write(`\n${totals.join('   ')}\n`);
process.exitCode = names.every((name) => results.get(name)!.every((result) => result.passed)) ? 0 : 1;
