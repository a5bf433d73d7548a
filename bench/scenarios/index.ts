/**
 * The registry of bench scenarios, in the order they run. To add one: write
 * `bench/scenarios/<name>.ts` exporting a `Scenario` (see `bench/lib/types.ts`) and list it here.
 */
import type { Scenario } from '../lib/types.js';
import { eventLoopScenario } from './event-loop.js';
import { quiesceScenario } from './quiesce.js';

/** Every scenario, in run order. */
export const scenarios: readonly Scenario[] = [quiesceScenario, eventLoopScenario];
