/**
 * A minimal host serving MCP to agents over Streamable HTTP on 127.0.0.1, the way `createGateway`'s
 * JSDoc expects a host to use the gateway: one `McpServer` per session (an `McpServer` owns a single
 * transport), `gw.attach` before any tool is registered, session ids from
 * `gw.sessionIdGenerator()`, and a router that answers 404 to any session id that is not of the
 * current epoch before it even looks the session up. Agents are identified from the bearer token
 * (the host's auth layer puts it in `req.auth`, which the SDK hands to handlers as `authInfo`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { Gateway } from '../../src/gateway/index.js';

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
}

/** A running host. */
export interface HttpHost {
  readonly url: URL;
  /** Sessions currently in the routing table. */
  readonly sessions: ReadonlyMap<string, Session>;
  /** A gateway restart: new epoch, then the old sessions are torn down (optional, to show the epoch alone 404s them). */
  restart(options?: { dropSessions?: boolean }): Promise<void>;
  close(): Promise<void>;
}

function jsonError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** Starts a host on an ephemeral port; `registerTools` adds the host's tools to each session's server. */
export async function startHttpHost(gw: Gateway, registerTools: (server: McpServer) => void): Promise<HttpHost> {
  const sessions = new Map<string, Session>();

  async function closeSession(id: string, session: Session): Promise<void> {
    sessions.delete(id);
    await session.server.close(); // closes its transport too
  }

  async function route(req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse): Promise<void> {
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (token === undefined) return jsonError(res, 401, -32001, 'Unauthorized');
    req.auth = { token, clientId: token, scopes: [] };

    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      // The epoch check comes first: an id of another epoch is dead even if still in the table.
      const session = gw.isCurrentSession(sessionId) ? sessions.get(sessionId) : undefined;
      if (session === undefined) return jsonError(res, 404, -32001, 'Session not found');
      if (req.method === 'GET') return jsonError(res, 405, -32000, 'Method not allowed'); // no standalone SSE stream
      return session.transport.handleRequest(req, res);
    }
    if (req.method !== 'POST') return jsonError(res, 405, -32000, 'Method not allowed');
    const body = await readJson(req);
    if (!isInitializeRequest(body)) return jsonError(res, 400, -32000, 'Bad Request: no valid session ID');

    const server = new McpServer({ name: 'test-gateway', version: '1.0.0' });
    gw.attach(server);
    registerTools(server);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: gw.sessionIdGenerator(),
      enableJsonResponse: true, // plain JSON answers: no per-request SSE streams to reconnect
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, server });
      },
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  const http: Server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (!res.headersSent) jsonError(res, 500, -32603, String(error));
      else res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;

  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    sessions,
    async restart({ dropSessions = true } = {}) {
      await gw.bump();
      if (dropSessions) for (const [id, session] of [...sessions]) await closeSession(id, session);
    },
    async close() {
      for (const [id, session] of [...sessions]) await closeSession(id, session);
      http.closeAllConnections();
      await new Promise<void>((resolve, reject) => http.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
