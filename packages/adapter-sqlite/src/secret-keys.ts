import { checkSecretKeys, secretKeyCheckValue } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';
import type { Sqlite } from './driver.js';

/**
 * Proves the configured cipher can read what is stored before anything is served, as the
 * PostgreSQL adapter does (core's check values): a key id that is not configured, or a
 * configured key that fails its check value, stops start-up with SecretKeyMismatchError and
 * nothing stored is touched. Finally records the current key, so the next start can check it.
 */
export function verifySecretKeys(db: Sqlite, cipher: SecretCipher): void {
  checkSecretKeys(
    db.all<{ key_id: string; check_value: string }>(
      `SELECT key_id, check_value FROM acs_secret_keys ORDER BY created_at, key_id`,
    ),
    cipher,
  );
  const current = secretKeyCheckValue(cipher);
  if (db.get(`SELECT 1 AS present FROM acs_secret_keys WHERE key_id = ?`, current.key_id)) return;
  db.run(
    `INSERT INTO acs_secret_keys (key_id, check_value, created_at) VALUES (?, ?, ?) ON CONFLICT (key_id) DO NOTHING`,
    current.key_id,
    current.check_value,
    new Date().toISOString(),
  );
}
