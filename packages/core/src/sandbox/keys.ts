import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { SandboxRecord, SandboxSpec } from './schema.js';

/** A fresh key for one sandbox: `acss_` and 32 random bytes in base64url. */
function newSandboxKey(): string {
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

/**
 * The record of a sandbox about to be started (STARTING, no URLs yet): a user's reservation, or
 * a pooled one. A spec whose server takes a session key gets a fresh key of its own.
 */
export function newStartingRecord(fields: {
  id: string;
  userId: string;
  spec: SandboxSpec;
  now: string;
  statusDetail: string | null;
}): SandboxRecord {
  const { id, userId, spec, now, statusDetail } = fields;
  return {
    id,
    user_id: userId,
    sandbox_spec_id: spec.id,
    spec,
    status: 'STARTING',
    status_detail: statusDetail,
    exposed_urls: [],
    created_at: now,
    updated_at: now,
    ...(spec.session_api_key_variable ? { session_api_key: newSandboxKey() } : {}),
  };
}
