import { err, ok, type Result } from 'neverthrow';
import type { z } from 'zod';
import { validationFailed, type DomainError, type FieldIssue } from './errors.js';

/** zod issues as dotted field paths and messages. */
export function toFieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/** Validates untrusted input against a schema; failures become a ValidationFailed domain error. */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown): Result<z.output<S>, DomainError> {
  const parsed = schema.safeParse(input);
  return parsed.success ? ok(parsed.data) : err(validationFailed(toFieldIssues(parsed.error)));
}
