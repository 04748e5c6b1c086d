import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SandboxRecord } from './schema.js';

/** A fresh key for one sandbox: `acss_` and 32 random bytes in base64url. */
export function newSandboxKey(): string {
  return `acss_${randomBytes(32).toString('base64url')}`;
}

/** Whether `presented` is this sandbox's key (compared in time that does not depend on where they differ). */
export function isSandboxKey(record: Pick<SandboxRecord, 'session_api_key'>, presented: string): boolean {
  const expected = record.session_api_key;
  if (!expected) return false;
  const a = createHash('sha256').update(expected).digest();
  const b = createHash('sha256').update(presented).digest();
  return timingSafeEqual(a, b);
}
