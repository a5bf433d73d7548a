/**
 * The doctor's table: one row per server with its transport, the protocol version it is spoken to
 * in (2025-11-25 or 2026-07-28, once connected), status, tool count, connect time and,
 * for failures, the kind and message (the stderr tail for exits). Secrets never appear: messages
 * are scrubbed of every registered secret (views already are; this is belt and braces), before any
 * truncation, so a secret cut by the column width cannot leak its first half.
 */
import { scrubText } from '../config/redact.js';
import type { ProfileConfig } from '../config/types.js';
import type { ReadinessView } from '../readiness/types.js';

/** One row of the report. */
export interface ServerRow {
  profile: string;
  server: string;
  transport: string;
  /** The protocol version the server was spoken to in (null until it was). */
  protocol: string | null;
  status: string;
  tools: number | null;
  /** Tools the server's tool filter hides (absent when none). */
  toolsHidden?: number;
  connectMs: number | null;
  kind: string | null;
  message: string | null;
}

/** Rows for one profile. */
export function rowsFor(profile: string, config: ProfileConfig | undefined, view: ReadinessView): ServerRow[] {
  if (view.error && !config) {
    return [{ profile, server: '-', transport: '-', protocol: null, status: 'failed', tools: null, connectMs: null, kind: view.error.code, message: scrubText(view.error.message) }];
  }
  return Object.entries(view.servers).map(([server, state]) => {
    const transport = config?.servers[server]?.transport ?? '?';
    const protocol = state.status === 'ready' ? (state.protocolVersion ?? null) : null;
    if (state.status === 'ready') {
      const connectMs = Math.round(state.timings.connectMs ?? state.timings.totalMs);
      const hidden = state.toolsHidden === undefined ? {} : { toolsHidden: state.toolsHidden };
      // Ready but useless is the worst status a doctor can give: a warning says why instead.
      if (state.warnings && state.warnings.length > 0) {
        return { profile, server, transport, protocol, status: 'warning', tools: state.tools, ...hidden, connectMs, kind: 'warning', message: scrubText(state.warnings.join('; ')) };
      }
      return { profile, server, transport, protocol, status: 'ready', tools: state.tools, ...hidden, connectMs, kind: null, message: null };
    }
    if (state.status === 'auth_required') {
      const message = state.authorizationUrl ? `${state.message}; authorize at ${state.authorizationUrl}` : state.message;
      return { profile, server, transport, protocol, status: 'auth_required', tools: null, connectMs: null, kind: 'auth', message: scrubText(message) };
    }
    if (state.status === 'failed') {
      const detail = state.kind === 'exited' && state.stderrTail ? `${state.message}; stderr: ${state.stderrTail.split('\n').slice(-2).join(' | ')}` : state.message;
      return { profile, server, transport, protocol, status: 'failed', tools: null, connectMs: null, kind: state.kind, message: scrubText(detail) };
    }
    return { profile, server, transport, protocol, status: state.status, tools: null, connectMs: null, kind: null, message: null };
  });
}

function truncate(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, width - 1)}…`;
}

/** Renders rows as an aligned text table. */
export function renderTable(rows: readonly ServerRow[]): string {
  const header = ['PROFILE', 'SERVER', 'TRANSPORT', 'PROTOCOL', 'STATUS', 'TOOLS', 'CONNECT', 'KIND', 'MESSAGE'];
  const cells = rows.map((row) => [
    scrubText(row.profile),
    scrubText(row.server),
    row.transport,
    row.protocol ?? '-',
    row.status,
    row.tools === null ? '-' : row.toolsHidden ? `${row.tools} (+${row.toolsHidden} hidden)` : String(row.tools),
    row.connectMs === null ? '-' : `${row.connectMs} ms`,
    row.kind ?? '-',
    truncate(scrubText(row.message ?? ''), 160),
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((line) => line[column]!.length)));
  const format = (line: string[]): string => line.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd();
  return [format(header), ...cells.map(format)].join('\n');
}
