import { randomUUID } from 'node:crypto';

/** Produces identifiers for new records. Injected so tests can make ids predictable. */
export interface IdGenerator {
  /** A new, globally unique id: 32 lowercase hex characters. */
  next(): string;
}

export const randomIdGenerator: IdGenerator = {
  next: () => randomUUID().replaceAll('-', ''),
};

/** Deterministic ids for tests: `prefix` padded to 32 hex characters by a counter. */
export function sequentialIdGenerator(start = 1): IdGenerator {
  let n = start;
  return { next: () => (n++).toString(16).padStart(32, '0') };
}

const HEX32 = /^[0-9a-f]{32}$/;
const DASHED_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Ids are emitted as 32 hex characters; clients may send the dashed UUID form too
 * (as OpenHands accepts both). Anything else is returned unchanged, so client-chosen
 * ids keep working.
 */
export function normalizeId(id: string): string {
  const lower = id.toLowerCase();
  if (HEX32.test(lower)) return lower;
  if (DASHED_UUID.test(lower)) return lower.replaceAll('-', '');
  return id;
}
