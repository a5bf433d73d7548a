/**
 * Redaction of secrets for messages and logs. Environment variables and HTTP headers are where
 * users put API keys and tokens, so their *values* never leave the config model in text form; URLs
 * lose their password and any query value whose name looks like a credential.
 */
import type { ServerConfig } from './types.js';

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]';

const SECRET_QUERY_NAME = /key|token|secret|pass|auth|sig|session|code|credential/i;

/** Returns `url` with its password and credential-like query values replaced. Invalid URLs are fully redacted. */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return REDACTED;
  }
  if (parsed.password) parsed.password = 'redacted';
  for (const name of [...parsed.searchParams.keys()]) {
    if (SECRET_QUERY_NAME.test(name)) parsed.searchParams.set(name, 'redacted');
  }
  return parsed.toString();
}

/** Replaces every value of a record (env or headers) by {@link REDACTED}, keeping the names. */
export function redactValues(record: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.keys(record).map((name) => [name, REDACTED]));
}

/** A copy of a server config that is safe to print or log. */
export function redactServer(server: ServerConfig): Record<string, unknown> {
  if (server.transport === 'stdio') {
    return { ...server, env: redactValues(server.env) };
  }
  return { ...server, url: redactUrl(server.url), headers: redactValues(server.headers) };
}

/** A one-line, secret-free description of where a server lives (for tables and messages). */
export function describeServerTarget(server: ServerConfig): string {
  if (server.transport === 'stdio') return [server.command, ...server.args].join(' ');
  return redactUrl(server.url);
}
