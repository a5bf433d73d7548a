/**
 * Plain-text table printing and number formatting for the bench report. No colours, no
 * box-drawing characters: the output is meant to be pasted into issues and commit messages.
 */

/** Column alignment. */
export type Align = 'left' | 'right';

/** Renders rows under a header, columns padded to their widest cell, separated by two spaces. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    widths
      .map((width, column) => {
        const cell = cells[column] ?? '';
        return align[column] === 'right' ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

/** A number with a precision that suits its size: 0.12, 4.56, 78.9, 1234; integers as they are. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value) || Number.isInteger(value)) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1000) return value.toFixed(0);
  if (magnitude >= 100) return value.toFixed(1);
  if (magnitude >= 1) return value.toFixed(2);
  return value.toPrecision(2);
}

/** A value with its unit: `12.34 ms`, `3 count`. */
export function formatWithUnit(value: number, unit: string): string {
  return unit === 'count' ? formatNumber(value) : `${formatNumber(value)} ${unit}`;
}
