/**
 * `mcp-supervisor demo` (what `npm start` runs): the bundled example profiles go through the
 * library as a host would use them, and every step checks what the library promises:
 *
 *   1. discovery of two profiles (healthy, slow, crashing, hanging, refused servers) → the table,
 *      each broken server reported with the right failure kind;
 *   2. a turn and a tool call;
 *   3. a healthy server SIGKILLed → the next call succeeds through exactly one respawn;
 *   4. a discovery stuck on the hanging server is retired by a reload, its process gone;
 *   5. close() → no example process left.
 *
 * It exits 0 when every step matched, 1 with the failed expectations otherwise.
 */
import { loadProfileFile } from '../config/load.js';
import type { ProfileConfig } from '../config/types.js';
import { isMcpSupervisorError } from '../errors.js';
import { createHost } from '../host.js';
import { processState } from '../process/proc.js';
import { collect, type Output } from './doctor.js';
import { EXAMPLE_PROFILES, exampleEnvironment } from './examples.js';
import { renderTable } from './report.js';
import { readFileSync, readdirSync } from 'node:fs';

/** Processes whose environment carries `MCP_FIXTURE_TAG=tag` (and whose cmdline matches). */
function taggedProcesses(tag: string, cmdlineIncludes = ''): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`MCP_FIXTURE_TAG=${tag}`)) continue;
      if (cmdlineIncludes && !readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(cmdlineIncludes)) continue;
      if (processState(pid) === 'alive') found.push(pid);
    } catch {
      // Gone while we looked, or not ours to read.
    }
  }
  return found;
}

/** Expected state of each example server. */
const EXPECTED: Record<string, { status: string; kind?: string }> = {
  'team/notes': { status: 'ready' },
  'team/search': { status: 'ready' },
  'team/crashy': { status: 'failed', kind: 'exited' },
  'ops/metrics': { status: 'ready' },
  'ops/legacy': { status: 'failed', kind: 'timeout' },
  'ops/remote': { status: 'failed', kind: 'refused' },
};

/** Runs the demo; returns the exit code. (A linear script of the steps it shows, kept in one place on purpose.) */
export async function runDemo(output: Output): Promise<number> {
  const tag = `mcp-supervisor-demo-${process.pid}-${Date.now()}`;
  const env = await exampleEnvironment(tag);
  const configs = new Map<string, ProfileConfig>();
  for (const [name, file] of Object.entries(EXAMPLE_PROFILES)) configs.set(name, await loadProfileFile(file, { profile: name, env }));
  const problems: string[] = [];
  const expect = (ok: boolean, what: string): void => {
    if (!ok) problems.push(what);
  };
  let stepStart = performance.now();
  const step = (title: string, detail: string): void => {
    output.out(`\n[${title}] ${detail} (${Math.round(performance.now() - stepStart)} ms)\n`);
    stepStart = performance.now();
  };

  const host = createHost({ profiles: Object.fromEntries(configs), env, sessions: { respawnWaitMs: 10_000 } });
  const retired: string[] = [];
  host.on('discovery:retired', (event) => retired.push(`${event.key} generation ${event.generation} retired (${event.reason}) by the ${event.rung} rung in ${event.quiesceMs} ms`));
  try {
    // 1. Discovery and the doctor table.
    output.out('mcp-supervisor demo: two example profiles, discovered in worker threads\n');
    host.start();
    const report = await collect(host, [...configs.keys()], configs);
    output.out(`${renderTable(report.rows)}\n`);
    for (const row of report.rows) {
      const expected = EXPECTED[`${row.profile}/${row.server}`];
      expect(expected !== undefined && row.status === expected.status && (expected.kind === undefined || row.kind === expected.kind), `${row.profile}/${row.server} is ${row.status}${row.kind ? ` (${row.kind})` : ''}, expected ${JSON.stringify(expected)}`);
    }
    step('discover', 'both profiles settled; broken servers are reported with their failure kind, none as a generic timeout');

    // 2. A turn and a tool call.
    const turn = await host.beginTurn('team');
    const echo = await turn.callTool('mcp__notes__echo', { text: 'hello from a turn' });
    const echoed = echo.content[0]?.type === 'text' ? echo.content[0].text : '';
    expect(echoed === 'hello from a turn', `echo returned ${JSON.stringify(echo.content)}`);
    step('turn', `beginTurn("team") gave ${turn.tools.length} tools (${turn.failed.map((entry) => `${entry.server}: ${entry.kind}`).join(', ')}); mcp__notes__echo answered "${echoed}"`);

    // 3. SIGKILL a healthy server; the next call goes through one respawn.
    const pidResult = await turn.callTool('mcp__notes__pid', {});
    const pid = Number(JSON.parse(pidResult.content[0]?.type === 'text' ? pidResult.content[0].text : '{}').pid);
    process.kill(pid, 'SIGKILL');
    const respawnsBefore = host.stats().sessions.find((stats) => stats.server === 'notes')?.respawns ?? 0;
    const after = await turn.callTool('mcp__notes__calls', {});
    const respawns = (host.stats().sessions.find((stats) => stats.server === 'notes')?.respawns ?? 0) - respawnsBefore;
    expect(after.isError !== true && respawns === 1, `after SIGKILL: result ${JSON.stringify(after.content)}, respawns ${respawns}`);
    expect(processState(pid) !== 'alive', `the killed server ${pid} is still running`);
    step('respawn', `notes (pid ${pid}) was SIGKILLed; the next call succeeded through ${respawns} respawn: ${after.content[0]?.type === 'text' ? after.content[0].text : ''}`);

    // 4. A discovery stuck on the hanging server, retired by a reload.
    void host.retry('ops').catch(() => undefined);
    let hanging: number[] = [];
    for (let attempt = 0; attempt < 400 && hanging.length === 0; attempt++) {
      hanging = taggedProcesses(tag, '--hang-initialize');
      if (hanging.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(hanging.length > 0, 'the hanging server never started');
    const reload = await host.reload('ops');
    const stillHanging = hanging.filter((hangingPid) => processState(hangingPid) === 'alive');
    expect(stillHanging.length === 0, `hanging server processes survived the reload: ${stillHanging.join(', ')}`);
    expect(retired.some((line) => line.startsWith('ops')), 'no retirement of the ops discovery was reported');
    const change = reload.changes[0];
    step('reload', `${retired.at(-1) ?? 'no retirement'}; hanging pid(s) ${hanging.join(', ')} gone; reload of ops: ${change?.unchanged.length ?? 0} unchanged servers, rediscovering`);
    const opsAgain = await host.ready('ops');
    expect(opsAgain.servers['metrics']?.status === 'ready', `ops/metrics after reload: ${opsAgain.servers['metrics']?.status}`);
    step('rediscover', `ops settled again as ${opsAgain.status} (metrics ready, legacy ${opsAgain.servers['legacy']?.status})`);
  } catch (error) {
    problems.push(`unexpected error: ${isMcpSupervisorError(error) ? `${error.code}: ${error.message}` : String(error)}`);
  } finally {
    await host.close();
  }
  const leftovers = taggedProcesses(tag);
  expect(leftovers.length === 0, `processes left after close(): ${leftovers.join(', ')}`);
  step('close', `host closed; example processes still running: ${leftovers.length}`);

  if (problems.length > 0) {
    output.err(`\ndemo FAILED — the library did not do what it promises:\n${problems.map((problem) => `  - ${problem}`).join('\n')}\n`);
    return 1;
  }
  output.out('\ndemo passed: every step matched what mcp-supervisor promises.\n');
  return 0;
}
