/**
 * The one vocabulary host and discovery options are validated with. Every refusal is an
 * `INVALID_CONFIG` error reading "Expected `<option>` to be <expectation>, got <what came>", with
 * the option named as the host spells it (`discovery.maxThreads`, `client.roots[2].uri`), so the
 * host can find the culprit in its own code. Hosts and tests match these messages: keep them.
 *
 * What a refused value is shown as depends on what it is: a scalar is shown with its type
 * (`` `-5` (number) ``), a choice as given (`` `loud` ``), and a structured value only by its kind
 * (`object`, `array`, `null`) — an object or a handler may hold a secret, and its text is no help.
 */
import { McpSupervisorError } from './errors.js';

/** The refusal of one option; `got` is already formatted (see the helpers below). */
export function optionError(name: string, expected: string, got: string): McpSupervisorError {
  return new McpSupervisorError('INVALID_CONFIG', `Expected \`${name}\` to be ${expected}, got ${got}`);
}

/** The refusal of a structured value (object, function, array…): only its kind is shown. */
export function shapeError(name: string, expected: string, value: unknown): McpSupervisorError {
  const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  return optionError(name, expected, kind);
}

function shownWithType(value: unknown): string {
  return `\`${String(value)}\` (${typeof value})`;
}

/** Bounds of an integer option. */
export interface IntegerRule {
  /** Smallest accepted value: 1 (default) or 0 where zero means something ("off", "no delay"). */
  min?: 0 | 1;
  /** Largest accepted value. Default: none. */
  max?: number;
  /** The expectation as the message states it. Default: "a positive/non-negative integer[ up to max]". */
  expected?: string;
}

/**
 * An integer option: `fallback` when it is undefined, the value itself when it is an integer
 * within the rule's bounds.
 * @throws McpSupervisorError `INVALID_CONFIG` naming the option
 */
export function integerOption(name: string, value: unknown, fallback: number, rule: IntegerRule = {}): number {
  if (value === undefined) return fallback;
  const { min = 1, max = Number.POSITIVE_INFINITY } = rule;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    // A bound at the edge of exact integers is a technicality, not worth stating in the message.
    const upTo = max < Number.MAX_SAFE_INTEGER ? ` up to ${max}` : '';
    throw optionError(name, rule.expected ?? `${min === 0 ? 'a non-negative' : 'a positive'} integer${upTo}`, shownWithType(value));
  }
  return value;
}

/**
 * A hard cap checked after {@link integerOption}: said as "at most", since the value is a fine
 * integer that is merely too large for what the host can carry.
 */
export function atMost(name: string, value: number, max: number): number {
  if (value > max) throw optionError(name, `at most ${max}`, shownWithType(value));
  return value;
}

/**
 * One of a fixed set of strings; undefined stays undefined (the caller's default).
 * @throws McpSupervisorError `INVALID_CONFIG` listing the choices
 */
export function oneOf<T extends string>(name: string, value: T, choices: readonly T[]): T;
export function oneOf<T extends string>(name: string, value: T | undefined, choices: readonly T[]): T | undefined;
export function oneOf<T extends string>(name: string, value: T | undefined, choices: readonly T[]): T | undefined {
  if (value === undefined || (choices as readonly unknown[]).includes(value)) return value;
  throw optionError(name, `one of ${choices.map((choice) => `"${choice}"`).join(', ')}`, `\`${String(value)}\``);
}
