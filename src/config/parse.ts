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
 * URL credentials. `fetch` refuses a URL with userinfo (and its error quotes the whole URL,
 * password included), so `http://user:pass@host/path` is normalised here to the same URL without
 * userinfo plus an `Authorization: Basic base64(user:pass)` header (percent-escapes in the
 * userinfo decoded first; a URL with only a username gets `Basic base64(user:)`). That is what
 * browsers and curl send for such a URL. When the server also has an `Authorization` header
 * (any case), the config is refused with an issue on its `url` field: the library never silently
 * picks one of two credentials.
 */
import { z } from 'zod';
import { McpSupervisorError } from '../errors.js';
import { type Environment, ExpansionError, expandVariables } from './expand.js';
import {
  REDACTED,
  SECRET_FIELD_NAME,
  redactUrlText,
  redactValues,
  registerEnvSecret,
  registerHeaderSecret,
  registerSecret,
  registerServerSecrets,
  registerUrlSecrets,
  scrubText,
} from './redact.js';
import type { ProfileConfig, ServerConfig, TransportKind } from './types.js';
import type { ToolFilter } from './tool-filter.js';

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

/** One validation problem, as reported in `error.data.issues`. */
export interface ConfigIssue {
  /** Server name, when the problem is inside one server. */
  server?: string;
  /** Dotted field path inside the server (or the document when `server` is absent). */
  field: string;
  /** What was wrong, including what was expected and what was received. */
  problem: string;
}

const TRANSPORT_ALIASES: Record<string, TransportKind> = {
  stdio: 'stdio',
  http: 'http',
  'streamable-http': 'http',
  streamableHttp: 'http',
  sse: 'sse',
};

const scalarAsString = z.union([z.string(), z.number(), z.boolean()]).transform(String);
const positiveInt = z.number().int().positive();

const rawServerSchema = z.looseObject({
  type: z.enum(Object.keys(TRANSPORT_ALIASES) as [string, ...string[]]).optional(),
  transport: z.enum(Object.keys(TRANSPORT_ALIASES) as [string, ...string[]]).optional(),
  command: z.string().min(1).optional(),
  args: z.array(scalarAsString).optional(),
  env: z.record(z.string(), scalarAsString).optional(),
  cwd: z.string().min(1).optional(),
  url: z.string().min(1).optional(),
  headers: z.record(z.string(), z.string()).optional(),
  disabled: z.boolean().optional(),
  connectTimeoutMs: positiveInt.optional(),
  callTimeoutMs: positiveInt.optional(),
  share: z.boolean().optional(),
  shareDiscovery: z.boolean().optional(),
  // Strict: a typo in a security control ("exlude") must be an error, never a silent no-op.
  tools: z.strictObject({ include: z.array(z.string().min(1)).optional(), exclude: z.array(z.string().min(1)).optional() }).optional(),
  disabledTools: z.array(z.string().min(1)).optional(),
});
type RawServer = z.infer<typeof rawServerSchema>;

const serverMapSchema = z.record(z.string(), z.unknown());
const documentSchema = z.looseObject({
  mcpServers: serverMapSchema.optional(),
  servers: serverMapSchema.optional(),
  mcp: z.looseObject({ servers: serverMapSchema.optional() }).optional(),
});

/** Fields whose values may hold secrets: problems there never show the received value. */
const SECRET_FIELDS = new Set(['env', 'headers']);

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

function describeReceived(value: unknown, secret: boolean): string {
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

function issuesFromZod(error: z.ZodError, server: string | undefined): ConfigIssue[] {
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

function resolveTransport(raw: RawServer, server: string, issues: ConfigIssue[]): TransportKind | undefined {
  const declared = raw.type ?? raw.transport;
  const transport = declared === undefined ? undefined : TRANSPORT_ALIASES[declared];
  if (raw.command !== undefined && raw.url !== undefined) {
    issues.push({ server, field: 'command', problem: 'expected either `command` (stdio) or `url` (HTTP), got both' });
    return undefined;
  }
  if (raw.command === undefined && raw.url === undefined) {
    issues.push({ server, field: 'command', problem: 'expected `command` (stdio) or `url` (HTTP), got neither' });
    return undefined;
  }
  if (transport === 'stdio' && raw.command === undefined) {
    issues.push({ server, field: 'command', problem: `expected a command for type "${declared}", got a url` });
    return undefined;
  }
  if ((transport === 'http' || transport === 'sse') && raw.url === undefined) {
    issues.push({ server, field: 'url', problem: `expected a url for type "${declared}", got a command` });
    return undefined;
  }
  return transport ?? (raw.command !== undefined ? 'stdio' : 'http');
}

/** A placeholder's variable name (`${NAME}`, `${env:NAME}`, `${NAME:-default}`) and its default. */
const PLACEHOLDER = /\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Registers the values `${VAR}` placeholders with a secret-looking name expand to, in any field. */
function registerSecretVariables(text: string, env: Environment): void {
  if (!text.includes('${')) return;
  for (const match of text.matchAll(PLACEHOLDER)) {
    if (!SECRET_FIELD_NAME.test(match[1]!)) continue;
    const value = env[match[1]!];
    if (value !== undefined && value !== '') registerSecret(value, true);
    else if (match[2] !== undefined) registerSecret(match[2], true);
  }
}

/** True for fields whose value is a secret (`env.X`, `headers.X`). */
function isSecretField(field: string): boolean {
  return SECRET_FIELDS.has(field.split('.')[0]!);
}

/** Expands one field, recording an issue instead of throwing so every problem is reported at once. */
function expandField(text: string, field: string, server: string, issues: ConfigIssue[], env: Environment, extra: Environment): string {
  registerSecretVariables(text, env);
  try {
    return expandVariables(text, env, extra);
  } catch (error) {
    if (!(error instanceof ExpansionError)) throw error;
    // In a secret field even a malformed placeholder's text may be (part of) the secret.
    const problem = isSecretField(field) && error.reason === 'invalid' ? 'expected `${VAR}` placeholders with a valid variable name, got an invalid one (value not shown)' : error.message;
    issues.push({ server, field, problem });
    return text;
  }
}

function expandRecord(
  record: Record<string, string> | undefined,
  field: string,
  server: string,
  issues: ConfigIssue[],
  env: Environment,
  extra: Environment,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(record ?? {})) {
    out[name] = expandField(value, `${field}.${name}`, server, issues, env, extra);
  }
  return out;
}

/**
 * Moves a URL's userinfo into an `Authorization: Basic` header (see the module comment). Returns
 * the URL and headers to use; records an issue when the server already has an `Authorization`
 * header.
 */
function moveUserinfo(url: string, parsed: URL, headers: Record<string, string>, server: string, issues: ConfigIssue[]): { url: string; headers: Record<string, string> } {
  if (parsed.username === '' && parsed.password === '') return { url, headers };
  if (Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) {
    issues.push({
      server,
      field: 'url',
      problem:
        'expected credentials either in the URL (user:password@) or in an `Authorization` header, got both (URL credentials are sent as an `Authorization: Basic` header); remove one of them',
    });
    return { url, headers };
  }
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      return text;
    }
  };
  const basic = `Basic ${Buffer.from(`${decode(parsed.username)}:${decode(parsed.password)}`, 'utf8').toString('base64')}`;
  const stripped = new URL(parsed.href);
  stripped.username = '';
  stripped.password = '';
  return { url: stripped.href, headers: { ...headers, Authorization: basic } };
}

function buildServer(name: string, raw: RawServer, issues: ConfigIssue[], env: Environment, extra: Environment): ServerConfig | undefined {
  const transport = resolveTransport(raw, name, issues);
  if (transport === undefined) return undefined;
  const common = {
    name,
    disabled: raw.disabled ?? false,
    share: raw.share ?? false,
    shareDiscovery: raw.shareDiscovery ?? true,
    ...toolFilterOf(raw),
    ...(raw.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: raw.connectTimeoutMs }),
    ...(raw.callTimeoutMs === undefined ? {} : { callTimeoutMs: raw.callTimeoutMs }),
  };
  if (transport === 'stdio') {
    // Env first: its values are registered before any other field's problem is described.
    const serverEnv = expandRecord(raw.env, 'env', name, issues, env, extra);
    for (const [variable, value] of Object.entries(serverEnv)) registerEnvSecret(variable, value);
    const cwd = raw.cwd === undefined ? undefined : expandField(raw.cwd, 'cwd', name, issues, env, extra);
    return {
      ...common,
      transport,
      command: expandField(raw.command ?? '', 'command', name, issues, env, extra),
      args: (raw.args ?? []).map((arg, index) => expandField(arg, `args[${index}]`, name, issues, env, extra)),
      env: serverEnv,
      ...(cwd === undefined ? {} : { cwd }),
    };
  }
  let headers = expandRecord(raw.headers, 'headers', name, issues, env, extra);
  for (const [header, value] of Object.entries(headers)) registerHeaderSecret(header, value);
  let url = expandField(raw.url ?? '', 'url', name, issues, env, extra);
  if (!issues.some((issue) => issue.server === name && issue.field === 'url')) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      issues.push({ server: name, field: 'url', problem: `expected an absolute http(s) URL, got ${describeReceived(url, false)}` });
    }
    if (parsed) registerUrlSecrets(url);
    if (parsed && parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      issues.push({ server: name, field: 'url', problem: `expected an http: or https: URL, got a ${parsed.protocol} URL` });
    } else if (parsed) {
      ({ url, headers } = moveUserinfo(url, parsed, headers, name, issues));
    }
  }
  const server: ServerConfig = { ...common, transport, url, headers };
  registerServerSecrets(server);
  return server;
}

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

/** `tools.include/exclude` and Roo's `disabledTools` (an exclude) as one filter; none when unset. */
function toolFilterOf(raw: RawServer): { toolFilter?: ToolFilter } {
  const exclude = [...(raw.tools?.exclude ?? []), ...(raw.disabledTools ?? [])];
  if (raw.tools?.include === undefined && exclude.length === 0) return {};
  return { toolFilter: { ...(raw.tools?.include === undefined ? {} : { include: [...raw.tools.include] }), exclude } };
}

/** Marks configs this module built, so re-parsing one is a no-op rather than a second expansion. */
const PARSED = Symbol.for('mcp-supervisor.profile-config');

/** True for a {@link ProfileConfig} produced by {@link parseProfileConfig}. */
export function isParsedProfileConfig(value: unknown): value is ProfileConfig {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PARSED] === true;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

function workspaceFolderOf(context: ParseContext): string | undefined {
  if (context.workspaceFolder !== undefined) return context.workspaceFolder;
  if (context.file === undefined) return undefined;
  const parts = context.file.split('/');
  parts.pop();
  if (parts.at(-1) === '.vscode' || parts.at(-1) === '.cursor') parts.pop();
  return parts.join('/') || '/';
}

/** Builds the INVALID_CONFIG error that lists every issue, the first one in the message. */
export function invalidConfigError(context: Pick<ParseContext, 'profile' | 'file'>, issues: readonly ConfigIssue[]): McpSupervisorError {
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
      const server = buildServer(name, parsed.data, issues, env, extra);
      if (server !== undefined) servers[name] = server;
    }
  }
  if (issues.length > 0) throw invalidConfigError(context, issues);
  const config: ProfileConfig = context.file === undefined ? { servers } : { file: context.file, servers };
  Object.defineProperty(config, PARSED, { value: true });
  return deepFreeze(config);
}
