/**
 * What the two bare-SDK baseline programs (./sdk-client.ts on the v1 SDK, ./sdk-v2-client.ts on
 * v2) share and is not SDK code: the scenario context the conformance CLI hands over, the headless
 * OAuth provider they both use, the issuer a scenario's resource advertises, and the program's
 * entry (scenario → handler, exit codes).
 */
import { discoverOAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/client/auth.js';
import { HeadlessOAuthProvider, type HeadlessProviderOptions } from './headless-provider.js';

/** The client id metadata document URL the suite's CIMD scenarios expect a client to offer. */
export const CIMD_CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json';

/** Authorization requests after which a baseline's provider refuses (retry-limit scenarios). */
const MAX_AUTHORIZATIONS = 3;

/** A scenario handler: runs the scenario against the CLI's server URL. */
export type Handler = (serverUrl: string) => Promise<void>;

/** The pieces of one baseline program, named after it (`sdk-client`, `sdk-v2-client`). */
export interface Baseline {
  /** A line on stderr when `CONFORMANCE_CLIENT_VERBOSE` is set. */
  log(...parts: unknown[]): void;
  /** The program's headless OAuth provider (see ./headless-provider.ts). */
  headless(options: Omit<HeadlessProviderOptions, 'clientName' | 'maxAuthorizations' | 'log'>): HeadlessOAuthProvider;
  /** Runs the handler of `MCP_CONFORMANCE_SCENARIO` (`fallback` for any other `auth/*`) and exits. */
  run(handlers: Record<string, Handler>, fallback: Handler): void;
}

/** The baseline program `name`, presenting itself as `clientName` to authorization servers. */
export function baseline(name: string, clientName: string): Baseline {
  const log = (...parts: unknown[]): void => {
    if (process.env.CONFORMANCE_CLIENT_VERBOSE) console.error(`[${name}]`, ...parts);
  };
  const main = async (handlers: Record<string, Handler>, fallback: Handler): Promise<number> => {
    const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
    const serverUrl = process.argv.at(-1);
    if (!scenario || !serverUrl || process.argv.length < 3) {
      console.error(`usage: MCP_CONFORMANCE_SCENARIO=<scenario> ${name} <server-url>`);
      return 2;
    }
    // Every other auth/* scenario is the interactive authorization-code flow, with its variations
    // (discovery, scopes, token endpoint auth, resource mismatch, iss, migration, …) left to the SDK.
    const handler = handlers[scenario] ?? (scenario.startsWith('auth/') ? fallback : undefined);
    if (!handler) {
      console.error(`${name}: unknown scenario ${scenario}`);
      return 2;
    }
    log(scenario, process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '', serverUrl);
    await handler(serverUrl);
    return 0;
  };
  return {
    log,
    headless: (options) => new HeadlessOAuthProvider({ clientName, maxAuthorizations: MAX_AUTHORIZATIONS, log, ...options }),
    run(handlers, fallback) {
      main(handlers, fallback).then(
        (code) => process.exit(code),
        (error: unknown) => {
          console.error(`${name}:`, error instanceof Error ? (error.stack ?? error.message) : error);
          process.exit(1);
        },
      );
    },
  };
}

/** The scenario's context, handed over by the CLI in `MCP_CONFORMANCE_CONTEXT` (fields differ per scenario). */
export function scenarioContext<T>(): T {
  const raw = process.env.MCP_CONFORMANCE_CONTEXT;
  if (!raw) throw new Error('MCP_CONFORMANCE_CONTEXT is not set');
  return JSON.parse(raw) as T;
}

/** A string field of the context the scenario cannot do without. */
export function requiredField<T extends object>(ctx: T, key: keyof T & string): string {
  const value = ctx[key];
  if (typeof value !== 'string' || value === '') throw new Error(`MCP_CONFORMANCE_CONTEXT has no ${key}`);
  return value;
}

/** The authorization server a scenario's protected resource names first. */
export async function advertisedIssuer(serverUrl: string): Promise<string> {
  const metadata = await discoverOAuthProtectedResourceMetadata(serverUrl);
  const issuer = metadata.authorization_servers?.[0];
  if (!issuer) throw new Error('protected resource metadata names no authorization server');
  return issuer;
}
