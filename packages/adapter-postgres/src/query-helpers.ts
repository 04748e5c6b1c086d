import { ResultAsync } from 'neverthrow';
import { type PageRequest, storeUnavailable, type StoreFailure } from '@acs/core/ports';

/** Runs database work as a ResultAsync: a failing query is a StoreUnavailable, never a throw. */
export function run<T>(operation: string, work: () => Promise<T>): ResultAsync<T, StoreFailure> {
  return ResultAsync.fromPromise(
    Promise.resolve().then(work),
    (cause) => storeUnavailable(operation, cause) as StoreFailure,
  );
}

/** Collects positional parameters while a query is assembled. */
export class Params {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
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
    ? `(created_at, id) ${desc ? '<' : '>'} (${params.add(page.after.created_at)}::timestamptz, ${params.add(page.after.id)})`
    : 'TRUE';
  return { where, orderBy: desc ? 'created_at DESC, id DESC' : 'created_at ASC, id ASC' };
}

/** `%`, `_` and `\` taken literally inside ILIKE. */
export const likeEscape = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);
