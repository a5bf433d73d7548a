/**
 * Baseline conformance client: the bare MCP SDK v2 (`@modelcontextprotocol/client`: `Client` +
 * `StreamableHTTPClientTransport`), deliberately NOT built on mcp-supervisor. It is the reference
 * for the 2026-07-28 scenarios of the 0.2.0 conformance CLI (`conformance-next`), as ./sdk-client.ts
 * (bare v1) is for the 0.1.16 suite.
 *
 * Usage (as the conformance CLI runs it): `node sdk-v2-client.js <server-url>` with
 * `MCP_CONFORMANCE_SCENARIO=<scenario>`, `MCP_CONFORMANCE_PROTOCOL_VERSION=<spec version>` (set by
 * the 0.2.0 CLI) and, for some scenarios, `MCP_CONFORMANCE_CONTEXT=<json>`. The server URL is the
 * last argument. Exit code 0 when the scenario's script ran to the end.
 *
 * Era: when the run is at 2026-07-28 the client negotiates (`versionNegotiation: { mode: 'auto' }`:
 * `server/discover` first, `initialize` only as the fallback), otherwise it is the plain 2025 client
 * (`legacy`, the SDK's default). `CONFORMANCE_CLIENT_ERA=auto|legacy` overrides that.
 *
 * OAuth: the same headless, v1-shaped provider as ./sdk-client.ts (v2 accepts an
 * `OAuthClientProvider` as is), except that it keeps the whole callback query (`code` and `iss`)
 * and hands it to `transport.finishAuth(URLSearchParams)`, so the SDK checks `iss` (RFC 9207) the
 * way the auth/iss-* scenarios expect.
 */
import {
  Client,
  ClientCredentialsProvider,
  PrivateKeyJwtProvider,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type ClientCapabilities,
  type OAuthClientProvider,
  type VersionNegotiationMode,
} from '@modelcontextprotocol/client';
import { type Handler, CIMD_CLIENT_METADATA_URL, advertisedIssuer, baseline, requiredField, scenarioContext } from './baseline.js';
import { HeadlessOAuthProvider, REDIRECT_URL } from './headless-provider.js';

const CLIENT_INFO = { name: 'mcp-supervisor-sdk-v2-baseline', version: '1.0.0' };
const kit = baseline('sdk-v2-client', CLIENT_INFO.name);

const MODERN = '2026-07-28';


function negotiationMode(): VersionNegotiationMode {
  const forced = process.env.CONFORMANCE_CLIENT_ERA;
  if (forced === 'auto' || forced === 'legacy') return forced;
  return process.env.MCP_CONFORMANCE_PROTOCOL_VERSION === MODERN ? 'auto' : 'legacy';
}

/** Scenario context handed over by the CLI in MCP_CONFORMANCE_CONTEXT (fields differ per scenario). */
interface Context {
  name?: string;
  client_id?: string;
  client_secret?: string;
  private_key_pem?: string;
  signing_algorithm?: string;
  /** http-custom-headers: the calls to make, with the values whose header encoding is checked. */
  toolCalls?: { name: string; arguments?: Record<string, unknown> }[];
}



/** A connected client; `run` retries an operation after completing an authorization it triggered. */
interface Session {
  client: Client;
  run<T>(operation: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

interface ConnectOptions {
  capabilities?: ClientCapabilities;
  setup?: (client: Client) => void;
  authProvider?: OAuthClientProvider;
}

async function connect(serverUrl: string, options: ConnectOptions = {}): Promise<Session> {
  const url = new URL(serverUrl);
  const mode = negotiationMode();
  const makeTransport = () => new StreamableHTTPClientTransport(url, options.authProvider ? { authProvider: options.authProvider } : {});
  const makeClient = () => {
    const client = new Client(CLIENT_INFO, { capabilities: options.capabilities ?? {}, versionNegotiation: { mode } });
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
      const callback = error instanceof UnauthorizedError ? headless?.takeCallback() : undefined;
      if (callback === undefined) throw error;
      // The failed connect closed this transport and client: finish the authorization on it, then
      // start over with fresh ones that pick up the tokens from the provider.
      await transport.finishAuth(callback);
      transport = makeTransport();
      client = makeClient();
    }
  }
  kit.log('connected:', mode, client.getProtocolEra(), client.getNegotiatedProtocolVersion());

  const current = transport;
  return {
    client,
    async run(operation) {
      for (;;) {
        try {
          return await operation();
        } catch (error) {
          const callback = error instanceof UnauthorizedError ? headless?.takeCallback() : undefined;
          if (callback === undefined) throw error;
          await current.finishAuth(callback);
        }
      }
    },
    close: () => client.close(),
  };
}

/** Connects, runs `body`, always closes. */
async function withSession(serverUrl: string, options: ConnectOptions, body: (session: Session) => Promise<void>): Promise<void> {
  const session = await connect(serverUrl, options);
  try {
    await body(session);
  } finally {
    await session.close();
  }
}

/** Lists the tools and optionally calls one. */
function listAndCall(call?: { name: string; arguments: Record<string, unknown> }): (session: Session) => Promise<void> {
  return async (session) => {
    const { tools } = await session.run(() => session.client.listTools());
    kit.log('tools:', tools.map((tool) => tool.name).join(', '));
    if (call) kit.log('result:', JSON.stringify(await session.run(() => session.client.callTool(call))));
  };
}

/** Issuer the MCP server's protected resource metadata points at (for credentials bound to it). */


const authorizationCodeFlow: Handler = (serverUrl) =>
  withSession(serverUrl, { authProvider: kit.headless({ clientMetadataUrl: CIMD_CLIENT_METADATA_URL }) }, listAndCall({ name: 'test-tool', arguments: {} }));

const handlers: Record<string, Handler> = {
  initialize: (serverUrl) => withSession(serverUrl, {}, listAndCall()),

  tools_call: (serverUrl) => withSession(serverUrl, {}, listAndCall({ name: 'add_numbers', arguments: { a: 2, b: 3 } })),

  'elicitation-sep1034-client-defaults': (serverUrl) =>
    withSession(
      serverUrl,
      {
        capabilities: { elicitation: { form: { applyDefaults: true } } },
        // Accept with nothing filled in: the SDK must fill every field from the schema's defaults.
        setup: (client) => client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: {} })),
      },
      listAndCall({ name: 'test_client_elicitation_defaults', arguments: {} }),
    ),

  'sse-retry': (serverUrl) => withSession(serverUrl, {}, listAndCall({ name: 'test_reconnection', arguments: {} })),

  // SEP-2575: every request carries the `_meta` envelope and a matching MCP-Protocol-Version header;
  // the server rejects the first request with -32022 and the client must retry at a version it
  // supports. Every optional capability is declared so that each capability check has something to
  // look at.
  'request-metadata': (serverUrl) =>
    withSession(
      serverUrl,
      {
        capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: { form: {} } },
        setup: (client) => {
          client.setRequestHandler('roots/list', async () => ({ roots: [] }));
          client.setRequestHandler('sampling/createMessage', async () => {
            throw new Error('this client has no model');
          });
          client.setRequestHandler('elicitation/create', async () => ({ action: 'decline' }));
        },
      },
      listAndCall(),
    ),

  // SEP-2322 (MRTR): each tool answers `input_required` (an elicitation, with or without an opaque
  // requestState); the SDK fulfils it through the elicitation handler and retries on a new id.
  'sep-2322-client-request-state': (serverUrl) =>
    withSession(
      serverUrl,
      {
        capabilities: { elicitation: { form: {} } },
        setup: (client) => client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirmed: true } })),
      },
      async (session) => {
        await session.client.listTools();
        for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated']) {
          kit.log(name, JSON.stringify(await session.client.callTool({ name, arguments: {} })));
        }
        // The last tool answers without `resultType`. The scenario only checks that the client does
        // not retry it as if input were required; SDK 2.4.0 goes further on a 2026-07-28 connection
        // and rejects the result ("missing required resultType — servers implementing protocol
        // revision 2026-07-28 MUST include it"). Either is "not input_required": the rejection is
        // logged, not fatal, so the exit code reflects the rest of the scenario.
        try {
          kit.log('test_mrtr_no_result_type', JSON.stringify(await session.client.callTool({ name: 'test_mrtr_no_result_type', arguments: {} })));
        } catch (error) {
          kit.log('test_mrtr_no_result_type rejected:', error instanceof Error ? error.message : error);
        }
      },
    ),

  // SEP-2243: Mcp-Method on every POST, Mcp-Name on tools/call, resources/read and prompts/get.
  'http-standard-headers': (serverUrl) =>
    withSession(serverUrl, {}, async ({ client }) => {
      const { tools } = await client.listTools();
      for (const tool of tools) await client.callTool({ name: tool.name, arguments: {} });
      const { resources } = await client.listResources();
      for (const resource of resources) await client.readResource({ uri: resource.uri });
      const { prompts } = await client.listPrompts();
      for (const prompt of prompts) await client.getPrompt({ name: prompt.name, arguments: {} });
    }),

  // SEP-2243: parameters annotated `x-mcp-header` are mirrored into Mcp-Param-* headers. The CLI
  // names the calls (and the values whose encoding it checks) in the context.
  'http-custom-headers': (serverUrl) =>
    withSession(serverUrl, {}, async ({ client }) => {
      await client.listTools();
      const calls = scenarioContext<Context>().toolCalls ?? [];
      if (calls.length === 0) throw new Error('MCP_CONFORMANCE_CONTEXT names no toolCalls');
      for (const call of calls) await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
    }),

  // SEP-2243: a tool whose `x-mcp-header` annotations are invalid must never be called; the valid
  // one must stay usable. Every listed tool is tried (as a model might), refusals are expected.
  'http-invalid-tool-headers': (serverUrl) =>
    withSession(serverUrl, {}, async ({ client }) => {
      const { tools } = await client.listTools();
      kit.log('listed:', tools.map((tool) => tool.name).join(', '));
      for (const tool of tools) {
        try {
          await client.callTool({ name: tool.name, arguments: tool.name === 'valid_tool' ? { region: 'us-west1' } : {} });
        } catch (error) {
          kit.log('refused', tool.name, error instanceof Error ? error.message : error);
        }
      }
    }),

  // SEP-2106: listing (and processing) a schema must not fetch its network `$ref`.
  'json-schema-ref-no-deref': (serverUrl) => withSession(serverUrl, {}, listAndCall()),

  // SEP-1613/SEP-2106: the focal tool's inputSchema, as the client holds it, goes back verbatim.
  'json-schema-2020-12-preservation': (serverUrl) =>
    withSession(serverUrl, {}, async ({ client }) => {
      const { tools } = await client.listTools();
      const focal = tools.find((tool) => tool.name === 'json_schema_2020_12_tool');
      if (!focal) throw new Error(`json_schema_2020_12_tool not listed (${tools.map((tool) => tool.name).join(', ')})`);
      await client.callTool({ name: 'json_schema_echo', arguments: { schema: focal.inputSchema } });
    }),

  'auth/pre-registration': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const provider = kit.headless({
      preRegistered: {
      client_id: requiredField(ctx, 'client_id'),
      client_secret: requiredField(ctx, 'client_secret'),
      redirect_uris: [REDIRECT_URL],
      issuer: await advertisedIssuer(serverUrl),
      },
    });
    await withSession(serverUrl, { authProvider: provider }, listAndCall());
  },

  'auth/client-credentials-basic': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const provider = new ClientCredentialsProvider({
      clientId: requiredField(ctx, 'client_id'),
      clientSecret: requiredField(ctx, 'client_secret'),
      expectedIssuer: await advertisedIssuer(serverUrl),
    });
    await withSession(serverUrl, { authProvider: provider }, listAndCall());
  },

  'auth/client-credentials-jwt': async (serverUrl) => {
    const ctx = scenarioContext<Context>();
    const provider = new PrivateKeyJwtProvider({
      clientId: requiredField(ctx, 'client_id'),
      privateKey: requiredField(ctx, 'private_key_pem'),
      algorithm: ctx.signing_algorithm ?? 'ES256',
      expectedIssuer: await advertisedIssuer(serverUrl),
    });
    await withSession(serverUrl, { authProvider: provider }, listAndCall());
  },
};

kit.run(handlers, authorizationCodeFlow);
