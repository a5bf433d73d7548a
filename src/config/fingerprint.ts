/**
 * Server fingerprints: a stable hash of exactly what defines a connection. Two servers with the
 * same fingerprint are the same server (they may share one session across profiles when they opt
 * in), and a reload compares fingerprints to tell changed servers from untouched ones.
 *
 * Options that do not change *what* is connected to (timeouts, `share`, `disabled`, the name) are
 * deliberately left out, so tuning a timeout does not restart a server. Key order in env/headers
 * does not matter; header names are case-insensitive, env names are not.
 */
import { createHash } from 'node:crypto';
import { type ServerConfig, protocolSettingOf } from './types.js';

function sortedEntries(record: Readonly<Record<string, string>>, foldNames: boolean): [string, string][] {
  const entries = Object.entries(record).map(([name, value]): [string, string] => [foldNames ? name.toLowerCase() : name, value]);
  return entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The identity-defining part of a server config, in a canonical order. */
function identityOf(server: ServerConfig): unknown[] {
  if (server.transport === 'stdio') {
    return ['stdio', server.command, [...server.args], sortedEntries(server.env, false), server.cwd ?? null, protocolSettingOf(server)];
  }
  return [server.transport, server.url, sortedEntries(server.headers, true), protocolSettingOf(server)];
}

/**
 * A stable, secret-free fingerprint (hex SHA-256 prefix) of what defines the connection:
 * command, args, env and cwd for stdio; transport, url and headers for HTTP; the protocol setting.
 */
export function serverFingerprint(server: ServerConfig): string {
  // Configs are frozen once parsed, so the hash of a config object never changes: cache it (the
  // session layer asks on every tool call).
  const cached = fingerprints.get(server);
  if (cached !== undefined) return cached;
  const fingerprint = createHash('sha256').update(JSON.stringify(identityOf(server))).digest('hex').slice(0, 24);
  if (Object.isFrozen(server)) fingerprints.set(server, fingerprint);
  return fingerprint;
}

const fingerprints = new WeakMap<ServerConfig, string>();
