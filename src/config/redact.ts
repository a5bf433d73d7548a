/**
 * Redaction of secrets for messages, logs and everything else that leaves the library.
 *
 * Two tools live here:
 *
 * - **Structural redaction** of a config (`redactUrl`, `redactValues`, `redactServer`,
 *   `describeServerTarget`): environment variables and HTTP headers are where users put API keys
 *   and tokens, so their *values* never leave the config model in text form; URLs lose their
 *   password and any query value whose name looks like a credential.
 * - **The scrubber** (`scrubText`, `scrubTail`, `scrubDeep`): secrets also come back from places
 *   the library does not write itself — `fetch`'s own error text repeating a URL, a server that
 *   prints its environment on stderr, an SDK message quoting a header. So every configured secret
 *   is *registered* when its config is parsed ({@link registerServerSecrets},
 *   {@link registerUrlSecrets}, {@link registerSecret}), and every exit of the library (errors,
 *   readiness views, events, the doctor) passes its text through one scrubber that replaces any
 *   registered value by {@link REDACTED}.
 *
 * ## What is registered
 *
 * When `parseProfileConfig` builds a server: every `env` value, every `headers` value (and, for
 * `Scheme credential` values such as `Bearer …`/`Basic …`, the credential alone; for `Basic`, the
 * decoded `user:password` and the password), the URL's password and `user:password` pair (and the
 * username: alone when it has no password, since it is then the credential), every query value
 * whose name looks secret, and the values of `${VAR}` placeholders whose variable name looks
 * secret, in whatever field they were expanded. Each value is registered with the forms it takes
 * in output: as is, percent-encoded (`encodeURIComponent` and form encoding), JSON-escaped, and
 * for a `user:password` pair its base64 (what an `Authorization: Basic` header carries).
 *
 * ## The registration rule (what is *not* registered)
 *
 * Scrubbing a value replaces it everywhere in the library's output, so short everyday values
 * (`1`, `true`, `debug`, `prod`) would mangle ordinary text. A value is registered only when it is
 * **at least 6 characters long**, or **at least 3 characters when its name looks secret**: a query
 * parameter name matching `/key|token|secret|pass|auth|sig|session|code|credential/i`, or an env
 * variable / header name matching that or `/bearer|api|private/i` (passwords, `user:password`
 * pairs and password-less usernames always count as secret-named). Values shorter than 6
 * characters are matched only as whole tokens (not preceded or followed by an ASCII letter or
 * digit), so a 3-letter key `tok` is scrubbed in `key=tok` or `Bearer tok` but `token` stays
 * readable.
 *
 * The registry is process-wide (a process may run several hosts, and scrubbing more than needed
 * is safe), idempotent (registering a value again only refreshes it) and bounded to
 * {@link MAX_REGISTERED_SECRETS} values, the least recently registered dropped first. It is
 * per-thread: discovery workers have an empty one, which is why the main thread scrubs what they
 * send (errors are rebuilt through the scrubbing `McpSupervisorError` constructor, views through
 * `buildView`).
 */
import type { ServerConfig } from './types.js';

/** What a redacted value is replaced with. */
export const REDACTED = '[redacted]';

/** Query parameter names whose values are secrets. */
export const SECRET_QUERY_NAME = /key|token|secret|pass|auth|sig|session|code|credential/i;
/** Env variable and header names whose values are secrets (the query rule plus bearer/api/private). */
export const SECRET_FIELD_NAME = /key|token|secret|pass|auth|sig|session|code|credential|bearer|api|private/i;
/** Minimum length of a registered value whose name does not look secret. */
export const MIN_SECRET_LENGTH = 6;
/** Minimum length of a registered value whose name looks secret. */
export const MIN_NAMED_SECRET_LENGTH = 3;
/** How many values the registry holds at most (derived forms included). */
export const MAX_REGISTERED_SECRETS = 4096;
/** Nesting depth {@link scrubDeep} descends; anything deeper is replaced by {@link REDACTED}. */
export const MAX_SCRUB_DEPTH = 64;

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

/**
 * Redacts URL-looking *text* that may not parse as a URL (for messages about malformed URLs):
 * everything between `scheme://` and the last `@` (userinfo) and the values of secret-looking query
 * parameters, then any registered secret. Keeps the rest readable.
 */
export function redactUrlText(text: string): string {
  // Up to the last `@`: in a URL that does not parse, a password may hold a `/` or a `#`.
  const withoutUserinfo = text.replace(/^(\s*[A-Za-z][A-Za-z0-9+.-]*:\/*).*@/, `$1${REDACTED}@`);
  const withoutQuery = withoutUserinfo.replace(/([?&;][^=&#;]*=)([^&#;]*)/g, (match, head: string, value: string) =>
    SECRET_QUERY_NAME.test(head) && value !== '' ? `${head}${REDACTED}` : match,
  );
  return scrubText(withoutQuery);
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
  if (server.transport === 'stdio') return scrubText([server.command, ...server.args].join(' '));
  return redactUrl(server.url);
}

// ------------------------------------------------------------------------------------ registry

/** Registered values, in registration order (oldest first; re-registration moves to the end). */
const registry = new Map<string, true>();
/** The combined matcher, rebuilt lazily after the registry's content changed. */
let compiled: { regex: RegExp; shortest: number } | undefined;
let dirty = false;

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

/** Adds one exact value (no derived forms). Returns true when it was registered. */
function addValue(value: string, named: boolean): boolean {
  if (value.length < (named ? MIN_NAMED_SECRET_LENGTH : MIN_SECRET_LENGTH)) return false;
  if (value === REDACTED) return false;
  if (registry.has(value)) {
    // Idempotent: refresh its place in the eviction order; the matcher is unchanged.
    registry.delete(value);
    registry.set(value, true);
    return true;
  }
  registry.set(value, true);
  while (registry.size > MAX_REGISTERED_SECRETS) {
    const oldest = registry.keys().next().value;
    if (oldest === undefined) break;
    registry.delete(oldest);
  }
  dirty = true;
  return true;
}

function base64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

/** The forms a value takes in output: as is, percent-encoded, form-encoded, JSON-escaped. */
function formsOf(value: string): string[] {
  const forms = new Set([value]);
  try {
    forms.add(encodeURIComponent(value));
  } catch {
    // Lone surrogates cannot be percent-encoded; the raw form is registered.
  }
  forms.add(new URLSearchParams([['', value]]).toString().slice(1));
  forms.add(JSON.stringify(value).slice(1, -1));
  return [...forms];
}

/**
 * Registers a secret value and the forms it takes in output (percent-encoded, form-encoded,
 * JSON-escaped). `named`: its name looks secret, so 3 characters are enough (see the module
 * comment for the rule). Returns true when the value itself was long enough to be registered.
 */
export function registerSecret(value: string, named = false): boolean {
  if (typeof value !== 'string') return false;
  let registered = false;
  for (const form of formsOf(value)) registered = addValue(form, named) || registered;
  return registered;
}

/** Registers a `user:password` pair: the pair, its base64 (Basic auth) and the password. */
function registerCredentialPair(user: string, password: string): void {
  const pair = `${user}:${password}`;
  registerSecret(password, true);
  registerSecret(pair, true);
  addValue(base64(pair), true);
}

/** Registers an HTTP header value; `Scheme credential` values also register the credential alone. */
export function registerHeaderSecret(name: string, value: string): void {
  const named = SECRET_FIELD_NAME.test(name);
  registerSecret(value, named);
  const scheme = /^\s*([A-Za-z][\w.-]*)\s+(\S.*?)\s*$/.exec(value);
  if (!scheme) return;
  const credential = scheme[2]!;
  registerSecret(credential, named);
  if (scheme[1]!.toLowerCase() === 'basic' && /^[A-Za-z0-9+/]+=*$/.test(credential)) {
    const decoded = Buffer.from(credential, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon >= 0 && base64(decoded) === credential) registerCredentialPair(decoded.slice(0, colon), decoded.slice(colon + 1));
  }
}

/** Registers an environment variable's value. */
export function registerEnvSecret(name: string, value: string): void {
  registerSecret(value, SECRET_FIELD_NAME.test(name));
}

function decodeComponent(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Registers the secrets of a URL: its password, `user:password` pair and its base64 (and a
 * username alone when there is no password), and the values of query parameters whose name looks
 * secret, both as written and decoded. Unparseable URLs register nothing (the caller reports them
 * without echoing them).
 */
export function registerUrlSecrets(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return;
  }
  if (parsed.password !== '') {
    registerSecret(parsed.password, true);
    registerSecret(parsed.username, false);
    registerSecret(decodeComponent(parsed.username), false);
    registerCredentialPair(decodeComponent(parsed.username), decodeComponent(parsed.password));
    addValue(`${parsed.username}:${parsed.password}`, true);
  } else if (parsed.username !== '') {
    registerSecret(parsed.username, true);
    registerSecret(decodeComponent(parsed.username), true);
    addValue(base64(`${decodeComponent(parsed.username)}:`), true);
  }
  for (const [name, value] of parsed.searchParams) {
    if (SECRET_QUERY_NAME.test(name)) registerSecret(value, true);
  }
  // As written (the parser decodes `+` and `%xx`; error texts quote the raw URL).
  for (const part of parsed.search.replace(/^\?/, '').split('&')) {
    const equals = part.indexOf('=');
    if (equals < 0) continue;
    if (SECRET_QUERY_NAME.test(decodeComponent(part.slice(0, equals)))) registerSecret(part.slice(equals + 1), true);
  }
}

/** Registers every secret of a parsed server config: env values, header values, URL secrets. */
export function registerServerSecrets(server: ServerConfig): void {
  if (server.transport === 'stdio') {
    for (const [name, value] of Object.entries(server.env)) registerEnvSecret(name, value);
    return;
  }
  for (const [name, value] of Object.entries(server.headers)) registerHeaderSecret(name, value);
  registerUrlSecrets(server.url);
}

/** How many values the registry holds (derived forms included). */
export function registeredSecretCount(): number {
  return registry.size;
}

/** True when `value` (exactly) is registered. */
export function isRegisteredSecret(value: string): boolean {
  return registry.has(value);
}

/**
 * Empties the registry. For tests only: in a running process secrets stay registered for as long
 * as the bound allows, since an error built later may still quote one.
 */
export function clearSecretRegistry(): void {
  registry.clear();
  compiled = undefined;
  dirty = false;
}

function matcher(): { regex: RegExp; shortest: number } | undefined {
  if (!dirty) return compiled;
  dirty = false;
  if (registry.size === 0) {
    compiled = undefined;
    return undefined;
  }
  const values = [...registry.keys()].sort((a, b) => b.length - a.length);
  const long = values.filter((value) => value.length >= MIN_SECRET_LENGTH).map(escapeRegex);
  const short = values.filter((value) => value.length < MIN_SECRET_LENGTH).map(escapeRegex);
  // Longest first, so a secret that contains another is replaced whole. Short values only match as
  // whole tokens (see the registration rule).
  const alternatives = [...long];
  if (short.length > 0) alternatives.push(`(?<![A-Za-z0-9])(?:${short.join('|')})(?![A-Za-z0-9])`);
  compiled = { regex: new RegExp(alternatives.join('|'), 'g'), shortest: values.at(-1)!.length };
  return compiled;
}

/** `scheme://user:password@` in free text (a URL the registry never saw, e.g. from another thread). */
const USERINFO_IN_TEXT = /\b([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/?#@'"`<>]*:[^\s/?#@'"`<>]*@/g;

/**
 * Replaces every registered secret in `text` by {@link REDACTED}, and the userinfo of any
 * `scheme://user:password@` URL in it. One combined matcher (rebuilt only when the registry
 * changed); strings shorter than the shortest secret are returned as they are.
 */
export function scrubText(text: string): string {
  if (typeof text !== 'string') return text;
  let out = text;
  const compiledMatcher = matcher();
  if (compiledMatcher !== undefined && out.length >= compiledMatcher.shortest) out = out.replace(compiledMatcher.regex, REDACTED);
  if (out.includes('://') && out.includes('@')) out = out.replace(USERINFO_IN_TEXT, `$1${REDACTED}@`);
  return out;
}

/**
 * {@link scrubText} for the *tail* of a longer output (a stderr ring buffer): the cut may have
 * split a secret, leaving its end at the start of the text. A start that is the last 4 or more
 * characters of a registered secret is replaced too.
 */
export function scrubTail(text: string): string {
  const out = scrubText(text);
  if (registry.size === 0 || out.length < 4) return out;
  const head = out.slice(0, 4);
  let cut = 0;
  for (const secret of registry.keys()) {
    for (let at = secret.indexOf(head, 1); at > 0; at = secret.indexOf(head, at + 1)) {
      const suffix = secret.slice(at);
      if (suffix.length > cut && out.startsWith(suffix)) cut = suffix.length;
    }
  }
  if (cut === 0) return out;
  return `${REDACTED}${out.slice(cut)}`;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function scrubValue(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_SCRUB_DEPTH) return REDACTED;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      const scrubbed = scrubValue(item, depth + 1);
      if (scrubbed !== item) {
        copy ??= value.slice();
        copy[index] = scrubbed;
      }
    }
    return copy ?? value;
  }
  if (value instanceof Error) {
    // The cause chain is followed too: a clean wrapper must not carry a secret one level down.
    const message = scrubText(value.message);
    const hasCause = Object.hasOwn(value, 'cause');
    const cause = hasCause ? scrubValue(value.cause, depth + 1) : undefined;
    if (message === value.message && cause === value.cause) return value;
    const copy = new Error(message, hasCause ? { cause } : undefined);
    copy.name = value.name;
    return copy;
  }
  if (!isPlainObject(value)) return value;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    const scrubbed = scrubValue(item, depth + 1);
    if (scrubbed !== item) {
      copy ??= { ...(value as Record<string, unknown>) };
      copy[key] = scrubbed;
    }
  }
  return copy ?? value;
}

/**
 * A scrubbed copy of plain data: every string inside plain objects and arrays goes through
 * {@link scrubText}; other values (numbers, class instances, functions) are kept as they are, an
 * `Error` with a secret in its message becomes a plain `Error` without it. Copy-on-write: the
 * very same value comes back when nothing was replaced (so frozen input stays frozen and an empty
 * registry costs one check). Nesting deeper than {@link MAX_SCRUB_DEPTH} is replaced by
 * {@link REDACTED} (a guard against cycles, which plain data should not have).
 */
export function scrubDeep<T>(value: T): T {
  if (typeof value !== 'string' && (typeof value !== 'object' || value === null)) return value;
  return scrubValue(value, 0) as T;
}
