/**
 * Baseline conformance client: the bare MCP SDK v1 (`Client` + `StreamableHTTPClientTransport`),
 * deliberately NOT built on mcp-supervisor. It is what ./suite.ts is developed and checked against,
 * and the reference a client built on our library is compared with.
 *
 * Usage (as the conformance CLI runs it): `node sdk-client.js <server-url>` with
 * `MCP_CONFORMANCE_SCENARIO=<scenario>` and, for some auth scenarios, `MCP_CONFORMANCE_CONTEXT=<json>`.
 * The server URL is the last argument. Exit code 0 when the scenario's script ran to the end.
 *
 * `CONFORMANCE_CLIENT_BREAK=no-elicitation` makes it declare no elicitation capability, so the
 * elicitation scenario must fail: the test that proves the harness can report a failure.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  UnauthorizedError,
  discoverOAuthProtectedResourceMetadata,
  type OAuthClientProvider,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type Handler, CIMD_CLIENT_METADATA_URL, advertisedIssuer, baseline, requiredField, scenarioContext } from './baseline.js';
import { HeadlessOAuthProvider, REDIRECT_URL } from './headless-provider.js';

const CLIENT_INFO = { name: 'mcp-supervisor-sdk-baseline', version: '1.0.0' };
const kit = baseline('sdk-client', CLIENT_INFO.name);



/** Scenario context handed over by the CLI in MCP_CONFORMANCE_CONTEXT (fields differ per scenario). */
interface Context {
  name?: string;
  client_id?: string;
  client_secret?: string;
  private_key_pem?: string;
  signing_algorithm?: string;
  idp_client_id?: string;
  idp_id_token?: string;
  idp_token_endpoint?: string;
}



/** A connected client; `run` retries an operation after completing an authorization it triggered. */
interface Session {
  client: Client;
  run<T>(operation: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

interface ConnectOptions {
  capabilities?: ConstructorParameters<typeof Client>[1];
  setup?: (client: Client) => void;
  authProvider?: OAuthClientProvider;
  headers?: Record<string, string>;
}

async function connect(serverUrl: string, options: ConnectOptions = {}): Promise<Session> {
  const url = new URL(serverUrl);
  const makeTransport = () =>
    new StreamableHTTPClientTransport(url, {
      ...(options.authProvider ? { authProvider: options.authProvider } : {}),
      ...(options.headers ? { requestInit: { headers: options.headers } } : {}),
    });
  const makeClient = () => {
    const client = new Client(CLIENT_INFO, options.capabilities ?? { capabilities: {} });
    options.setup?.(client);
    return client;
  };

  const headless = options.authProvider instanceof HeadlessOAuthProvider ? options.authProvider : undefined;
  let transport = makeTransport();
  let client = makeClient();
  for (;;) {
    try {
      await client.connect(transport);
      break;
    } catch (error) {
      const code = error instanceof UnauthorizedError ? headless?.takeCallback()?.get('code') ?? undefined : undefined;
      if (code === undefined) throw error;
      // The failed connect closed this transport and client: finish the authorization on it, then
      // start over with fresh ones that pick up the tokens from the provider.
      await transport.finishAuth(code);
      transport = makeTransport();
      client = makeClient();
    }
  }

  const session: Session = {
    client,
    async run(operation) {
      for (;;) {
        try {
          return await operation();
        } catch (error) {
          const code = error instanceof UnauthorizedError ? headless?.takeCallback()?.get('code') ?? undefined : undefined;
          if (code === undefined) throw error;
          await transport.finishAuth(code);
        }
      }
    },
    close: () => transport.close(),
  };
  return session;
}

/** Lists the tools, optionally calls one, and closes. */
async function listAndCall(session: Session, call?: { name: string; arguments: Record<string, unknown> }): Promise<void> {
  try {
    const { tools } = await session.run(() => session.client.listTools());
    kit.log('tools:', tools.map((tool) => tool.name).join(', '));
    if (call) {
      const result = await session.run(() => session.client.callTool(call));
      kit.log('result:', JSON.stringify(result));
    }
  } finally {
    await session.close();
  }
}

/** Issuer the MCP server's protected resource metadata points at (for credentials bound to it). */

async function postForm(url: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

async function getJson(url: URL): Promise<Record<string, unknown>> {
  const response = await fetch(url);
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${url.href}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}


const authorizationCodeFlow: Handler = async (serverUrl) => {
  const provider = kit.headless({ clientMetadataUrl: CIMD_CLIENT_METADATA_URL });
  await listAndCall(await connect(serverUrl, { authProvider: provider }), { name: 'test-tool', arguments: {} });
};

const handlers: Record<string, Handler> = {
  initialize: async (serverUrl) => listAndCall(await connect(serverUrl)),

  tools_call: async (serverUrl) => listAndCall(await connect(serverUrl), { name: 'add_numbers', arguments: { a: 2, b: 3 } }),

  'elicitation-sep1034-client-defaults': async (serverUrl) => {
    const broken = process.env.CONFORMANCE_CLIENT_BREAK === 'no-elicitation';
    const session = await connect(serverUrl, {
      capabilities: { capabilities: broken ? {} : { elicitation: { form: { applyDefaults: true } } } },
      setup: (client) => {
        if (broken) return; // the SDK refuses an elicitation handler without the capability
        // Accept with nothing filled in: the SDK must fill every field from the schema's defaults.
        client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
      },
    });
    await listAndCall(session, { name: 'test_client_elicitation_defaults', arguments: {} });
  },

  // The server closes the tool call's SSE stream with `retry: 500`; the SDK must reconnect with GET
  // and Last-Event-ID after those 500 ms and receive the result there.
  'sse-retry': async (serverUrl) => listAndCall(await connect(serverUrl), { name: 'test_reconnection', arguments: {} }),

  'auth/pre-registration': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const issuer = await advertisedIssuer(serverUrl);
    const provider = kit.headless({
      preRegistered: {
      client_id: requiredField(ctx, 'client_id'),
      client_secret: requiredField(ctx, 'client_secret'),
      redirect_uris: [REDIRECT_URL],
      issuer,
      },
    });
    await listAndCall(await connect(serverUrl, { authProvider: provider }));
  },

  'auth/client-credentials-basic': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const provider = new ClientCredentialsProvider({
      clientId: requiredField(ctx, 'client_id'),
      clientSecret: requiredField(ctx, 'client_secret'),
      expectedIssuer: await advertisedIssuer(serverUrl),
    });
    await listAndCall(await connect(serverUrl, { authProvider: provider }));
  },

  'auth/client-credentials-jwt': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const provider = new PrivateKeyJwtProvider({
      clientId: requiredField(ctx, 'client_id'),
      privateKey: requiredField(ctx, 'private_key_pem'),
      algorithm: ctx.signing_algorithm ?? 'ES256',
      expectedIssuer: await advertisedIssuer(serverUrl),
    });
    await listAndCall(await connect(serverUrl, { authProvider: provider }));
  },

  // SEP-990: ID token -> (token exchange at the IdP) ID-JAG -> (jwt-bearer grant at the AS) access token.
  'auth/cross-app-access-complete-flow': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const resourceMetadata = await discoverOAuthProtectedResourceMetadata(serverUrl);
    const authorizationServer = resourceMetadata.authorization_servers?.[0];
    if (!authorizationServer) throw new Error('protected resource metadata names no authorization server');
    const asMetadata = await getJson(new URL('/.well-known/oauth-authorization-server', authorizationServer));
    const grants = Array.isArray(asMetadata.grant_types_supported) ? asMetadata.grant_types_supported : [];
    if (!grants.includes('urn:ietf:params:oauth:grant-type:jwt-bearer')) {
      throw new Error(`authorization server does not support jwt-bearer: ${grants.join(', ')}`);
    }
    const exchanged = await postForm(requiredField(ctx, 'idp_token_endpoint'), {
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
      audience: String(asMetadata.issuer),
      resource: resourceMetadata.resource,
      subject_token: requiredField(ctx, 'idp_id_token'),
      subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
      client_id: requiredField(ctx, 'idp_client_id'),
    });
    const credentials = `${encodeURIComponent(requiredField(ctx, 'client_id'))}:${encodeURIComponent(requiredField(ctx, 'client_secret'))}`;
    const granted = await postForm(
      String(asMetadata.token_endpoint),
      { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: String(exchanged.access_token) },
      { authorization: `Basic ${Buffer.from(credentials).toString('base64')}` },
    );
    const session = await connect(serverUrl, { headers: { authorization: `Bearer ${String(granted.access_token)}` } });
    await listAndCall(session, { name: 'test-tool', arguments: {} });
  },
};

kit.run(handlers, authorizationCodeFlow);
