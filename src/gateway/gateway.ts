/**
 * `createGateway`: the epoch, the bind ledger and the `McpServer` wiring of one in-process MCP
 * gateway, behind one object.
 *
 * For a host on `StreamableHTTPServerTransport`, "session ids carry the epoch" means: build each
 * transport with `sessionIdGenerator: gw.sessionIdGenerator()`, and in the router answer 404
 * (JSON-RPC error -32001, as the SDK does) to any `Mcp-Session-Id` for which
 * `gw.isCurrentSession(id)` is false, before looking the session up. After `gw.bump()` every
 * client then gets the 404 the spec tells it to re-initialise on, even when old transports are
 * still in the host's table (or in a table shared by several replicas).
 *
 * With a `coordinator` (e.g. `redisCoordinator` from `mcp-supervisor/redis`) the epoch and the
 * ledger are the fleet's: a bind recorded on one replica is seen by all, and `bump()` on any
 * replica moves every one of them. Without it (the default) everything stays in this process.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { systemClock, type Clock } from './clock.js';
import { epochOfSession, mintSessionId, newEpochId } from './epoch.js';
import { BindLedger, type BindStatus, type ProbeRequest, type ProbeStatus, type WriteOrigin } from './ledger.js';
import { ToolBinder, type Attachment, type AttachOptions, type IdentifyAgent } from './attach.js';
import type { GatewayCoordinator } from './fleet.js';
import { MemoryBindStore, type BindStore } from './store.js';
import { isFunction } from './validate.js';
import { McpSupervisorError } from '../errors.js';

/** Options of {@link createGateway}. */
export interface GatewayOptions {
  /** Resolves the agent of a tool call from auth info or session; see {@link IdentifyAgent}. */
  identify: IdentifyAgent;
  /** Time source (default: `Date.now`). */
  clock?: Clock;
  /** Ledger storage (default: a new {@link MemoryBindStore}). */
  store?: BindStore;
  /**
   * Makes epoch ids (default: time in base 36 plus 48 random bits). Replicas of one deployment
   * that share a store may inject a deployment-wide id. Must never repeat the current one.
   */
  newEpoch?: () => string;
  /** Receives failures that are deliberately not thrown (store errors, a throwing resolver). */
  onError?: (error: unknown, context: string) => void;
  /**
   * Shares the epoch and the ledger with the other replicas of a fleet (see `docs/fleet.md`).
   * Takes the place of `store` and `newEpoch`, which must then be absent.
   */
  coordinator?: GatewayCoordinator;
}

/** One gateway; see the module comment. */
export interface Gateway {
  /** The current epoch id. */
  readonly epoch: string;
  /**
   * Starts a new epoch (call it on every gateway build or restart): every agent is unbound at
   * once and sessions of older epochs stop being current. Resolves to the new epoch once the
   * old ledgers are purged; never rejects in a single process. With a `coordinator` it moves the
   * whole fleet, and rejects (nothing changed) when the fleet's store cannot be reached.
   */
  bump(): Promise<string>;
  /**
   * Instruments `server`: tools registered from now on (and those passed in `options.tools`)
   * record a success for the calling agent on completion, and `mcp_probe` is added. Throws
   * `INVALID_CONFIG` if `server` already has tools and their handles were not passed.
   */
  attach(server: McpServer, options?: AttachOptions): Attachment;
  /** The recording wrapper `attach` uses, for callbacks registered some other way. */
  wrap<F>(callback: F): F;
  /** Records that a probe request was delivered to `agent` now (replacing any earlier one of this epoch). */
  requestProbe(agent: string, request: ProbeRequest): Promise<ProbeStatus>;
  /**
   * Records a passive success for `agent`. Call it only from inside a tool handler that ran for
   * that agent, passing the epoch the handler started in (`gw.originEpoch(extra)`); resolves
   * `false` when that epoch is no longer current.
   */
  recordSuccess(agent: string, origin?: WriteOrigin): Promise<boolean>;
  /** The read-only bind status of `agent` in the current epoch. */
  status(agent: string): Promise<BindStatus>;
  /** A `sessionIdGenerator` for `StreamableHTTPServerTransport`: ids are `${epoch}.${uuid}`. */
  sessionIdGenerator(): () => string;
  /** Whether `sessionId` was minted by this gateway in the current epoch. */
  isCurrentSession(sessionId: string | undefined): boolean;
  /** The epoch a tool call belongs to (its session's epoch, else the current one). */
  originEpoch(extra: { sessionId?: string | undefined } | undefined): string;
}

/** Creates a {@link Gateway}. */
export function createGateway(options: GatewayOptions): Gateway {
  isFunction('identify', options?.identify);
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? (() => {});
  const newEpoch = options.newEpoch ?? (() => newEpochId(clock.now()));
  isFunction('newEpoch', newEpoch);
  const fleet = options.coordinator;
  if (fleet !== undefined) {
    if (typeof fleet !== 'object' || fleet === null || typeof fleet.epochs !== 'object' || typeof fleet.store !== 'object') {
      throw new McpSupervisorError('INVALID_CONFIG', `Expected \`coordinator\` to be a fleet coordinator (with \`epochs\` and \`store\`), got \`${String(fleet)}\` (${typeof fleet})`);
    }
    // Either would silently fork this replica from the fleet.
    if (options.store !== undefined || options.newEpoch !== undefined) {
      throw new McpSupervisorError('INVALID_CONFIG', 'Expected either `coordinator` or `store`/`newEpoch`, got both: a coordinator brings the fleet\'s store and epoch');
    }
  }
  const ledger = new BindLedger({
    store: fleet?.store ?? options.store ?? new MemoryBindStore(),
    clock,
    newEpoch,
    onError,
    ...(fleet === undefined ? {} : { epochs: fleet.epochs }),
  });
  const binder = new ToolBinder(ledger, options.identify, onError);

  return Object.freeze({
    get epoch() {
      return ledger.epoch;
    },
    bump: () => ledger.bump(),
    attach: (server: McpServer, attachOptions?: AttachOptions) => binder.attach(server, attachOptions),
    wrap: <F>(callback: F) => binder.wrap(callback),
    requestProbe: (agent: string, request: ProbeRequest) => ledger.requestProbe(agent, request),
    recordSuccess: (agent: string, origin?: WriteOrigin) => ledger.recordSuccess(agent, origin),
    status: (agent: string) => ledger.status(agent),
    sessionIdGenerator: () => () => mintSessionId(ledger.epoch),
    isCurrentSession: (sessionId: string | undefined) => epochOfSession(sessionId) === ledger.epoch,
    originEpoch: (extra: { sessionId?: string | undefined } | undefined) => epochOfSession(extra?.sessionId) ?? ledger.epoch,
  });
}
