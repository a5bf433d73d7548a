/**
 * `${VAR}` expansion as `.mcp.json` (Claude Code) and VS Code define it: `${VAR}`,
 * `${VAR:-default}` and VS Code's `${env:VAR}`. A variable that is unset and has no default is an
 * error rather than an empty string, because an empty API key or command fails much later with a
 * far less helpful message.
 */

/** Why an expansion failed; the caller turns it into an INVALID_CONFIG issue for its field. */
export class ExpansionError extends Error {
  override readonly name = 'ExpansionError';
  /**
   * @param reason `input`: an `${input:…}` prompt; `invalid`: not a valid reference; `unset`: an
   *   unset variable without a default. Messages never show a `:-default` (it may be a secret).
   */
  constructor(
    message: string,
    readonly reason: 'input' | 'invalid' | 'unset' = 'invalid',
  ) {
    super(message);
  }
}

const PLACEHOLDER = /\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Variables the expander may read; normally `process.env`. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * Expands every placeholder in `text`.
 * @param extra values for VS Code's predefined variables (`workspaceFolder`, `userHome`)
 * @throws ExpansionError naming the variable when it is unset and has no default
 */
export function expandVariables(text: string, env: Environment, extra: Environment = {}): string {
  if (!text.includes('${')) return text;
  return text.replace(PLACEHOLDER, (_match, body: string) => {
    const fallbackAt = body.indexOf(':-');
    let name = fallbackAt === -1 ? body : body.slice(0, fallbackAt);
    const fallback = fallbackAt === -1 ? undefined : body.slice(fallbackAt + 2);
    // What messages show of the placeholder: never its default, which may be a literal secret.
    const shown = `\${${name}${fallback === undefined ? '' : ':-…'}}`;
    if (name.startsWith('env:')) name = name.slice(4);
    else if (name.startsWith('input:')) {
      throw new ExpansionError(`\`${shown}\` asks the user for input, which a host cannot do; write the value or use \${VAR}`, 'input');
    } else if (name in extra) {
      return extra[name] ?? '';
    }
    if (!NAME.test(name)) throw new ExpansionError(`\`${shown}\` is not a valid variable reference`, 'invalid');
    const value = env[name];
    if (value !== undefined && value !== '') return value;
    if (fallback !== undefined) return fallback;
    if (value === '') return '';
    throw new ExpansionError(`environment variable \`${name}\` is not set and has no default (write \`\${${name}:-default}\` to give one)`, 'unset');
  });
}
