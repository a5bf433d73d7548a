/**
 * No process outlives the host (docs/ARCHITECTURE.md §9), through createHost: a host program with a live
 * session on a server that ignores stdin EOF and SIGTERM (under a wrapper with a grandchild) and
 * a discovery stuck on a hanging server, ended by SIGKILL, SIGTERM, process.exit() and an
 * uncaught exception — each time no server process is left, and the host ended exactly as it
 * would have without the library.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag, pollUntil } from '../helpers/processes.js';

const PROGRAM = fileURLToPath(new URL('../programs/host-dies.js', import.meta.url));

const endings = [
  { ending: 'sigkill', expect: { code: null, signal: 'SIGKILL' } },
  { ending: 'sigterm', expect: { code: null, signal: 'SIGTERM' } },
  { ending: 'exit', expect: { code: 3, signal: null } },
  { ending: 'throw', expect: { code: 1, signal: null } },
] as const;

for (const { ending, expect } of endings) {
  test.serial(`host ended by ${ending}: every server process is gone within 2 s, and the host's own exit is unchanged`, async (t) => {
    const tag = useFixtureTag(t);
    const child = spawn(process.execPath, [PROGRAM, tag, ending], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    t.true(await pollUntil(() => stdout.includes('ready'), { timeoutMs: 30_000 }), stderr);
    const before = pidsWithTag(tag);
    t.true(before.length >= 4, `live session tree + hung discovery server: ${before.length} processes`);
    if (ending === 'sigkill') child.kill('SIGKILL');
    else if (ending === 'sigterm') child.kill('SIGTERM');
    else child.stdin.write('go\n');
    const [code, signal] = await exited;
    t.deepEqual({ code, signal }, expect, stderr);
    const gone = await pollUntil(() => pidsWithTag(tag).length === 0, { timeoutMs: 2000 });
    t.true(gone, `left: ${pidsWithTag(tag).join(', ')}`);
  });
}
