import type { z } from 'zod';
import type { FieldIssue } from './errors.js';

/** zod issues as dotted field paths and messages. */
export function toFieldIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/**
 * Where a value holds text that storage cannot keep: a string or object key with U+0000 (NUL)
 * or an unpaired UTF-16 surrogate. PostgreSQL refuses both (in text and in jsonb), and a UTF-8
 * encoder would silently replace a lone surrogate, so such input is refused where it enters.
 * Returns the dotted path of the first one found ('' for the value itself), or null.
 */
export function findUnstorableText(value: unknown): string | null {
  const stack: [unknown, string][] = [[value, '']];
  while (stack.length > 0) {
    const [current, path] = stack.pop()!;
    if (typeof current === 'string') {
      if (!isStorableText(current)) return path;
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) stack.push([current[i], join(path, String(i))]);
    } else if (current !== null && typeof current === 'object') {
      const entries: [string, unknown][] = Object.entries(current as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        const childPath = join(path, key);
        if (!isStorableText(key)) return childPath;
        stack.push([child, childPath]);
      }
    }
  }
  return null;
}

/** Text with no U+0000 and no unpaired surrogate. */
const isStorableText = (text: string): boolean => !UNSTORABLE.test(text);

// eslint-disable-next-line no-control-regex -- U+0000 is exactly what this looks for.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The same rule as a JSON Schema pattern, for documents: text without U+0000. (An unpaired
 * surrogate is not Unicode text, so no JSON Schema string holds one; it is refused all the same.)
 */
export const STORABLE_TEXT_PATTERN = '^[^\\u0000]*$';

/** What a refused string is told. */
export const UNSTORABLE_TEXT_MESSAGE =
  'contains U+0000 (NUL) or an unpaired surrogate (invalid UTF-16); such text cannot be stored';

const join = (path: string, key: string) => (path === '' ? key : `${path}.${key}`);
