/**
 * The normalised configuration model: what every config format (Claude Desktop, Cursor, VS Code,
 * `.mcp.json`) is turned into once parsed, validated and `${VAR}`-expanded. Everything downstream
 * (discovery workers, sessions, fingerprints) reads only these shapes, never raw user JSON.
 */

import type { ToolFilter } from './tool-filter.js';

/** How the library talks to a server. `http` is Streamable HTTP; `sse` is the legacy HTTP+SSE transport. */
export type TransportKind = 'stdio' | 'http' | 'sse';

/**
 * Which MCP protocol era a server is spoken to in: `2025-11-25` (the `initialize` handshake and
 * its sessions), `2026-07-28` (stateless: `server/discover`, per-request envelope), or `auto`
 * (probe with `server/discover`, fall back to `initialize`; the verdict is cached).
 */
export type ProtocolSetting = '2025-11-25' | '2026-07-28' | 'auto';

/** Options every server accepts, whatever its transport. */
export interface CommonServerOptions {
  /** The server's name as written in the config (the key of `mcpServers` / `servers`). */
  readonly name: string;
  /** A disabled server is never started; its outcome is `disabled`. */
  readonly disabled: boolean;
  /** Per-server override of `discovery.connectTimeoutMs`. */
  readonly connectTimeoutMs?: number;
  /** Per-server default timeout for tool calls. */
  readonly callTimeoutMs?: number;
  /** When true, profiles whose server has the same fingerprint share one live session. */
  readonly share: boolean;
  /**
   * When true (the default), profiles whose server has the same fingerprint and the same client
   * share one discovery of it. False: this profile always discovers the server itself.
   */
  readonly shareDiscovery: boolean;
  /** Which of the server's tools a host may see and call (absent: all). */
  readonly toolFilter?: ToolFilter;
  /**
   * The protocol era (see {@link ProtocolSetting}). Absent: the transport's default
   * ({@link protocolSettingOf}): `2025-11-25` for stdio and SSE, `auto` for Streamable HTTP.
   */
  readonly protocol?: ProtocolSetting;
}

/** A server started as a child process that speaks MCP over its stdin/stdout. */
export interface StdioServerConfig extends CommonServerOptions {
  readonly transport: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  /** Extra environment, merged over the host's safe default environment. */
  readonly env: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/** A server reached over HTTP (Streamable HTTP or legacy SSE). */
export interface HttpServerConfig extends CommonServerOptions {
  readonly transport: 'http' | 'sse';
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** One server of a profile, normalised. */
export type ServerConfig = StdioServerConfig | HttpServerConfig;

/** One profile's servers, normalised and deeply frozen. */
export interface ProfileConfig {
  /** The file the profile was read from, when there is one (for messages). */
  readonly file?: string;
  /** Servers by name, in the order the config listed them. */
  readonly servers: Readonly<Record<string, ServerConfig>>;
}

/**
 * A server's protocol setting with the transport's default applied: stdio servers are spoken to
 * in the 2025-11-25 era unless configured (a probe that an old server answers by exiting costs a
 * second process), Streamable HTTP servers are probed, legacy SSE exists only in the old era.
 */
export function protocolSettingOf(server: ServerConfig): ProtocolSetting {
  return server.protocol ?? (server.transport === 'http' ? 'auto' : '2025-11-25');
}
