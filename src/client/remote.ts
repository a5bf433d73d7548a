/**
 * The client side inside a discovery worker: a {@link ClientSide} rebuilt from its descriptor,
 * whose handlers and OAuth provider forward every call to the main thread over the body's port
 * ({@link WorkerRpc}). The SDK in the worker runs its full OAuth flow (metadata discovery,
 * registration, PKCE, refresh) against this proxy exactly as it would against the host's
 * provider; only the provider's state and side effects stay on the main thread.
 *
 * The worker stays terminable: a pending call holds nothing but a promise, and retirement
 * rejects every pending call at once.
 */
import type { MessagePort } from 'node:worker_threads';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import type { CreateMessageResult, ElicitResult, Root } from '@modelcontextprotocol/sdk/types.js';
import type { ClientSide, ClientSideDescriptor, ProviderMethod, ProviderSnapshot, SideCall } from '../connection/client-side.js';

/** A call a worker sends to the main thread. */
export interface RpcRequest {
  type: 'rpc';
  generation: number;
  /** 0 for a notification that wants no reply. */
  id: number;
  server: string;
  call: SideCall;
}

/** The worker gave up on a call (the server cancelled it, or the body is retiring). */
export interface RpcCancel {
  type: 'rpc-cancel';
  generation: number;
  id: number;
}

/** The main thread's answer to an {@link RpcRequest}. */
export type RpcReply =
  | { type: 'rpc-reply'; id: number; ok: true; value: unknown }
  | { type: 'rpc-reply'; id: number; ok: false; error: { message: string; code?: number } };

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** The worker's end of the call channel of one discovery body. */
export class WorkerRpc {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    private readonly port: MessagePort,
    private readonly generation: number,
    stopped: AbortSignal,
  ) {
    port.on('message', (message: RpcReply) => {
      if (message?.type !== 'rpc-reply') return;
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (message.ok) waiting.resolve(message.value);
      // A JSON-RPC code (e.g. from an elicitation handler) goes back to the server as that code.
      else waiting.reject(message.error.code === undefined ? new Error(message.error.message) : new ProtocolError(message.error.code, message.error.message));
    });
    stopped.addEventListener('abort', () => this.rejectAll(new Error('discovery was retired')), { once: true });
  }

  /** Sends a call and waits for its reply; `signal` withdraws it. */
  call(server: string, call: SideCall, signal?: AbortSignal): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = (): void => {
        if (!this.pending.delete(id)) return;
        this.post({ type: 'rpc-cancel', generation: this.generation, id });
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        resolve: (value) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      this.post({ type: 'rpc', generation: this.generation, id, server, call });
    });
  }

  /** Sends a call that needs no reply. */
  notify(server: string, call: SideCall): void {
    this.post({ type: 'rpc', generation: this.generation, id: 0, server, call });
  }

  private post(message: RpcRequest | RpcCancel): void {
    try {
      this.port.postMessage(message);
    } catch {
      // The port is closed: the body is ending and its calls are being rejected.
    }
  }

  private rejectAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}

/** A provider whose state and side effects live on the main thread. */
function remoteProvider(snapshot: ProviderSnapshot, call: (method: ProviderMethod, args: unknown[]) => Promise<unknown>): OAuthClientProvider {
  const has = new Set(snapshot.methods);
  const provider: OAuthClientProvider = {
    get redirectUrl() {
      return snapshot.redirectUrl;
    },
    get clientMetadata() {
      return snapshot.clientMetadata;
    },
    clientInformation: async () => (await call('clientInformation', [])) as OAuthClientInformationMixed | undefined,
    tokens: async () => (await call('tokens', [])) as OAuthTokens | undefined,
    saveTokens: async (tokens) => void (await call('saveTokens', [tokens])),
    redirectToAuthorization: async (url) => void (await call('redirectToAuthorization', [url.href])),
    saveCodeVerifier: async (verifier) => void (await call('saveCodeVerifier', [verifier])),
    codeVerifier: async () => String(await call('codeVerifier', [])),
  };
  if (snapshot.clientMetadataUrl !== undefined) provider.clientMetadataUrl = snapshot.clientMetadataUrl;
  if (has.has('state')) provider.state = async () => String(await call('state', []));
  if (has.has('saveClientInformation')) provider.saveClientInformation = async (info) => void (await call('saveClientInformation', [info]));
  if (has.has('invalidateCredentials')) provider.invalidateCredentials = async (scope) => void (await call('invalidateCredentials', [scope]));
  if (has.has('saveDiscoveryState')) provider.saveDiscoveryState = async (state) => void (await call('saveDiscoveryState', [state]));
  if (has.has('discoveryState')) provider.discoveryState = async () => (await call('discoveryState', [])) as never;
  if (has.has('validateResourceURL')) {
    provider.validateResourceURL = async (serverUrl, resource) => {
      const href = await call('validateResourceURL', [String(serverUrl), resource]);
      return typeof href === 'string' ? new URL(href) : undefined;
    };
  }
  if (has.has('prepareTokenRequest')) {
    provider.prepareTokenRequest = async (scope) => {
      const params = await call('prepareTokenRequest', [scope]);
      return typeof params === 'string' ? new URLSearchParams(params) : undefined;
    };
  }
  if (has.has('addClientAuthentication')) {
    provider.addClientAuthentication = async (headers, params, url, metadata) => {
      const result = (await call('addClientAuthentication', [[...headers], params.toString(), String(url), metadata])) as { headers: [string, string][]; params: string };
      for (const name of [...headers.keys()]) headers.delete(name);
      for (const [name, value] of result.headers) headers.set(name, value);
      for (const name of [...new Set(params.keys())]) params.delete(name);
      for (const [name, value] of new URLSearchParams(result.params)) params.append(name, value);
    };
  }
  return provider;
}

/** A forwarded handler's failure, as the JSON-RPC error the server should get. */
function asRpcError(error: unknown): ProtocolError {
  if (error instanceof ProtocolError) return error;
  return new ProtocolError(ProtocolErrorCode.InternalError, error instanceof Error ? error.message : String(error));
}

/** Rebuilds a client side in the worker; its handlers and provider call the main thread. */
export function remoteSide(server: string, descriptor: ClientSideDescriptor, rpc: WorkerRpc): ClientSide {
  const forward = async <T>(call: SideCall, signal: AbortSignal): Promise<T> => {
    try {
      return (await rpc.call(server, call, signal)) as T;
    } catch (error) {
      throw asRpcError(error);
    }
  };
  const side: ClientSide = {
    info: descriptor.info,
    capabilities: descriptor.capabilities,
    ...(descriptor.authError === undefined ? {} : { authError: descriptor.authError }),
    ...(descriptor.auth ? { authProvider: remoteProvider(descriptor.auth, (method, args) => rpc.call(server, { op: 'provider', method, args })) } : {}),
    ...(descriptor.elicitation ? { elicit: (params, signal) => forward<ElicitResult>({ op: 'elicit', params }, signal) } : {}),
    ...(descriptor.sampling ? { sample: (params, signal) => forward<CreateMessageResult>({ op: 'sample', params }, signal) } : {}),
    ...(descriptor.roots ? { listRoots: (signal) => forward<Root[]>({ op: 'roots' }, signal) } : {}),
    ...(descriptor.logLevel ? { logLevel: descriptor.logLevel } : {}),
    log: (params) => rpc.notify(server, { op: 'log', params }),
    challenged: (challenge) => rpc.notify(server, { op: 'challenge', challenge }),
  };
  return side;
}
