/**
 * Parking and revival through `createHost` on a manual clock: a server whose reconnect budget is
 * spent parks (its loop stays alive, probing), its tools leave new turns, and it comes back by
 * its periodic probe or at once on a signal, its tools back in the next turn.
 */
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { Host } from '../../src/host.js';
import { ManualClock } from '../helpers/clock.js';
import { stdioFixtureConfig, useFixtureTag } from '../helpers/fixtures.js';
import { StartPlan, callError, guardOpenHandles, newHost, nextEvent, sessionStats, textOf } from './helpers.js';

guardOpenHandles(test);

const PROBE_MS = 60_000;

/** A host whose `fx` answered once, exited, and crash-loops until the budget (2) is spent. */
async function parkedHost(t: ExecutionContext): Promise<{ plan: StartPlan; clock: ManualClock; host: Host; before: Awaited<ReturnType<Host['beginTurn']>> }> {
  const tag = useFixtureTag(t);
  // Start 1: discovery; start 2: the first session, which exits after one answer; then a crash loop.
  const plan = await StartPlan.create(t, tag, ['--crash-loop']);
  plan.set(1, []);
  plan.set(2, ['--die-after-calls', '1']);
  const clock = new ManualClock();
  const host = newHost(
    t,
    { fx: plan.config(), other: stdioFixtureConfig([], { tag }) },
    { clock, random: () => 0.5, sessions: { reconnectBudget: 2, backoffBaseMs: 1000, backoffMaxMs: 1000, parkProbeIntervalMs: PROBE_MS }, breaker: { failureThreshold: 100 } },
  );
  const before = await host.beginTurn();
  t.true(before.tools.some((tool) => tool.name === 'mcp__fx__echo'));
  const exited = nextEvent(host, 'server:exited');
  t.is(textOf(await before.callTool('mcp__fx__echo', { text: 'last good answer' })), 'last good answer');
  await exited;

  const parked = nextEvent(host, 'server:parked');
  await callError(t, before.callTool('mcp__fx__echo', { text: 'x' }), 'SERVER_EXITED_AGAIN');
  // The loop retries by itself after its backoff, and that second failure spends the budget.
  await clock.advance(1000);
  const { nextProbeAt } = await parked;
  t.is(plan.starts(), 4);
  // Parked when that attempt failed, at the backoff's expiry or later: the probe is due within
  // one interval from now.
  t.true(nextProbeAt > clock.now() && nextProbeAt <= clock.now() + PROBE_MS);
  const stats = sessionStats(host, 'fx');
  t.is(stats.state, 'parked');
  t.is(stats.nextProbeAt, nextProbeAt);
  t.true(clock.pending() > 0, 'parked, the loop is alive: its probe is scheduled');
  return { plan, clock, host, before };
}

function toolNames(turn: { tools: readonly { name: string }[] }): string[] {
  return turn.tools.map((tool) => tool.name);
}

test('budget spent → parked: tools leave new turns (an old turn keeps them and gets SERVER_PARKED), the periodic probe revives it', async (t) => {
  const { plan, clock, host, before } = await parkedHost(t);
  const during = await host.beginTurn();
  t.false(toolNames(during).some((name) => name.startsWith('mcp__fx__')));
  t.true(toolNames(during).includes('mcp__other__echo'));
  t.like(during.failed.find((entry) => entry.server === 'fx'), { kind: 'parked' });
  t.true(toolNames(before).includes('mcp__fx__echo'), 'a turn already handed out is frozen');
  const parkedError = await callError(t, before.callTool('mcp__fx__echo', { text: 'x' }), 'SERVER_PARKED');
  t.regex(parkedError.modelText, /parked/);
  t.is(plan.starts(), 4, 'a parked server is not started for a call');
  t.is(textOf(await during.callTool('mcp__other__echo', { text: 'fine' })), 'fine');

  // A probe while the server is still down: one attempt, parked again.
  const parkedAgain = nextEvent(host, 'server:parked');
  await clock.advance(PROBE_MS);
  await parkedAgain;
  t.is(plan.starts(), 5);
  t.false(toolNames(await host.beginTurn()).includes('mcp__fx__echo'));

  // The server is back: the next periodic probe revives it and its tools return.
  plan.set('default', []);
  const revived = nextEvent(host, 'server:revived');
  await clock.advance(PROBE_MS);
  await revived;
  const after = await host.beginTurn();
  t.true(toolNames(after).includes('mcp__fx__echo'));
  t.is(after.failed.length, 0);
  t.is(textOf(await after.callTool('mcp__fx__echo', { text: 'back' })), 'back');
  t.is(sessionStats(host, 'fx').state, 'ready');
});

test('parked server revives at once on a signal (host.retry), tools back in the next turn', async (t) => {
  const { plan, host } = await parkedHost(t);
  t.false(toolNames(await host.beginTurn()).includes('mcp__fx__echo'));
  plan.set('default', []);
  const revived = nextEvent(host, 'server:revived');
  await host.retry();
  await revived;
  const after = await host.beginTurn();
  t.true(toolNames(after).includes('mcp__fx__echo'));
  t.is(textOf(await after.callTool('mcp__fx__echo', { text: 'back' })), 'back');
});

test('a parked server through host.callTool (no turn): SERVER_PARKED with the next probe time, never UNKNOWN_TOOL', async (t) => {
  const { plan, host } = await parkedHost(t);
  const nextProbeAt = sessionStats(host, 'fx').nextProbeAt;
  const error = await callError(t, host.callTool(undefined, 'fx', 'echo', { text: 'x' }), 'SERVER_PARKED');
  t.is(error.data?.['nextProbeAt'], nextProbeAt);
  t.true(error.retryable);
  t.is(plan.starts(), 4, 'nothing was started for it');
  await callError(t, host.callTool(undefined, 'fx', 'no_such_tool', {}), 'SERVER_PARKED');
  await callError(t, host.callTool(undefined, 'nope', 'echo', {}), 'UNKNOWN_SERVER');
});
