/**
 * The official MCP conformance client suite run against mcp-supervisor through its public API
 * (./client.ts):
 * - @modelcontextprotocol/conformance 0.1.16, every client scenario it lists (the 2025 era);
 * - the 0.2.0 pre-release (`conformance-next`), every client scenario it lists at
 *   `--spec-version 2026-07-28` (the stateless era: `server/discover`, the `_meta` envelope,
 *   `input_required`, header mirroring, RFC 9207 `iss`…), and every one it lists at 2025-11-25
 *   and at 2025-03-26. Those runs also hold the client process to the CLI's own verdict: a
 *   scenario whose checks all pass but whose client crashed fails here.
 * And the proof that the harness (./suite.ts) reports a broken client: the same program with its
 * elicitation handler left out fails the elicitation scenario.
 *
 * The bare-SDK stand-ins (./sdk-client.ts, v1, for 0.1.16; ./sdk-v2-client.ts, v2, for
 * 2026-07-28) are the baselines: `npm run conformance` runs them side by side with ours. They are
 * not part of `npm test`, which checks the library.
 */
import test from 'ava';
import { fileURLToPath } from 'node:url';
import { conformanceCliVersion, listClientScenarios, runConformanceSuite, type ScenarioResult } from './suite.js';

/** The spec version the 0.2.0 run is held to. */
const MODERN = '2026-07-28';

const SUPERVISOR_CLIENT = fileURLToPath(new URL('./client.js', import.meta.url));
/** The CLI splits the command on spaces and runs it through a shell, so quoted paths survive. */
const clientCommand = `"${process.execPath}" "${SUPERVISOR_CLIENT}"`;

function describe(results: ScenarioResult[]): string {
  return results
    .filter((result) => !result.passed)
    .map((result) => {
      const why = result.failures.length > 0 ? result.failures : result.checks;
      const lines = why.map((check) => `    ${check.status} ${check.id}: ${check.errorMessage ?? check.description ?? ''}`);
      const stderr = result.clientStderr.trim() ? `\n    client stderr (tail):\n${result.clientStderr.trim().slice(-800)}` : '';
      return `${result.scenario}:\n${lines.join('\n')}${stderr}\n    output tail:\n${result.output.slice(-1500)}`;
    })
    .join('\n');
}

/** Passed by its checks and by the CLI's own verdict (which also fails a client that crashed or hung). */
const fullyPassed = (result: ScenarioResult): boolean => result.passed && result.cliVerdict === 'PASSED';

/**
 * One paragraph per scenario that did not fully pass: its failing checks (name and message), what
 * became of the client process, and the tail of the client's stderr (where the library's error is).
 */
function describeStrict(results: ScenarioResult[]): string {
  const failed = results.filter((result) => !fullyPassed(result));
  const paragraphs = failed.map((result) => {
    const lines = result.failures.map((check) => `    ${check.status} ${check.id} (${check.name}): ${(check.errorMessage ?? check.description ?? '').slice(0, 300)}`);
    if (lines.length === 0 && !result.passed) lines.push('    no SUCCESS check at all (the client never got far enough)');
    const ending = result.clientError ? `client ${result.clientError}` : 'client exited 0';
    lines.push(`    CLI verdict: ${result.cliVerdict ?? 'none'}; ${ending}`);
    const stderr = result.clientStderr.trim();
    if (stderr) lines.push(`    client stderr (tail):\n${stderr.slice(-800).replace(/^/gm, '      ')}`);
    return `${result.scenario}:\n${lines.join('\n')}`;
  });
  return `${failed.length}/${results.length} scenarios failed:\n${paragraphs.join('\n')}`;
}

test.serial('the installed suite lists the 26 client scenarios', async (t) => {
  const scenarios = await listClientScenarios();
  t.is(scenarios.length, 26, scenarios.join(', '));
  for (const name of ['initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry', 'auth/metadata-default', 'auth/cross-app-access-complete-flow']) {
    t.true(scenarios.includes(name), name);
  }
});

/**
 * A defect of the 0.1.16 harness, fixed in 0.2.0: its authorization server serves metadata whose
 * `issuer` is not the URL it was fetched for. RFC 8414 §3.3 says a client MUST refuse such metadata,
 * and the v2 SDK (ours, and the bare v2 client alike) does; the bare v1 client did not check. The
 * 0.2.0 version of the scenario (tagged 2025-03-26) is run below and must pass.
 */
const HARNESS_DEFECT_0_1_16 = 'auth/2025-03-26-oauth-metadata-backcompat';

test.serial('mcp-supervisor passes every client scenario through its public API', async (t) => {
  t.timeout(300_000);
  const results = await runConformanceSuite({ clientCommand });
  t.is(results.length, 26);
  const failed = results.filter((result) => !result.passed && result.scenario !== HARNESS_DEFECT_0_1_16);
  t.deepEqual(
    failed.map((result) => result.scenario),
    [],
    describe(failed),
  );
  // The one exception fails for the harness's reason only: the metadata's issuer, refused.
  const defect = results.find((result) => result.scenario === HARNESS_DEFECT_0_1_16);
  if (defect && !defect.passed) t.regex(defect.clientStderr, /Issuer mismatch in authorization server metadata \(RFC 8414/, describe([defect]));
  t.log(`passed: ${results.filter((result) => result.passed).length}/${results.length}${defect?.passed ? '' : ` (${HARNESS_DEFECT_0_1_16}: the harness's issuer mismatch, refused per RFC 8414)`}`);
});

test.serial('the 2025-03-26 scenarios of the 0.2.0 CLI, where the metadata back-compat scenario is fixed, pass through the public API', async (t) => {
  t.timeout(120_000);
  const scenarios = await listClientScenarios({ cli: 'next', specVersion: '2025-03-26' });
  t.true(scenarios.includes(HARNESS_DEFECT_0_1_16), scenarios.join(', '));
  const results = await runConformanceSuite({ clientCommand, cli: 'next', specVersion: '2025-03-26', scenarios });
  t.deepEqual(
    results.filter((result) => !fullyPassed(result)).map((result) => result.scenario),
    [],
    describeStrict(results),
  );
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

test.serial(`the 0.2.0 CLI lists the ${MODERN} client scenarios`, async (t) => {
  const scenarios = await listClientScenarios({ cli: 'next', specVersion: MODERN });
  t.log(`@modelcontextprotocol/conformance ${conformanceCliVersion('next')}: ${scenarios.length} client scenarios at ${MODERN}`);
  for (const name of [
    'tools_call',
    'request-metadata',
    'sep-2322-client-request-state',
    'http-standard-headers',
    'http-custom-headers',
    'http-invalid-tool-headers',
    'json-schema-ref-no-deref',
    'json-schema-2020-12-preservation',
    'auth/metadata-default',
    'auth/authorization-server-migration',
    'auth/iss-supported',
    'auth/iss-wrong-issuer',
  ]) {
    t.true(scenarios.includes(name), name);
  }
  // Retired at 2026-07-28 (the initialize handshake, server-to-client requests, SSE resumption).
  for (const name of ['initialize', 'elicitation-sep1034-client-defaults', 'sse-retry']) t.false(scenarios.includes(name), name);
});

for (const specVersion of [MODERN, '2025-11-25']) {
  test.serial(`mcp-supervisor passes every ${specVersion} client scenario of the 0.2.0 CLI through its public API`, async (t) => {
    t.timeout(600_000);
    const scenarios = await listClientScenarios({ cli: 'next', specVersion });
    const started = performance.now();
    const results = await runConformanceSuite({ clientCommand, cli: 'next', specVersion, scenarios });
    t.log(`${results.filter(fullyPassed).length}/${results.length} passed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    t.is(results.length, scenarios.length);
    t.deepEqual(
      results.filter((result) => !fullyPassed(result)).map((result) => result.scenario),
      [],
      describeStrict(results),
    );
  });
}
