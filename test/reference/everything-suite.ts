/**
 * The client surface against the official `@modelcontextprotocol/server-everything` (run as a real
 * process, `node <its bin>`), registered once per transport by everything-stdio.test.ts and
 * everything-http.test.ts. What the server does, exactly, is written down in
 * ../helpers/reference-servers.ts; the facts each test leans on are repeated where it leans.
 *
 * Every test goes through the public API only: createHost with `client` handlers, beginTurn,
 * turn.callTool / readResource / getPrompt, host.readResource / getPrompt / rootsChanged, and
 * `server:log` events.
 */
import type { ExecutionContext, TestFn } from 'ava';
import type { CallToolResult, LoggingLevel } from '@modelcontextprotocol/sdk/types.js';
import type { HostOptions } from '../../src/index.js';
import { useFixtureTag } from '../helpers/fixtures.js';
import { referenceServerConfig, startEverythingHttp } from '../helpers/reference-servers.js';
import {
  collect,
  deeplyFrozen,
  recordingElicitor,
  recordingSampler,
  referenceHost,
  textOf,
  toolNames,
  toolOf,
  waitForEntry,
  waitUntil,
  waitUntilAsync,
} from './common.js';

export type EverythingTransport = 'stdio' | 'http';

/** Listed whatever the client declares (server-everything registers them in createServer()). */
export const ALWAYS_LISTED = [
  'echo',
  'get-annotated-message',
  'get-env',
  'get-resource-links',
  'get-resource-reference',
  'get-structured-content',
  'get-sum',
  'get-tiny-image',
  'gzip-file-as-resource',
  'toggle-simulated-logging',
  'toggle-subscriber-updates',
  'trigger-long-running-operation',
] as const;

/** Registered in `oninitialized` only when the client declared the capability. */
export const GATED = { sampling: 'trigger-sampling-request', elicitation: 'trigger-elicitation-request', roots: 'get-roots-list' } as const;

const LEVELS: readonly LoggingLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const INFO = { name: 'mcp-supervisor-reference-tests', version: '1.0.0' };

export function registerEverythingTests(test: TestFn, transport: EverythingTransport): void {
  const T = `server-everything over ${transport === 'stdio' ? 'stdio' : 'Streamable HTTP'}`;

  /**
   * The `mcpServers` entry of server-everything for this transport. Over HTTP the server is one
   * process per test (started here, stopped by a teardown registered before the host's, so the
   * host closes its sessions first).
   */
  async function everything(t: ExecutionContext, tag: string): Promise<Record<string, unknown>> {
    if (transport === 'stdio') return { ...referenceServerConfig('everything', [], { tag }) };
    const server = await startEverythingHttp({ tag });
    t.teardown(() => server.stop());
    return { type: 'http', url: server.url };
  }

  function profiles(entry: Record<string, unknown>): HostOptions['profiles'] {
    return { default: { mcpServers: { everything: entry } } };
  }

  test.serial(`${T}: a client without handlers is not offered the sampling, elicitation and roots tools`, async (t) => {
    const tag = useFixtureTag(t);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO } });
    const turn = await host.beginTurn();
    t.deepEqual(turn.failed, []);
    t.is(host.status().servers['everything']?.status, 'ready');
    const names = toolNames(turn, 'everything');
    for (const name of ALWAYS_LISTED) t.true(names.includes(name), `${name} is listed`);
    for (const name of Object.values(GATED)) t.false(names.includes(name), `${name} is hidden without its capability`);
  });

  test.serial(`${T}: trigger-sampling-request is listed with a sampling handler, which answers it with ctx { profile, server }`, async (t) => {
    const tag = useFixtureTag(t);
    const sampler = recordingSampler((_params, ctx) => `sampled for ${ctx.profile}/${ctx.server}`);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO, sampling: sampler.handler } });
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', GATED.sampling);
    t.is(tool.name, `mcp__everything__${GATED.sampling}`);
    // Exactly the configured capabilities: no elicitation or roots handler, no such tools.
    const names = toolNames(turn, 'everything');
    t.false(names.includes(GATED.elicitation));
    t.false(names.includes(GATED.roots));

    const result = await turn.callTool(tool.name, { prompt: 'What is 2+2?', maxTokens: 33 });
    t.not(result.isError, true, textOf(result));
    t.is(sampler.calls.length, 1);
    const call = sampler.calls[0]!;
    t.deepEqual(call.ctx, { profile: 'default', server: 'everything', signalIsAbortSignal: true });
    // What server-everything sends: one user message naming the tool and the prompt.
    t.deepEqual(call.params.messages.map((message) => [message.role, message.content]), [
      ['user', { type: 'text', text: 'Resource trigger-sampling-request context: What is 2+2?' }],
    ]);
    t.is(call.params.maxTokens, 33);
    t.is(call.params.systemPrompt, 'You are a helpful test server.');
    // Its answer is our CreateMessageResult as pretty JSON.
    const text = textOf(result);
    t.regex(text, /^LLM sampling result: /);
    t.true(text.includes('"text": "sampled for default/everything"'), text);
    t.true(text.includes('"model": "test-model"'), text);
    t.true(text.includes('"stopReason": "endTurn"'), text);
  });

  test.serial(`${T}: trigger-elicitation-request is listed with an elicitation handler, whose answer (with schema defaults) the tool reports`, async (t) => {
    const tag = useFixtureTag(t);
    const elicitor = recordingElicitor({ action: 'accept', content: { name: 'Ada Lovelace', check: true } });
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO, elicitation: elicitor.handler } });
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', GATED.elicitation);
    const names = toolNames(turn, 'everything');
    t.false(names.includes(GATED.sampling));
    t.false(names.includes(GATED.roots));

    const result = await turn.callTool(tool.name, {});
    t.not(result.isError, true, textOf(result));
    t.is(elicitor.calls.length, 1);
    const call = elicitor.calls[0]!;
    t.deepEqual(call.ctx, { profile: 'default', server: 'everything', signalIsAbortSignal: true });
    t.is(call.params.message, 'Please provide inputs for the following fields:');
    const schema = (call.params as { requestedSchema?: { required?: string[]; properties?: Record<string, unknown> } }).requestedSchema;
    t.deepEqual(schema?.required, ['name']);
    t.truthy(schema?.properties?.['integer']);
    const text = textOf(result);
    t.true(text.includes('✅ User provided the requested information!'), text);
    t.true(text.includes('- Name: Ada Lovelace'), text);
    t.true(text.includes('- Agreed to terms: true'), text);
    // The README: "Omitted fields get the schema's defaults" — `integer` defaults to 42.
    t.true(text.includes('- Favorite Integer: 42'), text);
  });

  test.serial(`${T}: get-roots-list is listed with roots, reports the handler's roots, and sees the new ones after rootsChanged()`, async (t) => {
    const tag = useFixtureTag(t);
    let current = [{ uri: 'file:///srv/first-root', name: 'first' }];
    const asked: { profile: string; server: string }[] = [];
    const host = referenceHost(t, {
      profiles: profiles(await everything(t, tag)),
      client: {
        info: INFO,
        roots: (ctx) => {
          asked.push({ profile: ctx.profile, server: ctx.server });
          return current;
        },
      },
    });
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', GATED.roots);
    const names = toolNames(turn, 'everything');
    t.false(names.includes(GATED.sampling));
    t.false(names.includes(GATED.elicitation));

    const first = textOf(await turn.callTool(tool.name, {}));
    t.true(first.includes('Current MCP Roots (1 total)'), first);
    t.true(first.includes('1. first\n   URI: file:///srv/first-root'), first);
    t.true(asked.length >= 1);
    for (const ctx of asked) t.deepEqual(ctx, { profile: 'default', server: 'everything' });

    // The server caches the roots per session and asks again on notifications/roots/list_changed.
    current = [{ uri: 'file:///srv/second-root', name: 'second' }, { uri: 'file:///srv/third-root', name: 'third' }];
    const before = asked.length;
    t.true((await host.rootsChanged()) >= 1, 'the live session of server-everything was told');
    await waitUntil(() => asked.length > before, 'roots/list after rootsChanged()');
    // The server stores the new list once our answer arrived; the tool reads that store.
    let text = '';
    await waitUntilAsync(async () => (text = textOf(await turn.callTool(tool.name, {}))).includes('(2 total)'), 'get-roots-list showing the new roots');
    t.true(text.includes('Current MCP Roots (2 total)'), text);
    t.true(text.includes('1. second\n   URI: file:///srv/second-root'), text);
    t.true(text.includes('2. third\n   URI: file:///srv/third-root'), text);
    for (const ctx of asked) t.deepEqual(ctx, { profile: 'default', server: 'everything' });
  });

  test.serial(`${T}: toggle-simulated-logging yields server:log events naming the profile and the server`, async (t) => {
    const tag = useFixtureTag(t);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO, logLevel: 'debug' } });
    const logs = collect(t, host, 'server:log');
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', 'toggle-simulated-logging');
    const started = textOf(await turn.callTool(tool.name, {}));
    t.regex(started, /^Started simulated, random-leveled logging for session/);
    // One message at once (then one per 5 s), of a random level, e.g. "Warning-level message".
    const line = await waitForEntry(logs, (event) => event.server === 'everything' && /level[- ]message/i.test(String(event.data)), 'simulated log line');
    t.is(line.profile, 'default');
    t.true(LEVELS.includes(line.level), String(line.level));
    t.regex(String(line.data), new RegExp(`^${line.level}[- ]level[- ]message`, 'i'));
    const stopped = textOf(await turn.callTool(tool.name, {}));
    t.regex(stopped, /^Stopped simulated logging for session/);
  });

  test.serial(`${T}: client.logLevel is sent as logging/setLevel: info lines arrive at 'debug' and are filtered at 'warning'`, async (t) => {
    const tag = useFixtureTag(t);
    const entry = await everything(t, tag);
    // With roots declared, server-everything asks roots/list 350 ms after `initialized` (and from
    // get-roots-list) and then logs at level info, logger "everything-server":
    // "Roots updated: 1 root(s) received from client" — unless the client's level is above info.
    const roots = [{ uri: 'file:///srv/logged', name: 'logged' }];
    const verbose = referenceHost(t, { profiles: profiles(entry), client: { info: INFO, roots, logLevel: 'debug' } });
    const quiet = referenceHost(t, { profiles: profiles(entry), client: { info: INFO, roots, logLevel: 'warning' } });
    const verboseLogs = collect(t, verbose, 'server:log');
    const quietLogs = collect(t, quiet, 'server:log');
    const isRootsLine = (event: { data: unknown }) => String(event.data) === 'Roots updated: 1 root(s) received from client';

    const loud = await verbose.beginTurn();
    t.regex(textOf(await loud.callTool(toolOf(loud, 'everything', GATED.roots).name, {})), /Current MCP Roots \(1 total\)/);
    const line = await waitForEntry(verboseLogs, isRootsLine, '"Roots updated" info line at logLevel debug');
    t.like(line, { profile: 'default', server: 'everything', level: 'info', logger: 'everything-server' });

    const hushed = await quiet.beginTurn();
    // get-roots-list answers only after the server stored the roots, and the server logs right
    // after storing them; an echo round trip afterwards lets any such line arrive first.
    t.regex(textOf(await hushed.callTool(toolOf(hushed, 'everything', GATED.roots).name, {})), /Current MCP Roots \(1 total\)/);
    t.regex(textOf(await hushed.callTool(toolOf(hushed, 'everything', 'echo').name, { message: 'barrier' })), /barrier/);
    t.deepEqual(quietLogs.filter(isRootsLine), [], 'an info line reached a client whose level is warning');
  });

  test.serial(`${T}: resources, resource templates and prompts are in the turn, frozen, and read and fetched through it`, async (t) => {
    const tag = useFixtureTag(t);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO } });
    const turn = await host.beginTurn();

    const features = turn.resources.find((resource) => resource.uri === 'demo://resource/static/document/features.md');
    t.like(features, { server: 'everything', name: 'features.md', mimeType: 'text/markdown' });
    t.true(turn.resources.length >= 7, `static documents: ${turn.resources.map((resource) => resource.uri).join(', ')}`);
    t.true(turn.resources.every((resource) => resource.server === 'everything'));
    t.deepEqual(turn.resourceTemplates.map((template) => [template.server, template.uriTemplate]).sort(), [
      ['everything', 'demo://resource/dynamic/blob/{resourceId}'],
      ['everything', 'demo://resource/dynamic/text/{resourceId}'],
    ]);
    const args = turn.prompts.find((prompt) => prompt.name === 'args-prompt');
    t.like(args, { server: 'everything', title: 'Arguments Prompt' });
    t.deepEqual(args?.arguments?.map((argument) => [argument.name, argument.required ?? false]), [['city', true], ['state', false]]);
    t.deepEqual(turn.prompts.map((prompt) => prompt.name).sort(), ['args-prompt', 'completable-prompt', 'resource-prompt', 'simple-prompt']);
    t.true(deeplyFrozen(turn.resources), 'turn.resources is deeply frozen');
    t.true(deeplyFrozen(turn.resourceTemplates), 'turn.resourceTemplates is deeply frozen');
    t.true(deeplyFrozen(turn.prompts), 'turn.prompts is deeply frozen');

    const document = await turn.readResource('everything', 'demo://resource/static/document/features.md');
    t.is(document.contents.length, 1);
    t.like(document.contents[0], { uri: 'demo://resource/static/document/features.md', mimeType: 'text/markdown' });
    t.regex(String((document.contents[0] as { text?: string }).text), /^# Everything Server - Features/);

    const dynamic = await turn.readResource('everything', 'demo://resource/dynamic/text/7');
    t.regex(String((dynamic.contents[0] as { text?: string }).text), /^Resource 7: This is a plaintext resource created at /);

    const prompt = await turn.getPrompt('everything', 'args-prompt', { city: 'Oslo', state: 'Viken' });
    t.deepEqual(prompt.messages, [{ role: 'user', content: { type: 'text', text: "What's weather in Oslo, Viken?" } }]);

    // The same without a turn.
    const simple = await host.getPrompt(undefined, 'everything', 'simple-prompt');
    t.deepEqual(simple.messages, [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } }]);
    const blob = await host.readResource('default', 'everything', 'demo://resource/dynamic/blob/3');
    const base64 = String((blob.contents[0] as { blob?: string }).blob);
    t.regex(Buffer.from(base64, 'base64').toString('utf8'), /^Resource 3: This is a base64 blob created at /);
  });

  test.serial(`${T}: trigger-long-running-operation reports progress through onProgress`, async (t) => {
    const tag = useFixtureTag(t);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO } });
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', 'trigger-long-running-operation');
    t.like(tool.annotations, { readOnlyHint: true, idempotentHint: true });
    const progress: { progress: number; total?: number; message?: string }[] = [];
    let resultAt = -1;
    const steps = 4;
    const result: CallToolResult = await turn.callTool(tool.name, { duration: 1.2, steps }, { onProgress: (update) => progress.push(update), timeoutMs: 30_000 }).then((value) => {
      resultAt = progress.length;
      return value;
    });
    t.is(textOf(result), `Long running operation completed. Duration: 1.2 seconds, Steps: ${steps}.`);
    // One notification after each step, {progress: i, total: steps}. The last one is written right
    // before the result; a bare SDK client over stdio usually drops it (its progress handler is
    // removed by the response first), so at least steps - 1 are required, in order.
    t.true(progress.length >= steps - 1, JSON.stringify(progress));
    t.is(resultAt, progress.length, 'no progress after the result');
    progress.forEach((update, index) => t.deepEqual({ progress: update.progress, total: update.total }, { progress: index + 1, total: steps }));
  });

  test.serial(`${T}: get-structured-content's result conforms to its outputSchema and comes back structured`, async (t) => {
    const tag = useFixtureTag(t);
    const host = referenceHost(t, { profiles: profiles(await everything(t, tag)), client: { info: INFO } });
    const turn = await host.beginTurn();
    const tool = toolOf(turn, 'everything', 'get-structured-content');
    t.deepEqual(Object.keys((tool.outputSchema as { properties?: object } | undefined)?.properties ?? {}).sort(), ['conditions', 'humidity', 'temperature']);
    const result = await turn.callTool(tool.name, { location: 'Chicago' });
    t.not(result.isError, true, textOf(result));
    t.deepEqual(result.structuredContent, { temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });
  });
}
