import type { SecretCipher } from '@acs/core/ports';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

const CHECK_PLAINTEXT = 'acs secret key check';
const checkContext = (keyId: string) => `acs:key-check:${keyId}`;

/** Thrown at start-up when the configured keys cannot read the secrets already stored. */
export class SecretKeyMismatchError extends Error {
  override readonly name = 'SecretKeyMismatchError';
}

/**
 * Proves the configured cipher can read what is stored before anything is served:
 * every key id that ever encrypted a secret here is recorded with a check value.
 * A key id that is not configured, or a configured key that fails its check value,
 * stops start-up with a message that says which key is needed. Stored secrets are
 * never touched. Finally records the current key, so the next start can check it.
 */
export async function verifySecretKeys(db: SqlExecutor, t: Tables, cipher: SecretCipher): Promise<void> {
  const rows = await db.query<{ key_id: string; check_value: string }>(`SELECT key_id, check_value FROM ${t.secretKeys} ORDER BY created_at`);
  const missing: string[] = [];
  const wrong: string[] = [];
  for (const row of rows.rows) {
    if (!cipher.hasKey(row.key_id)) missing.push(row.key_id);
    else if (cipher.decrypt(row.check_value, checkContext(row.key_id)).isErr()) wrong.push(row.key_id);
  }
  if (wrong.length > 0) {
    throw new SecretKeyMismatchError(
      `The secret key configured as id ${wrong.join(', ')} is not the key the stored secrets were encrypted with. ` +
        'Configure the original key (nothing stored was changed).',
    );
  }
  if (missing.length > 0) {
    throw new SecretKeyMismatchError(
      `Stored secrets were encrypted with key id ${missing.join(', ')}, which is not configured (configured: ${cipher.currentKeyId}). ` +
        'Configure that key, as the current key or as a previous key for rotation (nothing stored was changed).',
    );
  }
  await db.query(`INSERT INTO ${t.secretKeys} (key_id, check_value) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING`, [
    cipher.currentKeyId,
    cipher.encrypt(CHECK_PLAINTEXT, checkContext(cipher.currentKeyId)),
  ]);
}
