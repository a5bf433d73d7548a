/**
 * Option and argument checks of the gateway module.
 *
 * They throw `INVALID_CONFIG` with the p-queue style message (what was expected, what was
 * received), so a host learns about a bad watchdog or gateway option at construction time
 * rather than from a watchdog that silently never fires.
 */
import { McpSupervisorError } from '../errors.js';

function describe(value: unknown): string {
  let shown: string;
  try {
    shown = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    shown = String(value);
  }
  return `\`${shown}\` (${value === null ? 'null' : typeof value})`;
}

/** Throws unless `value` is a finite number ≥ 0 (or ≥ `min` when given); returns it. */
export function nonNegativeMs(name: string, value: unknown, min = 0): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    const expected = min === 0 ? 'a finite number of milliseconds ≥ 0' : `a finite number of milliseconds ≥ ${min}`;
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be ${expected}, got ${describe(value)}`);
  }
  return value;
}

/** Throws unless `value` is a finite number > 0; returns it. */
export function positiveNumber(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be a finite number > 0, got ${describe(value)}`);
  }
  return value;
}

/** Throws unless `value` is a non-empty string; returns it. */
export function nonEmptyString(name: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

/** Throws unless `value` is a function; returns it. */
export function isFunction<T>(name: string, value: T): T {
  if (typeof value !== 'function') {
    throw new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be a function, got ${describe(value)}`);
  }
  return value;
}
