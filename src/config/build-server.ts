/**
 * Builds one {@link ServerConfig} from a server entry of a user config that passed the schema:
 * transport resolution, `${VAR}` expansion of every field, secret registration and URL
 * credentials. Problems are collected as {@link ConfigIssue}s (never thrown), so the caller reports
 * every problem of a config at once.
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
import { type Environment, ExpansionError, expandVariables } from './expand.js';
import { type ConfigIssue, describeReceived, isSecretField } from './issues.js';
import { SECRET_FIELD_NAME, registerEnvSecret, registerHeaderSecret, registerSecret, registerServerSecrets, registerUrlSecrets } from './redact.js';
import type { ToolFilter } from './tool-filter.js';
import type { ServerConfig, TransportKind } from './types.js';

const TRANSPORT_ALIASES: Record<string, TransportKind> = {
  stdio: 'stdio',
  http: 'http',
  'streamable-http': 'http',
  streamableHttp: 'http',
  sse: 'sse',
};

const scalarAsString = z.union([z.string(), z.number(), z.boolean()]).transform(String);
const positiveInt = z.number().int().positive();

/** The schema of one server entry, as users write it (Claude Desktop, Cursor, `.mcp.json`, VS Code). */
export const rawServerSchema = z.looseObject({
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
  protocol: z.enum(['2025-11-25', '2026-07-28', 'auto']).optional(),
  // Strict: a typo in a security control ("exlude") must be an error, never a silent no-op.
  tools: z.strictObject({ include: z.array(z.string().min(1)).optional(), exclude: z.array(z.string().min(1)).optional() }).optional(),
  disabledTools: z.array(z.string().min(1)).optional(),
});

/** A server entry that passed {@link rawServerSchema}. */
export type RawServer = z.infer<typeof rawServerSchema>;

/** What expanding the fields of one server needs: where problems go and the variables to expand. */
export interface ExpansionScope {
  /** The server's name, for its issues. */
  server: string;
  issues: ConfigIssue[];
  env: Environment;
  /** VS Code's predefined variables (`workspaceFolder`, `userHome`). */
  extra: Environment;
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

/** Expands one field, recording an issue instead of throwing so every problem is reported at once. */
function expandField(text: string, field: string, scope: ExpansionScope): string {
  registerSecretVariables(text, scope.env);
  try {
    return expandVariables(text, scope.env, scope.extra);
  } catch (error) {
    if (!(error instanceof ExpansionError)) throw error;
    // In a secret field even a malformed placeholder's text may be (part of) the secret.
    const problem = isSecretField(field) && error.reason === 'invalid' ? 'expected `${VAR}` placeholders with a valid variable name, got an invalid one (value not shown)' : error.message;
    scope.issues.push({ server: scope.server, field, problem });
    return text;
  }
}

function expandRecord(record: Record<string, string> | undefined, field: string, scope: ExpansionScope): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(record ?? {})) {
    out[name] = expandField(value, `${field}.${name}`, scope);
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

/** `tools.include/exclude` and Roo's `disabledTools` (an exclude) as one filter; none when unset. */
function toolFilterOf(raw: RawServer): { toolFilter?: ToolFilter } {
  const exclude = [...(raw.tools?.exclude ?? []), ...(raw.disabledTools ?? [])];
  if (raw.tools?.include === undefined && exclude.length === 0) return {};
  return { toolFilter: { ...(raw.tools?.include === undefined ? {} : { include: [...raw.tools.include] }), exclude } };
}

/** The HTTP part of a server: expanded headers and URL, checked, userinfo moved into a header. */
function httpTarget(raw: RawServer, scope: ExpansionScope): { url: string; headers: Record<string, string> } {
  const { server: name, issues } = scope;
  let headers = expandRecord(raw.headers, 'headers', scope);
  for (const [header, value] of Object.entries(headers)) registerHeaderSecret(header, value);
  let url = expandField(raw.url ?? '', 'url', scope);
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
  return { url, headers };
}

/**
 * Builds the server `scope.server` from its schema-checked entry, expanding and registering its
 * secrets. Returns undefined when its transport cannot be resolved; other problems are recorded
 * in `scope.issues` (the caller refuses the config when there are any).
 */
export function buildServer(raw: RawServer, scope: ExpansionScope): ServerConfig | undefined {
  const name = scope.server;
  const transport = resolveTransport(raw, name, scope.issues);
  if (transport === undefined) return undefined;
  const common = {
    name,
    disabled: raw.disabled ?? false,
    share: raw.share ?? false,
    shareDiscovery: raw.shareDiscovery ?? true,
    ...toolFilterOf(raw),
    ...(raw.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: raw.connectTimeoutMs }),
    ...(raw.callTimeoutMs === undefined ? {} : { callTimeoutMs: raw.callTimeoutMs }),
    ...(raw.protocol === undefined ? {} : { protocol: raw.protocol }),
  };
  if (transport === 'sse' && raw.protocol !== undefined && raw.protocol !== '2025-11-25') {
    scope.issues.push({ server: name, field: 'protocol', problem: `expected "2025-11-25" for a legacy SSE server (the HTTP+SSE transport exists only in that era), got "${raw.protocol}"` });
  }
  if (transport === 'stdio') {
    // Env first: its values are registered before any other field's problem is described.
    const serverEnv = expandRecord(raw.env, 'env', scope);
    for (const [variable, value] of Object.entries(serverEnv)) registerEnvSecret(variable, value);
    const cwd = raw.cwd === undefined ? undefined : expandField(raw.cwd, 'cwd', scope);
    return {
      ...common,
      transport,
      command: expandField(raw.command ?? '', 'command', scope),
      args: (raw.args ?? []).map((arg, index) => expandField(arg, `args[${index}]`, scope)),
      env: serverEnv,
      ...(cwd === undefined ? {} : { cwd }),
    };
  }
  const server: ServerConfig = { ...common, transport, ...httpTarget(raw, scope) };
  registerServerSecrets(server);
  return server;
}
