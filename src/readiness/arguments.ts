/**
 * Tool arguments are checked before anything is sent: MCP's `arguments` is a JSON object, and a
 * value JSON cannot carry (a bigint, a symbol, a function, a cycle, NaN) would otherwise throw
 * deep inside the SDK's serialisation — or, worse, be silently dropped or changed on the way to a
 * tool that may not be safe to run twice.
 */
import { McpSupervisorError } from '../errors.js';

/** Nesting allowed in arguments (a model never needs more; a cycle-free walk must end somewhere). */
const MAX_ARGUMENT_DEPTH = 100;

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') {
    const prototype = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
    return prototype === null || prototype === Object.prototype ? 'an object' : `a ${prototype.constructor?.name ?? 'non-plain'} object`;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? 'a number' : String(value);
  return `a ${typeof value}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** Why `value` (at `path`) cannot travel as JSON, or undefined when it can. Iterative, cycle-aware. */
function problemIn(root: unknown): string | undefined {
  // Each frame is entered once and left once, so an object on the current path is a cycle.
  const onPath = new Set<object>();
  const stack: { value: unknown; path: string; depth: number; leave?: object }[] = [{ value: root, path: 'arguments', depth: 0 }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (frame.leave) {
      onPath.delete(frame.leave);
      continue;
    }
    const { value, path, depth } = frame;
    if (value === null || typeof value === 'string' || typeof value === 'boolean') continue;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) return `\`${path}\` is ${String(value)}, which JSON cannot carry`;
      continue;
    }
    if (value === undefined) continue; // Dropped by JSON, as the caller would expect of an optional field.
    if (typeof value !== 'object') return `\`${path}\` is ${kindOf(value)}, which JSON cannot carry`;
    if (onPath.has(value)) return `\`${path}\` refers back to an enclosing value (a cycle)`;
    if (depth >= MAX_ARGUMENT_DEPTH) return `\`${path}\` nests deeper than ${MAX_ARGUMENT_DEPTH} levels`;
    if (!Array.isArray(value) && !isPlainObject(value)) return `\`${path}\` is ${kindOf(value)}, not plain JSON data`;
    if (Object.getOwnPropertySymbols(value).length > 0) return `\`${path}\` has symbol keys, which JSON cannot carry`;
    onPath.add(value);
    stack.push({ value: undefined, path, depth, leave: value });
    const entries: [string, unknown][] = Array.isArray(value) ? value.map((item, index) => [`[${index}]`, item]) : Object.entries(value).map(([key, item]) => [`.${key}`, item]);
    for (const [suffix, item] of entries) stack.push({ value: item, path: `${path}${suffix}`, depth: depth + 1 });
  }
  return undefined;
}

/**
 * Returns `args` when it is a plain JSON object.
 * @throws McpSupervisorError `INVALID_ARGUMENTS` naming what is wrong and where, before anything is sent
 */
export function checkArguments(args: unknown, subject: { profile: string; server?: string; tool: string }): Record<string, unknown> {
  const fail = (problem: string): McpSupervisorError => {
    const text = `The arguments of "${subject.tool}" were not sent: ${problem}. Arguments must be a JSON object.`;
    return new McpSupervisorError('INVALID_ARGUMENTS', text, {
      profile: subject.profile,
      ...(subject.server === undefined ? {} : { server: subject.server }),
      modelText: text,
      retryable: false,
      data: { tool: subject.tool },
    });
  };
  if (!isPlainObject(args)) throw fail(`they are ${kindOf(args)}`);
  const problem = problemIn(args);
  if (problem !== undefined) throw fail(problem);
  return args;
}
