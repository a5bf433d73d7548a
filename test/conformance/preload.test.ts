/**
 * The conformance CLI's preload (./preload.ts) on its own, in a child process: loopback-only
 * listening that keeps `address()` synchronous, and the Node 20 `fs` shim.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { conformanceCli, conformanceCliVersion, type ConformanceCliName } from './suite.js';

const PRELOAD = fileURLToPath(new URL('./preload.js', import.meta.url));
const SHIM = new URL('./node20-fs-shim.js', import.meta.url).href;

async function runWithPreload(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runNode(['--import', PRELOAD, '--input-type=module', '-e', script]);
}

async function runNode(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

test('a listen without a host binds 127.0.0.1 and is addressable synchronously; an explicit host is kept', async (t) => {
  const { code, stdout, stderr } = await runWithPreload(`
    import net from 'node:net';
    import http from 'node:http';
    const out = {};
    const close = (server) => new Promise((resolve) => server.close(resolve));
    const a = net.createServer().listen(0); out.port = a.address();
    const b = http.createServer().listen(); out.none = b.address();
    const c = net.createServer().listen({ port: 0 }); out.options = c.address();
    const d = net.createServer().listen(0, '127.0.0.2');
    out.explicitSync = d.address();
    await new Promise((resolve) => d.once('listening', resolve));
    out.explicit = d.address();
    await Promise.all([a, b, c, d].map(close));
    console.log(JSON.stringify(out));
  `);
  t.is(code, 0, stderr);
  const out = JSON.parse(stdout) as Record<string, { address: string; port: number } | null>;
  for (const key of ['port', 'none', 'options']) {
    t.is(out[key]?.address, '127.0.0.1', key);
    t.true((out[key]?.port ?? 0) > 0, key);
  }
  t.is(out.explicitSync, null); // a named host still goes through dns.lookup, as without the preload
  t.is(out.explicit?.address, '127.0.0.2');
});

test('the fs shim is node:fs plus a globSync that refuses clearly', async (t) => {
  const { code, stdout, stderr } = await runWithPreload(`
    import * as fs from 'node:fs';
    const shim = await import(${JSON.stringify(SHIM)});
    let message = '';
    try { shim.globSync('*'); } catch (error) { message = error.message; }
    console.log(JSON.stringify({
      sameDefault: shim.default === fs.default,
      missing: Object.keys(fs).filter((name) => !(name in shim)),
      existsSync: shim.existsSync === fs.existsSync,
      message,
    }));
  `);
  t.is(code, 0, stderr);
  t.deepEqual(JSON.parse(stdout), {
    sameDefault: true,
    missing: [],
    existsSync: true,
    message: 'globSync requires Node >= 22; mcp-supervisor only runs the `client` command',
  });
});

// On Node 20 each CLI's bundle fails to link without the fs shim (top-level `globSync` import);
// the hook must recognise both package directories, `conformance-next` included.
for (const cli of ['current', 'next'] as ConformanceCliName[]) {
  test(`the ${cli} conformance CLI loads under the preload`, async (t) => {
    const { code, stdout, stderr } = await runNode(['--import', PRELOAD, conformanceCli(cli), '--version']);
    t.is(code, 0, stderr);
    t.is(stdout.trim(), conformanceCliVersion(cli));
  });
}
