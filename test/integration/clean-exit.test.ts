import test from 'ava';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { useFixtureTag } from '../helpers/fixtures.js';
import { pidsWithTag } from '../helpers/processes.js';

const PROGRAM = fileURLToPath(new URL('../programs/discover-then-close.js', import.meta.url));

test('after close(), Node exits by itself (no open handles) and no server process is left', async (t) => {
  const tag = useFixtureTag(t);
  const child = spawn(process.execPath, [PROGRAM, tag], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // Only a guard against hanging the suite: the assertion is the natural exit below.
  const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  clearTimeout(guard);
  t.is(signal, null, `the program did not exit by itself; ${stderr}`);
  t.is(code, 0, stderr);
  t.regex(stdout, /healthy ready/);
  t.regex(stdout, /closed quiesced=true/);
  t.deepEqual(pidsWithTag(tag), []);
});
