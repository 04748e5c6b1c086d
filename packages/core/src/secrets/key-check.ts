import type { SecretCipher } from './cipher.js';

/**
 * Check values: each key id that ever sealed a secret in a store is recorded with a value sealed
 * by that key, so a start with a missing or different key is refused before anything is read or
 * written. One format for every storage adapter, so the records can be copied between databases.
 */
const CHECK_PLAINTEXT = 'acs secret key check';
const checkContext = (keyId: string) => `acs:key-check:${keyId}`;

/** Thrown at start-up when the configured keys cannot read the secrets already stored. */
export class SecretKeyMismatchError extends Error {
  override readonly name = 'SecretKeyMismatchError';
}

/** The check value to record for the cipher's current key. */
export function secretKeyCheckValue(cipher: SecretCipher): { key_id: string; check_value: string } {
  return {
    key_id: cipher.currentKeyId,
    check_value: cipher.encrypt(CHECK_PLAINTEXT, checkContext(cipher.currentKeyId)),
  };
}

/**
 * Throws SecretKeyMismatchError, saying which key is needed, when a recorded key id is not
 * configured or a configured key fails its check value; nothing stored is touched.
 */
export function checkSecretKeys(
  recorded: readonly { key_id: string; check_value: string }[],
  cipher: SecretCipher,
): void {
  const missing: string[] = [];
  const wrong: string[] = [];
  for (const row of recorded) {
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
}
