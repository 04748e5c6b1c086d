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
