/**
 * Config validation problems: how one is described (what was expected, what was received) and the
 * INVALID_CONFIG error that lists them all.
 *
 * Descriptions never echo a secret: values under `env` and `headers` are never shown (not even
 * their type's content), secret-looking keys are redacted, and strings lose URL credentials and
 * every registered secret before they are quoted.
 */
import type { z } from 'zod';
import { McpSupervisorError } from '../errors.js';
import { REDACTED, SECRET_FIELD_NAME, redactUrlText, redactValues, scrubText } from './redact.js';

/** One validation problem, as reported in `error.data.issues`. */
export interface ConfigIssue {
  /** Server name, when the problem is inside one server. */
  server?: string;
  /** Dotted field path inside the server (or the document when `server` is absent). */
  field: string;
  /** What was wrong, including what was expected and what was received. */
  problem: string;
}

/** Fields whose values may hold secrets: problems there never show the received value. */
const SECRET_FIELDS = new Set(['env', 'headers']);

/** True for fields whose value is a secret (`env.X`, `headers.X`). */
export function isSecretField(field: string): boolean {
  return SECRET_FIELDS.has(field.split('.')[0]!);
}

/**
 * A copy of a received value that is safe to show: values under `env`/`headers` keys or under a
 * secret-looking key are redacted, strings lose URL credentials and registered secrets.
 */
function redactForDisplay(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactUrlText(value);
  if (typeof value !== 'object' || value === null) return value;
  if (depth > 8) return REDACTED;
  if (Array.isArray(value)) return value.map((item) => redactForDisplay(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (SECRET_FIELDS.has(key)) out[key] = typeof inner === 'object' && inner !== null && !Array.isArray(inner) ? redactValues(inner as Record<string, string>) : REDACTED;
    else if (SECRET_FIELD_NAME.test(key)) out[key] = REDACTED;
    else out[key] = redactForDisplay(inner, depth + 1);
  }
  return out;
}

/** How a problem shows what it received: a short redacted rendering, or only its type when `secret`. */
export function describeReceived(value: unknown, secret: boolean): string {
  const type = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  if (secret) return `a redacted ${type}`;
  if (value === undefined) return 'nothing';
  let shown: string;
  try {
    shown = JSON.stringify(redactForDisplay(value)) ?? String(value);
  } catch {
    shown = scrubText(String(value));
  }
  if (shown.length > 60) shown = `${shown.slice(0, 57)}...`;
  return `\`${shown}\` (${type})`;
}

function describeExpected(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int') return 'an integer';
      if (issue.expected === 'record' || issue.expected === 'object') return 'an object';
      if (issue.expected === 'array') return 'an array';
      return `a ${issue.expected}`;
    case 'too_small':
      return issue.origin === 'string' ? 'a non-empty string' : issue.origin === 'number' ? 'a positive number' : issue.message;
    case 'invalid_value':
      return `one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`;
    case 'invalid_union':
      return 'a string, number or boolean';
    default:
      return issue.message;
  }
}

function formatPath(path: readonly PropertyKey[], whole: string): string {
  let text = '';
  for (const part of path) {
    if (typeof part === 'number') text += `[${part}]`;
    else text += text === '' ? String(part) : `.${String(part)}`;
  }
  return text || whole;
}

/** The schema problems of the document (`server` undefined) or of one server, as issues. */
export function issuesFromZod(error: z.ZodError, server: string | undefined): ConfigIssue[] {
  return error.issues.map((issue) => {
    const secret = SECRET_FIELDS.has(String(issue.path[0]));
    const received = 'input' in issue ? issue.input : undefined;
    const issueOut: ConfigIssue = {
      field: formatPath(issue.path, server === undefined ? '(document)' : '(server)'),
      problem: issue.code === 'custom' ? issue.message : `expected ${describeExpected(issue)}, got ${describeReceived(received, secret)}`,
    };
    if (server !== undefined) issueOut.server = server;
    return issueOut;
  });
}

/** Builds the INVALID_CONFIG error that lists every issue, the first one in the message. */
export function invalidConfigError(context: { profile: string; file?: string }, issues: readonly ConfigIssue[]): McpSupervisorError {
  const where = (issue: ConfigIssue): string =>
    [
      context.file === undefined ? undefined : `file ${context.file}`,
      `profile "${context.profile}"`,
      issue.server === undefined ? undefined : `server "${issue.server}"`,
      `field \`${issue.field}\``,
    ]
      .filter((part) => part !== undefined)
      .join(', ');
  const first = issues[0];
  const lines = issues.map((issue) => `${where(issue)}: ${issue.problem}`);
  const message =
    first === undefined
      ? `Invalid config for profile "${context.profile}"`
      : `Invalid config: ${where(first)}: ${first.problem}` + (issues.length > 1 ? ` (and ${issues.length - 1} more: ${lines.slice(1).join('; ')})` : '');
  const data: Record<string, unknown> = { issues: issues.map((issue) => ({ ...issue })) };
  if (context.file !== undefined) data['file'] = context.file;
  const server = first?.server;
  return new McpSupervisorError('INVALID_CONFIG', message, {
    profile: context.profile,
    ...(server === undefined ? {} : { server }),
    data,
  });
}
