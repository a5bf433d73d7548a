/**
 * `diffServers`: what a reload reports per profile, computed from two server maps alone.
 */
import test from 'ava';
import { diffServers } from '../../src/config/diff.js';
import { type ServerConfig, parseProfileConfig } from '../../src/index.js';

function servers(mcpServers: Record<string, unknown>): Readonly<Record<string, ServerConfig>> {
  return parseProfileConfig({ mcpServers }, { profile: 'p', env: {} }).servers;
}

test('added, removed, changed and unchanged by fingerprint, each in config order', (t) => {
  const before = servers({ keep: { command: '/bin/keep' }, change: { command: '/bin/old' }, drop: { command: '/bin/drop' }, web: { url: 'https://a.example/mcp' } });
  const after = servers({ web: { url: 'https://b.example/mcp' }, added: { command: '/bin/added' }, change: { command: '/bin/new' }, keep: { command: '/bin/keep' } });
  t.deepEqual(diffServers(before, after), { added: ['added'], removed: ['drop'], changed: ['web', 'change'], unchanged: ['keep'] });
});

test('what does not change the connection is unchanged: timeouts, share, env order, header name case', (t) => {
  const before = servers({
    s: { command: 'node', env: { A: '1', B: '2' } },
    h: { url: 'https://h.example/mcp', headers: { 'X-Key': 'k' } },
  });
  const after = servers({
    s: { command: 'node', env: { B: '2', A: '1' }, callTimeoutMs: 5, share: true },
    h: { url: 'https://h.example/mcp', headers: { 'x-key': 'k' }, connectTimeoutMs: 9 },
  });
  t.deepEqual(diffServers(before, after), { added: [], removed: [], changed: [], unchanged: ['s', 'h'] });
});

test('enabling or disabling a server is a change, although its fingerprint is the same', (t) => {
  const before = servers({ s: { command: 'node' }, u: { command: 'node', disabled: true } });
  const after = servers({ s: { command: 'node', disabled: true }, u: { command: 'node' } });
  t.deepEqual(diffServers(before, after), { added: [], removed: [], changed: ['s', 'u'], unchanged: [] });
});

test('server names are own keys: `constructor` and `toString` are added and removed like any other', (t) => {
  t.deepEqual(diffServers({}, servers({ constructor: { command: 'node' } })), { added: ['constructor'], removed: [], changed: [], unchanged: [] });
  t.deepEqual(diffServers(servers({ toString: { command: 'node' } }), {}), { added: [], removed: ['toString'], changed: [], unchanged: [] });
});

test('pure: the inputs are not touched and every call returns fresh lists', (t) => {
  const before = servers({ a: { command: 'node' } });
  const after = servers({ a: { command: 'node' } });
  const first = diffServers(before, after);
  const second = diffServers(before, after);
  t.deepEqual(first, second);
  t.not(first.unchanged, second.unchanged);
  t.deepEqual(Object.keys(before), ['a']);
  t.deepEqual(Object.keys(after), ['a']);
});
