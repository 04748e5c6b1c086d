import type { z } from 'zod';

/** Parses with `schema` and returns the data, failing the test with the issues when it does not parse. */
export function parseOk<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new Error(`expected input to parse, got: ${JSON.stringify(result.error.issues)}`);
  return result.data;
}

/** Parses with `schema`, expects a failure and returns the distinct dotted paths of its issues, in order. */
export function issuePaths(schema: z.ZodType, input: unknown): string[] {
  const result = schema.safeParse(input);
  if (result.success) throw new Error(`expected input to be rejected, got: ${JSON.stringify(result.data)}`);
  return [...new Set(result.error.issues.map((issue) => issue.path.map(String).join('.')))];
}

/** Freezes an object graph so any mutation throws (modules run in strict mode). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/**
 * Resolves with what `work` resolves to, or fails saying what was still being waited for after
 * `ms` (default 60 s). For "it does not wait for X" checks: X is made to take far longer
 * (minutes), so the generous deadline tells prompt from stuck on any machine, however busy.
 */
export async function settlesWithin<T>(work: PromiseLike<T>, what: string, ms = 60_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${Math.round(ms / 1000)} s for ${what}`)), ms);
  });
  try {
    return await Promise.race([work, gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}
