import { ResultAsync, type Result } from 'neverthrow';

/**
 * The boundary between an operation written top-down (an async function that returns a
 * `Result`, awaiting each step and returning early on an error) and the `ResultAsync` its
 * callers chain. A rejected promise is a bug, not an error value, and stays a rejection.
 *
 * ```ts
 * async function pause(deps: PauseDeps, userId: string, id: string): Promise<Result<void, PauseError>> {
 *   const record = await deps.sandboxes.get(userId, id);
 *   if (record.isErr()) return err(record.error);
 *   …
 * }
 * const service = { pause: (userId, id) => resultAsync(pause(deps, userId, id)) };
 * ```
 */
export function resultAsync<T, E>(promise: Promise<Result<T, E>>): ResultAsync<T, E> {
  return new ResultAsync(promise);
}
