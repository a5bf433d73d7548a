/**
 * Discovery shared across profiles, against real fixture processes and the real discovery pool.
 *
 * Servers wait behind a gate file before they start: the test opens the gate only once every
 * profile it means to share a flight has started its discovery, so "single flight" is forced,
 * never a matter of timing. Starts are counted by the fixture itself (`--state-file`).
 */
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { createHost } from '../../src/index.js';
import type { Host, HostOptions } from '../../src/host.js';
import { ManualClock } from '../helpers/clock.js';
import { STDIO_FIXTURE, startHttpFixture, useFixtureTag } from '../helpers/fixtures.js';
import { pollUntil, procState } from '../helpers/processes.js';
import { guardOpenHandles, tempDir, textOf } from '../sessions/helpers.js';

guardOpenHandles(test);

function host(t: ExecutionContext, options: HostOptions): Host {
  // No warm sessions: every counted start is a discovery's. A long hard wait: these tests are about
  // sharing, and a terminated worker at nice 19 on a loaded machine can take seconds to exit.
  const created = createHost({ sessions: { eager: false }, ...options, discovery: { maxThreads: 1, connectTimeoutMs: 20_000, quiesceHardWaitMs: 30_000, ...options.discovery } });
  t.teardown(() => created.close());
  return created;
}

interface Gated {
  /** The server config (the same object for every profile: the same fingerprint). */
  server: Record<string, unknown>;
  open(): Promise<void>;
  /** Fixture processes that got past the gate and started. */
  starts(): number;
  /** Pids of the gate shells started so far, in order. */
  shells(): number[];
}

/** A fixture that starts only once the gate is open, and counts its starts. */
async function gatedServer(t: ExecutionContext, extra: Record<string, unknown> = {}): Promise<Gated> {
  const tag = useFixtureTag(t);
  const dir = await tempDir(t, 'shared');
  const gate = path.join(dir, 'gate');
  const state = path.join(dir, 'starts');
  const shells = path.join(dir, 'shells');
  return {
    server: {
      command: '/bin/sh',
      // Each gate shell records its pid first: the test can name the very process a discovery started.
      args: ['-c', 'echo $$ >> "$SHELLS"; while [ ! -e "$GATE" ]; do sleep 0.02; done; exec "$@"', 'gate', process.execPath, STDIO_FIXTURE, '--state-file', state],
      env: { GATE: gate, SHELLS: shells, MCP_FIXTURE_TAG: tag },
      ...extra,
    },
    open: () => writeFile(gate, ''),
    starts: () => (existsSync(state) ? Number(readFileSync(state, 'utf8').trim()) : 0),
    shells: () => (existsSync(shells) ? readFileSync(shells, 'utf8').trim().split('\n').filter(Boolean).map(Number) : []),
  };
}

/** Resolves once `count` profiles have started a discovery generation. */
function startsOf(h: Host, count: number): Promise<string[]> {
  const keys: string[] = [];
  return new Promise((resolve) => {
    const off = h.on('discovery:start', (event) => {
      keys.push(event.key);
      if (keys.length === count) {
        off();
        resolve(keys);
      }
    });
  });
}

test('12 profiles that list the same server (under different names) share one discovery: one start, each turn has the tools under its own name', async (t) => {
  const gated = await gatedServer(t);
  const names = Array.from({ length: 12 }, (_, index) => `tenant${index}`);
  const profiles = Object.fromEntries(names.map((name, index) => [name, { mcpServers: { [`fx${index % 3}`]: gated.server } }]));
  const h = host(t, { profiles, discovery: { shareForMs: 0 } });
  const started = startsOf(h, names.length);
  const ready = Promise.all(names.map((name) => h.ready(name)));
  await started;
  await gated.open();
  const views = await ready;
  for (const view of views) t.is(view.status, 'ready', JSON.stringify(view.servers));
  t.is(gated.starts(), 1, 'one discovery process for twelve profiles');
  const sharing = h.stats().discovery.sharing;
  t.is(sharing?.joined, 11, 'eleven profiles followed the flight');
  t.is(sharing?.reused, 0);
  for (const [index, name] of names.entries()) {
    const turn = await h.beginTurn(name);
    t.true(turn.tools.some((tool) => tool.name === `mcp__fx${index % 3}__echo`), name);
  }
  // Each profile still calls through its own session (no `share`): sharing discovery shares no session.
  t.is(textOf(await h.callTool('tenant4', 'fx1', 'echo', { text: 'four' })), 'four');
  t.is(textOf(await h.callTool('tenant5', 'fx2', 'echo', { text: 'five' })), 'five');
  t.is(gated.starts(), 3, 'two sessions, one per calling profile');
});

test('a recent result serves a profile that has not seen it; its own re-discovery asks the server again; an expired one is not used', async (t) => {
  const gated = await gatedServer(t);
  await gated.open();
  const clock = new ManualClock();
  const profiles = { a: { mcpServers: { fx: gated.server } }, b: { mcpServers: { fx: gated.server } }, c: { mcpServers: { fx: gated.server } } };
  const h = host(t, { profiles, clock, discovery: { shareForMs: 10_000 } });
  t.is((await h.ready('a')).status, 'ready');
  t.is(gated.starts(), 1);
  const b = await h.ready('b');
  t.is(b.status, 'ready');
  t.is(b.servers['fx']?.status, 'ready');
  t.is(gated.starts(), 1, 'b got a\'s result of a moment ago');
  t.is(h.stats().discovery.sharing?.reused, 1);
  t.true((await h.beginTurn('b')).tools.some((tool) => tool.name === 'mcp__fx__echo'));

  t.is((await h.retry('b')).status, 'ready');
  t.is(gated.starts(), 2, 'b\'s retry asked the server itself');

  await clock.advance(10_001);
  t.is((await h.ready('c')).status, 'ready');
  t.is(gated.starts(), 3, 'the remembered result had expired: c discovered the server itself');
});

test('shareDiscovery: false, and a client that differs by profile (an elicitation handler), each keep discovery per profile', async (t) => {
  for (const variant of ['opt-out', 'handler'] as const) {
    const gated = await gatedServer(t, variant === 'opt-out' ? { shareDiscovery: false } : {});
    const profiles = { a: { mcpServers: { fx: gated.server } }, b: { mcpServers: { fx: gated.server } }, c: { mcpServers: { fx: gated.server } } };
    const h = host(t, {
      profiles,
      ...(variant === 'handler' ? { client: { elicitation: () => ({ action: 'decline' as const }) } } : {}),
    });
    const started = startsOf(h, 3);
    const ready = Promise.all(['a', 'b', 'c'].map((name) => h.ready(name)));
    await started;
    await gated.open();
    for (const view of await ready) t.is(view.status, 'ready', variant);
    t.is(gated.starts(), 3, `${variant}: every profile discovered the server itself`);
    t.is(h.stats().discovery.sharing?.joined, 0, variant);
  }
});

test('the leader is retired mid-flight (reload removes its server): its body and process stop, the follower still gets the server through a re-homed discovery', async (t) => {
  const gated = await gatedServer(t);
  const h = host(t, { profiles: { lead: { mcpServers: { fx: gated.server } }, follow: { mcpServers: { fx: gated.server } } }, discovery: { shareForMs: 0 } });
  const started = startsOf(h, 2);
  const leadReady = h.ready('lead');
  const followReady = h.ready('follow');
  // Awaited below; observed now so that a failed assertion in between does not add an unhandled rejection.
  for (const pending of [leadReady, followReady]) pending.catch(() => undefined);
  const [leader] = await started;
  t.true(await pollUntil(() => gated.shells().length === 1, { timeoutMs: 30_000 }), 'the leader\'s discovery is waiting at the gate');
  const leaderPid = gated.shells()[0]!;
  t.is(procState(leaderPid), 'alive');

  const { changes } = await h.reload(leader!, { profiles: { [leader!]: { mcpServers: {} }, [leader === 'lead' ? 'follow' : 'lead']: { mcpServers: { fx: gated.server } } } });
  t.deepEqual(changes.find((change) => change.key === leader)?.removed, ['fx']);
  t.not(procState(leaderPid), 'alive', 'the retired leader\'s process is gone once reload returned');
  t.is(h.stats().discovery.sharing?.rehomed, 1);

  await gated.open();
  const follower = leader === 'lead' ? followReady : leadReady;
  const view = await follower;
  t.is(view.status, 'ready', JSON.stringify(view.servers));
  t.is(gated.starts(), 1, 'one process reached the server: the re-homed discovery\'s');
  t.is((await (leader === 'lead' ? leadReady : followReady)).status, 'ready', 'the reloaded leader has no servers left');
  t.true(await pollUntil(() => h.stats().discovery.liveOwners === 0), 'the re-homed body is retired once done');
});

test('HTTP: a follower never resumes the leader\'s discovery session; each profile initialises its own', async (t) => {
  const tag = useFixtureTag(t);
  const fixture = await startHttpFixture([], { tag });
  t.teardown(() => fixture.stop());
  const server = { url: fixture.url };
  const h = host(t, { profiles: { a: { mcpServers: { web: server } }, b: { mcpServers: { web: server } } }, discovery: { shareForMs: 60_000 } });
  t.is((await h.ready('a')).status, 'ready');
  t.is((await h.ready('b')).status, 'ready');
  t.is(h.stats().discovery.sharing?.reused, 1, 'b used a\'s discovery');
  t.is((await fixture.stats()).initializes, 1, 'one discovery reached the server');
  t.is(textOf(await h.callTool('a', 'web', 'echo', { text: 'a' })), 'a');
  t.is(textOf(await h.callTool('b', 'web', 'echo', { text: 'b' })), 'b');
  const stats = await fixture.stats();
  t.is(stats.initializes, 2, 'a resumed its own discovery session; b initialised one of its own');
  t.is(stats.sessions, 2);
});

// ---------------------------------------------------------------- warm sessions and discovery

test('warm sessions spawn once discovery is quiet: a profile settled while another is still discovering connects only after that one settled; ready() does not wait for quiet', async (t) => {
  const gated = await gatedServer(t);
  const tag = useFixtureTag(t);
  const clock = new ManualClock();
  // Warm sessions on (the default); the manual clock keeps the bounded deferral from ending it.
  const h = host(t, {
    clock,
    sessions: { eager: true },
    // One thread per profile: the gated discovery must not hold up the others' bodies.
    discovery: { maxThreads: 3 },
    profiles: {
      quick: { mcpServers: { fx: { command: process.execPath, args: [STDIO_FIXTURE], env: { MCP_FIXTURE_TAG: tag } } } },
      slow: { mcpServers: { gated: gated.server } },
      other: { mcpServers: { fx2: { command: process.execPath, args: [STDIO_FIXTURE, '--tools', '1'], env: { MCP_FIXTURE_TAG: tag } } } },
    },
  });
  const order: string[] = [];
  h.on('discovery:settled', (event) => order.push(`settled ${event.key}`));
  h.on('server:connected', (event) => order.push(`connected ${event.server}`));
  const slowStarted = startsOf(h, 1);
  const slowReady = h.ready('slow');
  await slowStarted;
  t.is((await h.beginTurn('quick')).status, 'ready');
  // ready() of a third profile while `slow` is still gated: its session comes up without waiting for quiet.
  t.is((await h.ready('other')).status, 'ready');
  t.true(order.includes('connected fx2'), JSON.stringify(order));
  t.false(order.includes('connected fx'), `the quick profile's warm session waited: ${JSON.stringify(order)}`);
  const connected = new Promise<void>((resolve) => {
    const off = h.on('server:connected', (event) => {
      if (event.server !== 'fx') return;
      off();
      resolve();
    });
  });
  await gated.open();
  await slowReady;
  await connected;
  t.true(order.indexOf('settled slow') < order.indexOf('connected fx'), JSON.stringify(order));
});
