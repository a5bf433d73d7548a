/**
 * Letting the previous measurement's garbage go before the next window opens, so one run's GC
 * pause never lands in another run's window. Needs `node --expose-gc` (as `npm run bench` runs);
 * without it this only waits.
 */
import { sleep } from './wait.js';

/** True when a forced GC is available. */
export function canForceGc(): boolean {
  return typeof (globalThis as { gc?: unknown }).gc === 'function';
}

/** Forces full GCs (if available) and lets timers and I/O drain for `ms`. */
export async function settleHeap(ms = 100): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let index = 0; index < 2; index++) {
    gc?.();
    await sleep(ms / 2);
  }
}
