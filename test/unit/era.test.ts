/**
 * Protocol eras as pure logic: the SDK negotiation each setting asks for, which cached verdict a
 * setting adopts, which failures make a verdict stale, and the verdict cache (keyed by
 * fingerprint, the setting included; persisted atomically; a damaged file costs nothing but probes).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import type { DiscoverResult } from '@modelcontextprotocol/client';
import type { ServerConfig } from '../../src/config/types.js';
import { protocolSettingOf } from '../../src/config/types.js';
import { pipeClosed } from '../../src/connection/connect.js';
import { EraCache } from '../../src/connection/era-cache.js';
import { type EraVerdict, isEraMismatch, negotiationFor, priorFor } from '../../src/connection/era.js';

const discover = { supportedVersions: ['2026-07-28'], capabilities: { tools: {} } } as unknown as DiscoverResult;
const modern: EraVerdict = { era: 'modern', discover };
const legacy: EraVerdict = { era: 'legacy' };

function http(protocol?: ServerConfig['protocol'], url = 'http://127.0.0.1:1/mcp'): ServerConfig {
  return { name: 's', transport: 'http', url, headers: {}, disabled: false, share: false, shareDiscovery: true, ...(protocol ? { protocol } : {}) };
}
const stdio: ServerConfig = { name: 's', transport: 'stdio', command: 'node', args: ['s.js'], env: {}, disabled: false, share: false, shareDiscovery: true };

test('defaults: stdio and SSE speak 2025-11-25, Streamable HTTP is probed', (t) => {
  t.is(protocolSettingOf(stdio), '2025-11-25');
  t.is(protocolSettingOf({ ...http(), transport: 'sse' } as ServerConfig), '2025-11-25');
  t.is(protocolSettingOf(http()), 'auto');
  t.is(protocolSettingOf(http('2026-07-28')), '2026-07-28');
});

test('negotiation: legacy, pinned, or auto with the whole connect budget for the probe', (t) => {
  t.deepEqual(negotiationFor('2025-11-25', 5000), { mode: 'legacy' });
  t.deepEqual(negotiationFor('2026-07-28', 5000), { mode: { pin: '2026-07-28' } });
  t.deepEqual(negotiationFor('auto', 5000), { mode: 'auto', probe: { timeoutMs: 5000 } });
});

test('a cached verdict is adopted only where it agrees with the setting', (t) => {
  t.is(priorFor('auto', undefined), undefined);
  t.deepEqual(priorFor('auto', legacy), { kind: 'legacy' });
  t.deepEqual(priorFor('auto', modern), { kind: 'modern', discover });
  t.deepEqual(priorFor('2026-07-28', modern), { kind: 'modern', discover });
  t.is(priorFor('2026-07-28', legacy), undefined, 'a pinned new era never adopts an old verdict');
  t.deepEqual(priorFor('2025-11-25', legacy), { kind: 'legacy' });
  t.is(priorFor('2025-11-25', modern), undefined, 'a pinned old era never adopts a new verdict');
});

test('stale verdicts: a refused version (stdio, or an HTTP body) and a failed negotiation; nothing else', (t) => {
  t.true(isEraMismatch(new ProtocolError(-32022, 'Unsupported protocol version')));
  t.true(isEraMismatch(new SdkError(SdkErrorCode.EraNegotiationFailed, 'connection closed during the probe')));
  t.true(isEraMismatch(new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'HTTP 400', { status: 400, text: '{"jsonrpc":"2.0","id":0,"error":{"code":-32022}}' })));
  t.false(isEraMismatch(new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, 'HTTP 400', { status: 400, text: 'Bad Request' })));
  t.false(isEraMismatch(new ProtocolError(-32601, 'Method not found')));
  t.false(isEraMismatch(new SdkError(SdkErrorCode.RequestTimeout, 'timeout')));
  t.false(isEraMismatch(new Error('-32022')));
});

test('the cache is keyed by what defines the connection, the setting included', (t) => {
  const cache = new EraCache();
  cache.learn(http(), modern);
  t.deepEqual(cache.get(http()), modern);
  t.deepEqual(cache.get({ ...http(), name: 'other-name' }), modern, 'the name does not define the connection');
  t.is(cache.get(http('2026-07-28')), undefined, 'another setting is another key');
  t.is(cache.get(http(undefined, 'http://127.0.0.1:2/mcp')), undefined);
  cache.forget(http());
  t.is(cache.get(http()), undefined);
  t.is(cache.stats().stale, 1);
});

test('a cache file survives a restart; a damaged or foreign file is ignored and rewritten on the next verdict', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'era-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'nested', 'eras.json');
  const first = new EraCache(file);
  first.learn(http(), modern);
  first.learn(stdio, legacy);
  const restarted = new EraCache(file);
  t.deepEqual(restarted.get(http()), modern);
  t.deepEqual(restarted.get(stdio), legacy);

  for (const damaged of ['{not json', JSON.stringify({ format: 99, verdicts: {} }), JSON.stringify({ format: 1, verdicts: { k: { era: 'modern' } } })]) {
    await writeFile(file, damaged);
    const cache = new EraCache(file);
    t.is(cache.stats().entries, 0, damaged);
    t.is(cache.stats().fileError, undefined, 'a damaged file is not an error');
    cache.learn(http(), legacy);
    const rewritten = JSON.parse(await readFile(file, 'utf8')) as { format: number; verdicts: Record<string, EraVerdict> };
    t.is(rewritten.format, 1);
    t.deepEqual(Object.values(rewritten.verdicts), [legacy]);
  }
});

test('an unwritable cache file is reported in stats, and the cache works in memory', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'era-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'file'), '');
  const cache = new EraCache(path.join(dir, 'file', 'eras.json'));
  cache.learn(http(), modern);
  t.deepEqual(cache.get(http()), modern);
  t.regex(cache.stats().fileError ?? '', /could not write/);
});

test('a broken stdio pipe is told apart: EPIPE/ECONNRESET anywhere in the cause chain, or the SDK saying the connection closed or a send failed', (t) => {
  const epipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
  t.true(pipeClosed(epipe));
  t.true(pipeClosed(new Error('send failed', { cause: epipe })));
  t.true(pipeClosed(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed')));
  t.true(pipeClosed(new SdkError(SdkErrorCode.SendFailed, 'send failed')));
  t.false(pipeClosed(new SdkError(SdkErrorCode.RequestTimeout, 'timeout')));
  t.false(pipeClosed(new ProtocolError(-32601, 'Method not found')));
  t.false(pipeClosed(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })));
});
