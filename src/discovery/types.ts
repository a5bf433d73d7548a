/**
 * The data that discovery produces and that crosses the worker boundary. Everything here is plain,
 * structured-clone-safe data: no class instances, no functions.
 */
import type { Prompt, Resource, ResourceTemplate, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { SerializedError } from '../errors.js';
import type { ServerConfig } from '../config/types.js';
import type { ClientSideDescriptor } from '../connection/client-side.js';
import type { RpcCancel, RpcRequest } from '../client/remote.js';

/** Why a server could not be discovered. */
export type FailureKind = 'spawn' | 'exited' | 'timeout' | 'refused' | 'http' | 'auth' | 'protocol' | 'config' | 'cancelled' | 'too_large';

/** Details of a failed server. */
export interface ServerFailure {
  kind: FailureKind;
  message: string;
  exitCode?: number | null;
  signal?: string | null;
  stderrTail?: string;
  httpStatus?: number;
}

/** How long each phase of one server's discovery took, in ms. */
export interface DiscoveryTimings {
  /** From the start of this server's attempt to the end of `initialize`. */
  connectMs?: number;
  /** Listing tools, prompts and resources. */
  listMs?: number;
  /** The whole attempt. */
  totalMs: number;
  /**
   * Set when the server, started at `discovery.niceness`, was found starved (waiting for a CPU for
   * half of a check window: half its connect timeout, at most 5 s) and got normal priority back:
   * how long it had waited by then. Yielding must not cost a server its discovery.
   */
  cpuWaitMs?: number;
}

/** An HTTP session the body created, which the main thread may resume instead of initialising again. */
export interface ResumableSession {
  sessionId: string;
  protocolVersion: string;
}

/** What discovery learned of one server. */
export type ServerOutcome =
  | { status: 'pending'; server: string }
  | { status: 'disabled'; server: string }
  | {
      status: 'ready';
      server: string;
      tools: Tool[];
      prompts: Prompt[];
      resources: Resource[];
      resourceTemplates: ResourceTemplate[];
      /** The server's declared capabilities (a resumed session never sees `initialize`). */
      capabilities?: import('@modelcontextprotocol/sdk/types.js').ServerCapabilities;
      serverInfo?: { name: string; version: string };
      protocolVersion?: string;
      /** The era negotiated (or adopted from the cache): what the host caches for this server. */
      era?: import('../connection/era.js').EraVerdict;
      /** The cached era that was offered turned out stale (the server refused it). */
      eraStale?: true;
      /** How long the server vouches for its tool list (its `ttlMs`, 2026-07-28): then it is re-discovered. */
      freshForMs?: number;
      instructions?: string;
      session?: ResumableSession;
      timings: DiscoveryTimings;
    }
  | {
      status: 'failed';
      server: string;
      failure: ServerFailure;
      timings: DiscoveryTimings;
      /** The attempt adopted a cached era and failed (or was refused it): the verdict is dropped. */
      eraStale?: true;
    };

/** A settled outcome (what the body streams). */
export type SettledOutcome = Exclude<ServerOutcome, { status: 'pending' }>;

/** Test-only hooks for forcing the hard rungs of the quiescence ladder. Never set in production. */
export interface BodyTestHooks {
  /** After every stdio server has been spawned, block the thread synchronously for this long (ms; -1 = forever). */
  blockAfterSpawnMs?: number;
  /** Between the first spawn and the recording of its pid, block the thread synchronously (ms; -1 = forever). */
  blockBeforeRecordMs?: number;
}

/** What one server may send during discovery (`limits` of the host). */
export interface DiscoveryLimits {
  maxMessageBytes: number;
  maxCatalogItems: number;
  maxSchemaDepth: number;
}

/** The task handed to one discovery body. */
export interface DiscoveryTask {
  profile: string;
  generation: number;
  slots: SharedArrayBuffer;
  servers: ServerConfig[];
  /** The client side of each server, by server name (its handlers answer over `port`). */
  sides: Map<string, ClientSideDescriptor>;
  serverConcurrency: number;
  connectTimeoutMs: number;
  /** Scheduling priority of the worker thread (and so of the servers it spawns). */
  niceness: number;
  limits: DiscoveryLimits;
  /** The host's lifeline marker, added to every spawned server's environment. */
  markerEnv?: Record<string, string>;
  /** Cached era verdicts by server name (adopted instead of probing). */
  eras?: Record<string, import('../connection/era.js').EraVerdict>;
  port: import('node:worker_threads').MessagePort;
  testHooks?: BodyTestHooks;
}

/** Messages a body posts on its port. Each carries its generation; stale ones are dropped. */
export type BodyMessage =
  | { type: 'started'; generation: number; threadId: number }
  /** One server's discovery began (published as a trace on the main thread: channels are per thread). */
  | { type: 'server-start'; generation: number; server: string; transport: import('../config/types.js').TransportKind }
  /**
   * One server settled. The outcome travels as JSON text: a structured clone of a hostile
   * catalogue can overflow the receiving thread's smaller stack and be dropped silently
   * ('messageerror'), taking the server's outcome with it; JSON.parse is iterative.
   */
  | { type: 'outcome'; generation: number; server: string; json: string }
  | { type: 'done'; generation: number; error?: SerializedError }
  | RpcRequest
  | RpcCancel;

/** What the task itself returns to piscina. */
export interface BodyResult {
  generation: number;
  cancelled: boolean;
}
