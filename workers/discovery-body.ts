/**
 * The piscina worker entry for discovery bodies. Kept to one line of wiring so the body's logic
 * lives (and is tested) in `src/discovery/body.ts`.
 */
import { runDiscoveryBody } from '../src/discovery/body.js';

export default runDiscoveryBody;
