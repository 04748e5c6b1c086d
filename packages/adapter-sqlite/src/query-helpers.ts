import { ResultAsync } from 'neverthrow';
import { type PageRequest, storeUnavailable, type StoreFailure } from '@acs/core/ports';
import type { Sqlite, SqliteValue } from './driver.js';

/**
 * Runs synchronous database work as a ResultAsync: a failing statement is a StoreUnavailable,
 * never a throw. The work runs whole, in its turn: nothing else of this process runs in between.
 */
export function run<T>(db: Sqlite, operation: string, work: () => T): ResultAsync<T, StoreFailure> {
  return ResultAsync.fromPromise(db.call(work), (cause) => storeUnavailable(operation, cause) as StoreFailure);
}

/**
 * A timestamp as a text that sorts as the instant does: UTC, microseconds (as PostgreSQL keeps
 * them), fixed width. Records keep their own text; these columns only filter and sort.
 */
export function instant(text: string): string {
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`not a timestamp: ${JSON.stringify(text)}`);
  const seconds = new Date(Math.floor(ms / 1000) * 1000).toISOString().slice(0, 19);
  const fraction = /T\d{2}:\d{2}:\d{2}[.,](\d+)/.exec(text)?.[1] ?? '';
  return `${seconds}.${fraction.padEnd(6, '0').slice(0, 6)}Z`;
}

/** Collects positional parameters while a query is assembled. */
export class Params {
  readonly values: SqliteValue[] = [];
  add(value: SqliteValue): string {
    this.values.push(value);
    return '?';
  }
}

/** The keyset condition and order for (created_at, id) paging. */
export function keyset(
  page: PageRequest,
  params: Params,
  order: 'newest_first' | 'oldest_first' = 'newest_first',
): { where: string; orderBy: string } {
  const desc = order === 'newest_first';
  const where = page.after
    ? `(created_at, id) ${desc ? '<' : '>'} (${params.add(instant(page.after.created_at))}, ${params.add(page.after.id)})`
    : '1';
  return { where, orderBy: desc ? 'created_at DESC, id DESC' : 'created_at ASC, id ASC' };
}

/** A list as one parameter: `column IN (SELECT value FROM json_each(?))` with this. */
export const jsonList = (values: readonly string[]): string => JSON.stringify(values);
