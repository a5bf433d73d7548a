/**
 * `…/list_changed` refreshes of one supervised server: a notification re-lists that kind after a
 * debounce, one refresh at a time per kind; a notification that arrives while a refresh runs
 * makes it run once more afterwards (it may have listed before the change). A refreshed list is
 * held to the limits discovery applies (over them, the old list stays), and a failed refresh keeps
 * the old list: the next notification or discovery will try again.
 */
import type { McpClient as Client } from '../connection/connect.js';
import { ListPromptsResultSchema, ListResourceTemplatesResultSchema, ListResourcesResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Prompt, Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import type { Clock, TimerHandle } from '../clock.js';
import { DEFAULT_MAX_CATALOG_ITEMS, DEFAULT_MAX_SCHEMA_DEPTH, nestsDeeperThan } from '../connection/limits.js';
import { listAllPages, listTools } from '../connection/lists.js';
import type { CatalogLists, ListKind, SessionOptions } from './types.js';

/** What a refresher needs of its supervisor. */
export interface ListRefreshDeps {
  clock: Clock;
  options: Pick<SessionOptions, 'listChangedDebounceMs' | 'callTimeoutMs' | 'maxCatalogItems' | 'maxSchemaDepth'>;
  /** The client of the live session, if there is one. */
  client(): Client | undefined;
  /** Hands a refreshed list on (the supervisor drops it once closed). */
  publish(lists: CatalogLists): void;
}

/** The refresh of one kind: its debounce timer, the refresh running, and whether to run again. */
interface KindRefresh {
  timer: TimerHandle | undefined;
  running: Promise<void> | undefined;
  again: boolean;
}

type RequestOptions = { timeout: number };
type Page<T> = { items: T[]; nextCursor?: string | undefined };

function cursorParams(cursor: string | undefined): { cursor?: string } {
  return cursor === undefined ? {} : { cursor };
}

/** One page of each list method (tools are read through the SDK: see `connection/lists.ts`). */
const pages = {
  prompts: (client: Client, cursor: string | undefined, options: RequestOptions): Promise<Page<Prompt>> =>
    client.request({ method: 'prompts/list', params: cursorParams(cursor) }, ListPromptsResultSchema, options).then((page) => ({ items: page.prompts, nextCursor: page.nextCursor })),
  resources: (client: Client, cursor: string | undefined, options: RequestOptions): Promise<Page<Resource>> =>
    client.request({ method: 'resources/list', params: cursorParams(cursor) }, ListResourcesResultSchema, options).then((page) => ({ items: page.resources, nextCursor: page.nextCursor })),
  resourceTemplates: (client: Client, cursor: string | undefined, options: RequestOptions): Promise<Page<ResourceTemplate>> =>
    client
      .request({ method: 'resources/templates/list', params: cursorParams(cursor) }, ListResourceTemplatesResultSchema, options)
      .then((page) => ({ items: page.resourceTemplates, nextCursor: page.nextCursor })),
};

/** Re-lists one kind, every page (resources bring their templates along, when the server has them). */
async function listKind(client: Client, kind: ListKind, options: RequestOptions): Promise<CatalogLists> {
  if (kind === 'tools') return { tools: (await listTools(client, options)).tools };
  if (kind === 'prompts') return { prompts: await listAllPages('prompts/list', (cursor) => pages.prompts(client, cursor, options)) };
  const resources = await listAllPages('resources/list', (cursor) => pages.resources(client, cursor, options));
  const resourceTemplates = await listAllPages('resources/templates/list', (cursor) => pages.resourceTemplates(client, cursor, options)).catch(() => undefined);
  return { resources, ...(resourceTemplates === undefined ? {} : { resourceTemplates }) };
}

/** True when no list has more than `maxItems` items and no tool schema nests deeper than `maxDepth`. */
export function withinLimits(lists: CatalogLists, maxItems: number, maxDepth: number): boolean {
  for (const items of [lists.tools, lists.prompts, lists.resources, lists.resourceTemplates]) if (items && items.length > maxItems) return false;
  return !(lists.tools ?? []).some((tool) => nestsDeeperThan(tool.inputSchema, maxDepth) || nestsDeeperThan(tool.outputSchema, maxDepth));
}

/** The `list_changed` refreshes of one server. */
export class ListRefresher {
  private readonly refreshes: Record<ListKind, KindRefresh> = {
    tools: { timer: undefined, running: undefined, again: false },
    prompts: { timer: undefined, running: undefined, again: false },
    resources: { timer: undefined, running: undefined, again: false },
  };
  private stopped = false;

  constructor(private readonly deps: ListRefreshDeps) {}

  /** A `list_changed` of `kind` arrived: re-list it once the debounce has passed. */
  schedule(kind: ListKind): void {
    if (this.stopped) return;
    const refresh = this.refreshes[kind];
    const { clock, options } = this.deps;
    clock.clearTimeout(refresh.timer);
    refresh.timer = clock.setTimeout(() => {
      refresh.timer = undefined;
      if (refresh.running) {
        refresh.again = true;
        return;
      }
      refresh.running = this.relist(kind).finally(() => {
        refresh.running = undefined;
        if (refresh.again) {
          refresh.again = false;
          this.schedule(kind);
        }
      });
    }, options.listChangedDebounceMs);
  }

  /** Cancels every pending refresh, and schedules none after (the supervisor closed). */
  stop(): void {
    this.stopped = true;
    for (const refresh of Object.values(this.refreshes)) this.deps.clock.clearTimeout(refresh.timer);
  }

  private async relist(kind: ListKind): Promise<void> {
    const client = this.deps.client();
    if (!client) return;
    const { options } = this.deps;
    try {
      const lists = await listKind(client, kind, { timeout: options.callTimeoutMs });
      if (!withinLimits(lists, options.maxCatalogItems ?? DEFAULT_MAX_CATALOG_ITEMS, options.maxSchemaDepth ?? DEFAULT_MAX_SCHEMA_DEPTH)) return;
      this.deps.publish(lists);
    } catch {
      // The next notification or discovery will try again; a failed refresh keeps the old list.
    }
  }
}
