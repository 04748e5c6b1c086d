/** Prints rows as an aligned text table: the first `leftColumns` columns left-aligned, the rest right-aligned. */
export function printTable(header: readonly string[], rows: readonly (readonly string[])[], leftColumns = 1): void {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => (row[c] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, c) => (c < leftColumns ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number)))
      .join('  ')
      .trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}

/** A user of the service under test. */
export interface BenchUser {
  id: string;
  key: string;
}

/** One API request as `user`; throws on anything but 2xx, so a broken backend cannot look fast. */
export async function callApi(
  base: string,
  user: BenchUser,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<unknown> {
  const response = await fetch(base + path, {
    method,
    headers: { 'X-Session-API-Key': user.key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} as ${user.id}: HTTP ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as unknown;
}
