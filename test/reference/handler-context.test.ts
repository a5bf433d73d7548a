/**
 * Handlers get the right ctx under concurrency: two profiles list the same
 * `@modelcontextprotocol/server-everything` definition and call its trigger-sampling-request tool
 * at the same time. The sampling handler holds every call until all of them are in flight (so
 * they really overlap), then answers with text naming `ctx.profile`; each result must carry its
 * own profile, never the other one's.
 *
 * server-everything's trigger-sampling-request {prompt} sends sampling/createMessage with the one
 * user message "Resource trigger-sampling-request context: <prompt>" and answers with our
 * CreateMessageResult as pretty JSON (see ../helpers/reference-servers.ts), so the prompt says
 * which profile's turn asked and the result says which profile's handler answered.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { useFixtureTag } from '../helpers/fixtures.js';
import { guardOpenHandles, referenceServerConfig, startEverythingHttp } from '../helpers/reference-servers.js';
import { firstMessageText, recordingSampler, referenceHost, textOf, toolOf } from './common.js';

guardOpenHandles(test);

const INFO = { name: 'mcp-supervisor-reference-tests', version: '1.0.0' };
const PROFILES = ['alpha', 'beta'] as const;
const CALLS_PER_PROFILE = 2;

async function concurrentSampling(t: ExecutionContext, entry: Record<string, unknown>): Promise<void> {
  const total = PROFILES.length * CALLS_PER_PROFILE;
  let inFlight = 0;
  let maxInFlight = 0;
  let release!: () => void;
  const allIn = new Promise<void>((resolve) => (release = resolve));
  const sampler = recordingSampler(async (params, ctx) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    if (inFlight >= total) release();
    // Bounded: if the calls never overlap, they go on after 10 s and maxInFlight says so.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([allIn, new Promise<void>((resolve) => (timer = setTimeout(resolve, 10_000)))]);
    clearTimeout(timer);
    inFlight--;
    return `answered by the handler of profile ${ctx.profile} (server ${ctx.server}) for "${firstMessageText(params)}"`;
  });
  const host = referenceHost(t, {
    profiles: Object.fromEntries(PROFILES.map((profile) => [profile, { mcpServers: { everything: entry } }])),
    client: { info: INFO, sampling: sampler.handler },
  });
  const turns = await Promise.all(PROFILES.map((profile) => host.beginTurn(profile)));
  const calls = turns.flatMap((turn, index) => {
    const profile = PROFILES[index]!;
    const tool = toolOf(turn, 'everything', 'trigger-sampling-request');
    return Array.from({ length: CALLS_PER_PROFILE }, (_, n) =>
      turn.callTool(tool.name, { prompt: `asked by ${profile} #${n}` }, { timeoutMs: 30_000 }).then((result) => ({ profile, n, result })),
    );
  });
  const results = await Promise.all(calls);

  t.is(maxInFlight, total, 'every sampling request was in the handler at the same time');
  t.is(sampler.calls.length, total);
  for (const { profile, n, result } of results) {
    const other = PROFILES.find((name) => name !== profile)!;
    const text = textOf(result);
    t.not(result.isError, true, text);
    t.true(text.includes(`answered by the handler of profile ${profile} (server everything) for \\"Resource trigger-sampling-request context: asked by ${profile} #${n}\\"`), text);
    t.false(text.includes(other), `${profile}'s result mentions ${other}: ${text}`);
  }
  // And from the handler's side: every request it saw came from the profile whose turn asked.
  for (const { params, ctx } of sampler.calls) {
    const asker = /asked by (\w+) #/.exec(firstMessageText(params))?.[1] ?? '(no asker in the prompt)';
    t.is(ctx.profile, asker, `a request asked by ${asker} reached the handler as profile ${ctx.profile}`);
    t.is(ctx.server, 'everything');
  }
}

test.serial('two profiles with the same server-everything definition over stdio: concurrent sampling requests reach the handler with their own profile', async (t) => {
  const tag = useFixtureTag(t);
  await concurrentSampling(t, { ...referenceServerConfig('everything', [], { tag }) });
});

test.serial('the same with `share: true`: handlers that receive the profile are never shared across profiles', async (t) => {
  const tag = useFixtureTag(t);
  await concurrentSampling(t, { ...referenceServerConfig('everything', [], { tag }), share: true });
});

test.serial('two profiles with the same server-everything URL over Streamable HTTP: concurrent sampling requests reach the handler with their own profile', async (t) => {
  const tag = useFixtureTag(t);
  const server = await startEverythingHttp({ tag });
  t.teardown(() => server.stop());
  await concurrentSampling(t, { type: 'http', url: server.url });
});
