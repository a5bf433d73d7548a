/**
 * The official MCP conformance client suite (@modelcontextprotocol/conformance 0.1.16, every
 * client scenario it lists) run against mcp-supervisor through its public API (./client.ts), and
 * the proof that the harness (./suite.ts) reports a broken client: the same program with its
 * elicitation handler left out fails the elicitation scenario.
 *
 * The bare-SDK stand-in (./sdk-client.ts) is the baseline: `npm run conformance` runs both side by
 * side. It is not part of `npm test`, which checks the library.
 */
import test from 'ava';
import { fileURLToPath } from 'node:url';
import { listClientScenarios, runConformanceSuite, type ScenarioResult } from './suite.js';

const SUPERVISOR_CLIENT = fileURLToPath(new URL('./client.js', import.meta.url));
/** The CLI splits the command on spaces and runs it through a shell, so quoted paths survive. */
const clientCommand = `"${process.execPath}" "${SUPERVISOR_CLIENT}"`;

function describe(results: ScenarioResult[]): string {
  return results
    .filter((result) => !result.passed)
    .map((result) => {
      const why = result.failures.length > 0 ? result.failures : result.checks;
      const lines = why.map((check) => `    ${check.status} ${check.id}: ${check.errorMessage ?? check.description ?? ''}`);
      return `${result.scenario}:\n${lines.join('\n')}\n    output tail:\n${result.output.slice(-1500)}`;
    })
    .join('\n');
}

test.serial('the installed suite lists the 26 client scenarios', async (t) => {
  const scenarios = await listClientScenarios();
  t.is(scenarios.length, 26, scenarios.join(', '));
  for (const name of ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry', 'auth/metadata-default', 'auth/cross-app-access-complete-flow']) {
    t.true(scenarios.includes(name), name);
  }
});

test.serial('mcp-supervisor passes every client scenario through its public API', async (t) => {
  t.timeout(300_000);
  const results = await runConformanceSuite({ clientCommand });
  t.is(results.length, 26);
  const failed = results.filter((result) => !result.passed);
  t.deepEqual(
    failed.map((result) => result.scenario),
    [],
    describe(failed),
  );
  t.log(`passed: ${results.filter((result) => result.passed).length}/${results.length}`);
});

test.serial('a client that declares no elicitation capability fails the elicitation scenario', async (t) => {
  t.timeout(120_000);
  const [result] = await runConformanceSuite({
    clientCommand,
    scenarios: ['elicitation-sep1034-client-defaults'],
    env: { CONFORMANCE_CLIENT_BREAK: 'no-elicitation' },
  });
  t.truthy(result);
  t.is(result!.scenario, 'elicitation-sep1034-client-defaults');
  t.false(result!.passed);
  t.true(result!.failures.some((check) => check.status === 'FAILURE' && check.id.startsWith('client-elicitation-sep1034')), describe([result!]));
});

test.serial('a client that never connects is not reported as passing', async (t) => {
  t.timeout(120_000);
  // `initialize` records nothing at all when no initialize request arrives: an empty check list
  // must not count as a pass.
  const [result] = await runConformanceSuite({ clientCommand: 'true', scenarios: ['initialize'] });
  t.false(result!.passed);
});
