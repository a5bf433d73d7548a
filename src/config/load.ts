/**
 * Reading config files from disk. VS Code's `mcp.json` and settings files are JSON with comments
 * and trailing commas, so the reader accepts that dialect; every other format is plain JSON, which
 * is a subset. A file that cannot be read or parsed is an INVALID_CONFIG error naming the file and,
 * for syntax errors, the line and column (never the text around it: it may hold a secret).
 */
import { readFile } from 'node:fs/promises';
import { McpSupervisorError } from '../errors.js';
import { type ParseContext, parseProfileConfig } from './parse.js';
import type { ProfileConfig } from './types.js';

/**
 * Removes `//` and `/* *\/` comments and trailing commas outside strings, keeping every newline so
 * JSON.parse positions still map to the original lines.
 */
export function stripJsonComments(text: string): string {
  let out = '';
  let index = 0;
  while (index < text.length) {
    const char = text[index]!;
    const next = text[index + 1];
    if (char === '"') {
      const start = index;
      index++;
      while (index < text.length && text[index] !== '"') index += text[index] === '\\' ? 2 : 1;
      index++;
      out += text.slice(start, index);
    } else if (char === '/' && next === '/') {
      while (index < text.length && text[index] !== '\n') index++;
    } else if (char === '/' && next === '*') {
      const end = text.indexOf('*/', index + 2);
      const stop = end === -1 ? text.length : end + 2;
      out += text.slice(index, stop).replace(/[^\n]/g, ' ');
      index = stop;
    } else if (char === ',') {
      let ahead = index + 1;
      while (ahead < text.length && /\s/.test(text[ahead]!)) ahead++;
      out += text[ahead] === '}' || text[ahead] === ']' ? ' ' : ',';
      index++;
    } else {
      out += char;
      index++;
    }
  }
  return out;
}

function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return `line ${line}, column ${column}`;
}

/** Parses JSON-with-comments text, naming the file and position on a syntax error. */
export function parseJsonDocument(text: string, context: Pick<ParseContext, 'profile' | 'file'>): unknown {
  const stripped = stripJsonComments(text.replace(/^\uFEFF/, ''));
  try {
    return JSON.parse(stripped);
  } catch (error) {
    // V8's messages quote the document (`Unexpected token 'S', "SECRET=…"... is not valid JSON`),
    // and the file may not even be a config (a stray path): keep only the position, never text.
    const reason = error instanceof Error ? error.message : String(error);
    const position = /position (\d+)/.exec(reason);
    const where = position ? ` at ${lineAndColumn(stripped, Number(position[1]))}` : '';
    throw new McpSupervisorError(
      'INVALID_CONFIG',
      `Invalid config: ${context.file === undefined ? '' : `file ${context.file}, `}profile "${context.profile}": not valid JSON${where}`,
      { profile: context.profile, data: context.file === undefined ? {} : { file: context.file } },
    );
  }
}

/**
 * Reads and validates one config file (any supported format).
 * @throws McpSupervisorError `INVALID_CONFIG` naming the file when it cannot be read, parsed or validated
 */
export async function loadProfileFile(file: string, context: Omit<ParseContext, 'file'>): Promise<ProfileConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error));
    throw new McpSupervisorError('INVALID_CONFIG', `Invalid config: file ${file}, profile "${context.profile}": cannot read the file (${reason})`, {
      profile: context.profile,
      data: { file },
    });
  }
  return parseProfileConfig(parseJsonDocument(text, { ...context, file }), { ...context, file });
}
