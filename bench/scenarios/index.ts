/**
 * The registry of bench scenarios, in the order they run. To add one: write
 * `bench/scenarios/<name>.ts` exporting a `Scenario` (see `bench/lib/types.ts`) and list it here.
 */
import type { Scenario } from '../lib/types.js';
import { callScenario } from './call.js';
import { erasScenario } from './eras.js';
import { eventLoopScenario } from './event-loop.js';
import { firstCallScenario } from './first-call.js';
import { firstTurnScenario } from './first-turn.js';
import { floodScenario } from './flood.js';
import { lifelineScenario } from './lifeline.js';
import { memoryScenario } from './memory.js';
import { quiesceScenario } from './quiesce.js';
import { redisScenario } from './redis.js';
import { scaleScenario } from './scale.js';
import { sharedDiscoveryScenario } from './shared-discovery.js';
import { turnScenario } from './turn.js';

/** Every scenario, in run order. */
export const scenarios: readonly Scenario[] = [
  quiesceScenario,
  eventLoopScenario,
  turnScenario,
  firstTurnScenario,
  firstCallScenario,
  callScenario,
  erasScenario,
  sharedDiscoveryScenario,
  memoryScenario,
  scaleScenario,
  lifelineScenario,
  floodScenario,
  redisScenario,
];
