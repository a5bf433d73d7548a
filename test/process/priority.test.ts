/**
 * Discovery's CPU priority against the real kernel (`src/process/priority.ts`):
 * - an unprivileged host starting a burst of servers meets the kernel's rate limit on autogroup
 *   writes (one per 100 ms system-wide without CAP_SYS_ADMIN) and still gets every server's
 *   autogroup to its niceness;
 * - a server starved by a busy machine gets normal priority back at its first check and is
 *   discovered, and its timings say how long it waited for a CPU.
 */
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { readFileSync, existsSync } from 'node:fs';
import { availableParallelism, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AutogroupWriter } from '../../src/process/priority.js';
import { stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, pollUntil, waitGone } from '../helpers/processes.js';
import { newHost } from '../sessions/helpers.js';

guardOpenHandles(test);

const PRIORITY_MODULE = fileURLToPath(new URL('../../src/process/priority.js', import.meta.url));
const HAS_AUTOGROUPS = existsSync('/proc/self/autogroup');

/** True when this process holds CAP_SYS_ADMIN (bit 21 of CapEff), which lifts the rate limit. */
function hasSysAdmin(): boolean {
  const hex = /^CapEff:\s+([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return hex !== undefined && (BigInt(`0x${hex}`) & (1n << 21n)) !== 0n;
}

/** Runs in a separate process: a burst of six servers-to-be lowered at once through the real writer. */
const BURST_PROGRAM = `
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
const { lowerProcessPriority, autogroups } = await import(process.argv[1]);
const kids = Array.from({ length: 6 }, () => spawn('sleep', ['60'], { detached: true, stdio: 'ignore' }));
try {
  for (const kid of kids) lowerProcessPriority(kid.pid, 19);
  const atOnce = autogroups.stats();
  while (autogroups.stats().queued > 0) await new Promise((resolve) => setTimeout(resolve, 20));
  const nice = kids.map((kid) => Number(/nice (-?\\d+)/.exec(readFileSync('/proc/' + kid.pid + '/autogroup', 'utf8'))[1]));
  console.log(JSON.stringify({ uid: process.getuid(), atOnce, final: autogroups.stats(), nice }));
} finally {
  for (const kid of kids) process.kill(-kid.pid, 'SIGKILL');
}
`;

test.serial('an unprivileged burst meets the kernel\'s rate limit on autogroup writes and still gets every autogroup to its niceness', async (t) => {
  if (!HAS_AUTOGROUPS) {
    t.log('this kernel has no scheduler autogroups: nothing to rate-limit');
    t.pass();
    return;
  }
  const root = process.getuid?.() === 0;
  // As root, the program runs as nobody; otherwise as ourselves, unprivileged unless we hold CAP_SYS_ADMIN.
  const unprivileged = root || !hasSysAdmin();
  const dir = await mkdtemp(join(tmpdir(), 'priority-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await chmod(dir, 0o755);
  const module = join(dir, 'priority.mjs');
  await copyFile(PRIORITY_MODULE, module);
  await chmod(module, 0o644);
  const child = spawn(process.execPath, ['--input-type=module', '-e', BURST_PROGRAM, module], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(root ? { uid: 65534, gid: 65534 } : {}),
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  t.is(code, 0, err);
  const report = JSON.parse(out) as { uid: number; atOnce: { queued: number; rateLimited: number }; final: { queued: number; applied: number; abandoned: number }; nice: number[] };
  t.log(`uid ${report.uid}: ${report.atOnce.queued} of 6 writes queued at once, ${report.final.applied} applied in the end`);
  t.deepEqual(report.nice, [19, 19, 19, 19, 19, 19], 'every autogroup got the niceness');
  t.like(report.final, { queued: 0, applied: 6, abandoned: 0 });
  if (unprivileged) t.true(report.atOnce.queued >= 5, `the kernel refused the burst: ${JSON.stringify(report.atOnce)}`);
});

/** CPU burners, each leading a session of its own at a moderate niceness, so the machine is busy but the tests beside this one still run. */
async function startBurners(count: number, nice: number): Promise<ChildProcess[]> {
  const writer = new AutogroupWriter();
  const burners = Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { detached: true, stdio: 'ignore' }));
  for (const burner of burners) {
    setPriority(burner.pid!, nice);
    writer.set(burner.pid!, nice);
  }
  await pollUntil(() => writer.stats().queued === 0, { timeoutMs: 10_000 });
  return burners;
}

test.serial('a starved server gets normal priority back and is discovered, its timings saying how long it waited for a CPU; one that still times out says it was starved', async (t) => {
  if (!HAS_AUTOGROUPS) {
    t.log('this kernel has no scheduler autogroups: discovery\'s niceness is a plain nice value here');
    t.pass();
    return;
  }
  const tag = useFixtureTag(t);
  // Two burners per core at nice 10 (autogroup weight 110 each): a server at 19 (weight 15) gets
  // ≈ 6 % of a core, so one second of start-up CPU would take ≈ 15 s — past the 10 s timeout —
  // while the rest of the machine (weight 1024) keeps ≈ 80 %.
  const burners = await startBurners(2 * availableParallelism(), 10);
  try {
    // `heavy` needs 30 s of CPU: even at normal priority after half time, it cannot make it.
    const host = newHost(t, { busy: stdioFixtureConfig(['--busy-start', '1000'], { tag }), heavy: stdioFixtureConfig(['--busy-start', '30000'], { tag }) }, { discovery: { connectTimeoutMs: 10_000 } });
    const turn = await host.beginTurn();
    const heavy = host.status().servers['heavy'];
    t.like(heavy, { status: 'failed', kind: 'timeout' });
    t.regex(heavy?.status === 'failed' ? heavy.message : '', /^no answer within the connect timeout of 10000 ms \(starved: it had waited \d+ ms for a CPU at discovery's low priority before it got normal priority back\)$/);
    const view = host.status().servers['busy'];
    t.is(view?.status, 'ready', JSON.stringify(view));
    const cpuWaitMs = view?.status === 'ready' ? view.timings.cpuWaitMs : undefined;
    t.log(`waited ${cpuWaitMs} ms for a CPU by its first 5 s check; ready after ${view?.status === 'ready' ? view.timings.totalMs : '?'} ms`);
    t.true(cpuWaitMs !== undefined && cpuWaitMs >= 2500, `cpuWaitMs ${cpuWaitMs}`);
    t.true(turn.tools.some((tool) => tool.name === 'mcp__busy__echo'));
  } finally {
    for (const burner of burners) process.kill(-burner.pid!, 'SIGKILL');
    t.deepEqual(await waitGone(burners.map((burner) => burner.pid!)), []);
  }
});
