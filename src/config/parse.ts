/**
 * Parsing of user configs into {@link ProfileConfig}. Accepts the shapes users already write:
 *
 * - Claude Desktop / Cursor / `.mcp.json`: `{ "mcpServers": { name: { command, args, env, cwd } | { url, headers } } }`
 *   (`.mcp.json` adds an optional `"type"`);
 * - VS Code: `{ "servers": { name: { "type": "stdio" | "http" | "sse", … } } }`, or the same under `"mcp"`
 *   in a settings file.
 *
 * Validation collects every problem before failing, and the result is built only when there are
 * none, so a bad config is never half-applied. Each problem names the file (when there is one),
 * the profile, the server and the field, with what was expected and what was received.
 *
 * Secrets. Values of `env` and `headers` are never echoed (not even the `:-default` of a
 * placeholder in them), nor are a URL's userinfo or secret-looking query values, even in a URL
 * that does not parse. Parsing also *registers* every secret of the config with the scrubber of
 * `redact.ts` (env and header values, URL credentials, secret query values, values of
 * `${SECRET_NAMED_VAR}` placeholders wherever they are expanded), so text that comes back later
 * (a `fetch` error, a server's stderr) is scrubbed at every exit of the library.
 *
 * The server builder (transports, `${VAR}` expansion, URL credentials) is `build-server.ts`; how
 * problems are described, and the INVALID_CONFIG error listing them, is `issues.ts`.
 */
import { deepFreeze } from '../freeze.js';
import { z } from 'zod';
import type { Environment } from './expand.js';
import { buildServer, rawServerSchema } from './build-server.js';
import { type ConfigIssue, describeReceived, invalidConfigError, issuesFromZod } from './issues.js';
import { registerServerSecrets } from './redact.js';
import type { ProfileConfig, ServerConfig } from './types.js';

export { invalidConfigError, type ConfigIssue } from './issues.js';

/** Where a config came from, for error messages and `${workspaceFolder}`. */
export interface ParseContext {
  /** Canonical profile key (or name) the config is for. */
  profile: string;
  /** The file it was read from, if any. */
  file?: string;
  /** Variables for `${VAR}` expansion; defaults to `process.env`. */
  env?: Environment;
  /** Directory `${workspaceFolder}` expands to; defaults to the file's folder (the parent of `.vscode`). */
  workspaceFolder?: string;
}

const serverMapSchema = z.record(z.string(), z.unknown());
const documentSchema = z.looseObject({
  mcpServers: serverMapSchema.optional(),
  servers: serverMapSchema.optional(),
  mcp: z.looseObject({ servers: serverMapSchema.optional() }).optional(),
});

/**
 * `__proto__` cannot be a server name: every JS object (the parsed document included) treats the
 * key as its prototype, so such a server would silently vanish somewhere downstream. It is
 * refused, naming the field. (`constructor`, `toString`… are ordinary names: lookups use own keys.)
 */
function reservedServerNames(document: unknown): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const raw = document as Record<string, unknown>;
  const maps: [string, unknown][] = [
    ['mcpServers', raw['mcpServers']],
    ['servers', raw['servers']],
    ['mcp.servers', (raw['mcp'] as Record<string, unknown> | undefined)?.['servers']],
  ];
  for (const [field, map] of maps) {
    if (typeof map === 'object' && map !== null && Object.hasOwn(map, '__proto__')) {
      issues.push({ server: '__proto__', field, problem: 'expected a server name other than `__proto__` (a reserved JavaScript key), got `__proto__`' });
    }
  }
  return issues;
}

/** Marks configs this module built, so re-parsing one is a no-op rather than a second expansion. */
const PARSED = Symbol.for('mcp-supervisor.profile-config');

/** True for a {@link ProfileConfig} produced by {@link parseProfileConfig}. */
export function isParsedProfileConfig(value: unknown): value is ProfileConfig {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PARSED] === true;
}


function workspaceFolderOf(context: ParseContext): string | undefined {
  if (context.workspaceFolder !== undefined) return context.workspaceFolder;
  if (context.file === undefined) return undefined;
  const parts = context.file.split('/');
  parts.pop();
  if (parts.at(-1) === '.vscode' || parts.at(-1) === '.cursor') parts.pop();
  return parts.join('/') || '/';
}

/**
 * Validates and normalises one profile's config document.
 * @throws McpSupervisorError `INVALID_CONFIG` listing every problem; nothing is returned half-built.
 */
export function parseProfileConfig(document: unknown, context: ParseContext): ProfileConfig {
  if (isParsedProfileConfig(document)) {
    // Already registered when it was parsed; registering again keeps its secrets from being the
    // first ones dropped from the bounded registry.
    for (const server of Object.values(document.servers)) registerServerSecrets(server);
    return document;
  }
  const env = context.env ?? process.env;
  const workspaceFolder = workspaceFolderOf(context);
  const extra: Environment = {
    ...(workspaceFolder === undefined ? {} : { workspaceFolder }),
    ...(process.env['HOME'] === undefined ? {} : { userHome: process.env['HOME'] }),
  };
  const issues: ConfigIssue[] = [];
  const top = documentSchema.safeParse(document, { reportInput: true });
  if (!top.success) throw invalidConfigError(context, issuesFromZod(top.error, undefined));
  const reserved = reservedServerNames(document);
  if (reserved.length > 0) throw invalidConfigError(context, reserved);

  const sources = [
    ['mcpServers', top.data.mcpServers],
    ['servers', top.data.servers],
    ['mcp.servers', top.data.mcp?.servers],
  ] as const;
  const present = sources.filter(([, map]) => map !== undefined);
  if (present.length === 0) {
    issues.push({ field: 'mcpServers', problem: `expected an object with \`mcpServers\` (Claude Desktop, Cursor, .mcp.json) or \`servers\` (VS Code), got ${describeReceived(Object.keys(top.data), false)} as keys` });
    throw invalidConfigError(context, issues);
  }

  const servers: Record<string, ServerConfig> = {};
  const seen = new Set<string>();
  for (const [field, map] of present) {
    for (const [name, rawServer] of Object.entries(map ?? {})) {
      if (seen.has(name)) {
        issues.push({ server: name, field, problem: 'expected each server name once, got a second definition' });
        continue;
      }
      seen.add(name);
      if (name.trim() === '') {
        issues.push({ server: name, field, problem: 'expected a non-empty server name' });
        continue;
      }
      const parsed = rawServerSchema.safeParse(rawServer, { reportInput: true });
      if (!parsed.success) {
        issues.push(...issuesFromZod(parsed.error, name));
        continue;
      }
      const server = buildServer(parsed.data, { server: name, issues, env, extra });
      if (server !== undefined) servers[name] = server;
    }
  }
  if (issues.length > 0) throw invalidConfigError(context, issues);
  const config: ProfileConfig = context.file === undefined ? { servers } : { file: context.file, servers };
  Object.defineProperty(config, PARSED, { value: true });
  return deepFreeze(config);
}
