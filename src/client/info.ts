/**
 * The client identity servers see when the host names none: this package's name and version,
 * read from its own package.json so the two can never disagree.
 */
import { readFileSync } from 'node:fs';
import type { Implementation } from '@modelcontextprotocol/sdk/types.js';

function packageVersion(): string {
  try {
    // dist/src/client/info.js → the package root.
    const raw = readFileSync(new URL('../../../package.json', import.meta.url), 'utf8');
    const version = (JSON.parse(raw) as { version?: unknown }).version;
    return typeof version === 'string' ? version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** `clientInfo` sent in `initialize` unless the host configures `client.info`. */
export const DEFAULT_CLIENT_INFO: Implementation = Object.freeze({ name: 'mcp-supervisor', version: packageVersion() });
