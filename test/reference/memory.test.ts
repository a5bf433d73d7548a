/**
 * A plain end-to-end through the host against the official `@modelcontextprotocol/server-memory`
 * (2026.8.31), run as a real stdio process (`node <its bin>`, spawned by the library).
 *
 * What the server does (dist/index.js): a knowledge graph stored as JSON lines in
 * `MEMORY_FILE_PATH` (absolute, or relative to its own dist/ — the default is a file inside
 * node_modules, so the tests always point it into a temporary directory). Every tool declares an
 * outputSchema and returns matching structuredContent: create_entities → {entities: the ones
 * created, existing names skipped}, create_relations → {relations}, add_observations →
 * {results: [{entityName, addedObservations}]}, read_graph / search_nodes {query} / open_nodes
 * {names} → {entities, relations}. One resource: memory://knowledge-graph (application/json).
 */
import test from 'ava';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, referenceServerConfig } from '../helpers/reference-servers.js';
import { referenceHost, tempDir, textOf, toolOf } from './common.js';

guardOpenHandles(test);

const INFO = { name: 'mcp-supervisor-reference-tests', version: '1.0.0' };

interface Entity {
  name: string;
  entityType: string;
  observations: string[];
}
interface Relation {
  from: string;
  to: string;
  relationType: string;
}
interface Graph {
  entities: Entity[];
  relations: Relation[];
}

const ADA: Entity = { name: 'Ada Lovelace', entityType: 'person', observations: ['wrote the first program'] };
const ENGINE: Entity = { name: 'Analytical Engine', entityType: 'machine', observations: ['designed by Babbage'] };

test.serial('server-memory: entities and relations are created and read back through tool calls, stored in a temp dir, and survive a new host', async (t) => {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'memory');
  const file = path.join(dir, 'memory.jsonl');
  const profiles = { default: { mcpServers: { memory: referenceServerConfig('memory', [], { tag, env: { MEMORY_FILE_PATH: file } }) } } };
  const host = referenceHost(t, { profiles, client: { info: INFO } });
  const turn = await host.beginTurn();
  t.deepEqual(turn.failed, []);
  const call = async (tool: string, args: Record<string, unknown>) => {
    const result = await turn.callTool(toolOf(turn, 'memory', tool).name, args);
    t.not(result.isError, true, `${tool}: ${textOf(result)}`);
    return result;
  };
  t.truthy(toolOf(turn, 'memory', 'create_entities').outputSchema, 'create_entities declares an outputSchema');

  const created = await call('create_entities', { entities: [ADA, ENGINE] });
  t.deepEqual(created.structuredContent, { entities: [ADA, ENGINE] });
  // An existing name is skipped, not duplicated.
  t.deepEqual((await call('create_entities', { entities: [{ ...ADA, observations: ['dup'] }] })).structuredContent, { entities: [] });
  const relation: Relation = { from: ADA.name, to: ENGINE.name, relationType: 'programmed' };
  t.deepEqual((await call('create_relations', { relations: [relation] })).structuredContent, { relations: [relation] });
  t.deepEqual((await call('add_observations', { observations: [{ entityName: ADA.name, contents: ['born 1815'] }] })).structuredContent, {
    results: [{ entityName: ADA.name, addedObservations: ['born 1815'] }],
  });

  const ada = { ...ADA, observations: [...ADA.observations, 'born 1815'] };
  const opened = (await call('open_nodes', { names: [ADA.name] })).structuredContent as unknown as Graph;
  t.deepEqual(opened.entities, [ada]);
  const found = (await call('search_nodes', { query: 'Babbage' })).structuredContent as unknown as Graph;
  t.deepEqual(found.entities.map((entity) => entity.name), [ENGINE.name]);
  const graph = (await call('read_graph', {})).structuredContent as unknown as Graph;
  t.deepEqual(graph, { entities: [ada, ENGINE], relations: [relation] });

  // The same graph as the server's resource, read through the turn.
  t.like(turn.resources.find((resource) => resource.uri === 'memory://knowledge-graph'), { server: 'memory', mimeType: 'application/json' });
  const resource = await turn.readResource('memory', 'memory://knowledge-graph');
  t.deepEqual(JSON.parse(String((resource.contents[0] as { text?: string }).text)), graph);

  // Stored where we said, as JSON lines.
  const lines = (await readFile(file, 'utf8')).split('\n').filter(Boolean).map((line) => JSON.parse(line) as { type: string; name?: string });
  t.deepEqual(lines.filter((line) => line.type === 'entity').map((line) => line.name), [ADA.name, ENGINE.name]);
  t.is(lines.filter((line) => line.type === 'relation').length, 1);

  // A new host (new server process) reads the same file.
  await host.close();
  const again = referenceHost(t, { profiles, client: { info: INFO } });
  const next = await again.beginTurn();
  const reread = await next.callTool(toolOf(next, 'memory', 'read_graph').name, {});
  t.deepEqual(reread.structuredContent, { entities: [ada, ENGINE], relations: [relation] });
});
