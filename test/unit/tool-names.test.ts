/**
 * The tool-name rule (src/readiness/tool-names.ts, README "Use it"): a tool's model-facing name
 * depends only on its own server and tool names, never on which other tools are present —
 * `mcp__<server>__<tool>` when that is valid and the server name neither contains `__` nor ends
 * in `_`, otherwise sanitised, cut to 55 characters, `_` and 8 hex digits of SHA-256 of
 * `<server>/<tool>`.
 */
import { createHash } from 'node:crypto';
import test from 'ava';
import fc from 'fast-check';
import { assignToolNames, baseToolName } from '../../src/readiness/tool-names.js';

const hash = (server: string, tool: string): string => createHash('sha256').update(`${server}/${tool}`).digest('hex').slice(0, 8);
const VALID = /^[A-Za-z0-9_-]{1,64}$/;

test('a valid name is kept exactly as mcp__<server>__<tool>', (t) => {
  t.deepEqual(assignToolNames([{ server: 'tickets', tool: 'create' }, { server: 'fs', tool: 'read-file' }, { server: 'fs', tool: 'read_file' }]), [
    'mcp__tickets__create',
    'mcp__fs__read-file',
    'mcp__fs__read_file',
  ]);
});

test('adding a tool never renames another: `b.c` keeps its name when `b_c` appears (the review\'s case)', (t) => {
  const [alone] = assignToolNames([{ server: 'a', tool: 'b.c' }]);
  t.is(alone, `mcp__a__b_c_${hash('a', 'b.c')}`, 'an altered name always carries the hash of its own pair');
  t.deepEqual(assignToolNames([{ server: 'a', tool: 'b.c' }, { server: 'a', tool: 'b_c' }]), [alone, 'mcp__a__b_c']);
  t.deepEqual(assignToolNames([{ server: 'a', tool: 'b_c' }, { server: 'a', tool: 'b.c' }]), ['mcp__a__b_c', alone], 'whatever the order');
  t.deepEqual(assignToolNames([{ server: 'a', tool: 'b_c' }]), ['mcp__a__b_c']);
});

test('separator ambiguity: a server name containing `__` or ending in `_` always gets the hashed form', (t) => {
  // `mcp__a__b__c` could be a/b__c or a__b/c; `mcp__a____b` could be a/__b or a_/_b.
  t.is(baseToolName('a', 'b__c'), 'mcp__a__b__c');
  t.is(baseToolName('a__b', 'c'), `mcp__a__b__c_${hash('a__b', 'c')}`);
  t.is(baseToolName('a', '__b'), 'mcp__a____b');
  t.is(baseToolName('a_', '_b'), `mcp__a____b_${hash('a_', '_b')}`);
  t.deepEqual(assignToolNames([{ server: 'a__b', tool: 'c' }, { server: 'a', tool: 'b__c' }]), [baseToolName('a__b', 'c'), 'mcp__a__b__c']);
});

test('long names are cut to 55 characters plus `_` and the hash: at most 64, stable, distinct', (t) => {
  const server = 'server';
  const long = 'x'.repeat(80);
  const name = baseToolName(server, long);
  t.is(name, `${`mcp__${server}__${long}`.slice(0, 55)}_${hash(server, long)}`);
  t.is(name.length, 64);
  t.not(baseToolName(server, `${long}y`), name, 'two long names with the same first 55 characters differ by their hash');
  t.is(baseToolName(server, 'x'.repeat(64 - 'mcp__server__'.length)).length, 64, 'exactly 64: kept as is');
  t.is(baseToolName(server, 'x'.repeat(64 - 'mcp__server__'.length)), `mcp__server__${'x'.repeat(51)}`);
});

test('the clash no rule prevents (a tool listed twice) is resolved by a re-salted hash for the later one', (t) => {
  const [first, second] = assignToolNames([{ server: 's', tool: 't' }, { server: 's', tool: 't' }]);
  t.is(first, 'mcp__s__t');
  t.regex(second ?? '', /^mcp__s__t_[0-9a-f]{8}$/);
});

test('property: every name is valid and unique, and is the name its pair gets alone (no dependence on the other tools or their order)', (t) => {
  const part = fc.stringMatching(/^[a-z_.\-/é ]{1,12}$/);
  const pairs = fc.uniqueArray(fc.record({ server: fc.oneof(part, fc.constantFrom('a', 'a_', 'a__b', 'x'.repeat(70))), tool: fc.oneof(part, fc.constantFrom('b', '_b', '__b', 'b__c', 'y'.repeat(70))) }), {
    minLength: 1,
    maxLength: 30,
    selector: ({ server, tool }) => `${server}\0${tool}`,
  });
  fc.assert(
    fc.property(pairs, fc.nat(), (list, seed) => {
      const names = assignToolNames(list);
      if (new Set(names).size !== names.length) return false;
      if (!names.every((name) => VALID.test(name))) return false;
      if (!list.every((pair, index) => names[index] === assignToolNames([pair])[0])) return false;
      // Any other order: every pair keeps its name.
      const shuffled = [...list.keys()].sort((a, b) => ((a * 7919 + seed) % 101) - ((b * 7919 + seed) % 101));
      const reordered = assignToolNames(shuffled.map((index) => list[index]!));
      return shuffled.every((index, position) => reordered[position] === names[index]);
    }),
    { numRuns: 500 },
  );
  t.pass();
});
