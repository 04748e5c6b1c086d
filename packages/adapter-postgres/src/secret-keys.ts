import { checkSecretKeys, secretKeyCheckValue } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';
import type { SqlExecutor } from './sql.js';
import type { Tables } from './tables.js';

export { SecretKeyMismatchError } from '@acs/core';

/**
 * Proves the configured cipher can read what is stored before anything is served:
 * every key id that ever encrypted a secret here is recorded with a check value.
 * A key id that is not configured, or a configured key that fails its check value,
 * stops start-up with a message that says which key is needed. Stored secrets are
 * never touched. Finally records the current key, so the next start can check it.
 */
export async function verifySecretKeys(db: SqlExecutor, t: Tables, cipher: SecretCipher): Promise<void> {
  const rows = await db.query<{ key_id: string; check_value: string }>(
    `SELECT key_id, check_value FROM ${t.secretKeys} ORDER BY created_at`,
  );
  checkSecretKeys(rows.rows, cipher);
  const current = secretKeyCheckValue(cipher);
  await db.query(`INSERT INTO ${t.secretKeys} (key_id, check_value) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING`, [
    current.key_id,
    current.check_value,
  ]);
}
