import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { err, ok, type Result } from 'neverthrow';

/**
 * Encrypts secret values for storage. `context` is bound to the ciphertext (as
 * associated data), so a value cannot be moved to another user or field and still
 * decrypt. Envelopes carry the id of the key that made them, so keys can rotate:
 * new values use the current key, old ones stay readable while their key is known.
 */
export interface SecretCipher {
  readonly currentKeyId: string;
  encrypt(plaintext: string, context: string): string;
  decrypt(envelope: string, context: string): Result<string, SecretCipherError>;
  /** The key id inside an envelope, or null when it is not one. */
  keyIdOf(envelope: string): string | null;
  hasKey(keyId: string): boolean;
}

export interface SecretCipherError {
  type: 'unknown_key' | 'not_an_envelope' | 'tampered_or_wrong_key';
  keyId: string | null;
  message: string;
}

const PREFIX = 'acs1';
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** A short, stable id for a key: the first 12 hex characters of its SHA-256. */
export function keyFingerprint(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

/**
 * Reads a 256-bit key given as 64 hex characters or as base64/base64url (44 or 43
 * characters). Throws an Error that says what is wrong, for start-up configuration.
 */
export function parseSecretKey(text: string, name = 'secret key'): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t)
    ? Buffer.from(t, 'hex')
    : /^[A-Za-z0-9+/]{43}=?$/.test(t)
      ? Buffer.from(t, 'base64')
      : /^[A-Za-z0-9_-]{43}$/.test(t)
        ? Buffer.from(t, 'base64url')
        : null;
  if (key?.length !== 32) {
    throw new Error(
      `The ${name} must be 32 random bytes, written as 64 hex characters or base64 (e.g. \`openssl rand -base64 32\`).`,
    );
  }
  return key;
}

export interface AesGcmCipherOptions {
  /** Key id → 32-byte key. */
  keys: Readonly<Record<string, Uint8Array>>;
  /** Which key encrypts new values. */
  currentKeyId: string;
}

/** AES-256-GCM with a random 96-bit IV per value. Envelope: `acs1.<keyId>.<iv>.<ciphertext+tag>` (base64url). */
export function createAesGcmCipher(options: AesGcmCipherOptions): SecretCipher {
  const keys = new Map<string, Buffer>();
  for (const [id, key] of Object.entries(options.keys)) {
    if (!KEY_ID.test(id))
      throw new Error(`Secret key id "${id}" may only contain letters, digits, _ and - (1–64 characters).`);
    if (key.length !== 32) throw new Error(`Secret key "${id}" must be 32 bytes for AES-256-GCM, not ${key.length}.`);
    keys.set(id, Buffer.from(key));
  }
  if (!keys.has(options.currentKeyId))
    throw new Error(`The current secret key id "${options.currentKeyId}" is not among the configured keys.`);

  const parse = (envelope: string) => {
    const parts = envelope.split('.');
    if (parts.length !== 4 || parts[0] !== PREFIX || !KEY_ID.test(parts[1] ?? '')) return null;
    return {
      keyId: parts[1] as string,
      iv: Buffer.from(parts[2] as string, 'base64url'),
      sealed: Buffer.from(parts[3] as string, 'base64url'),
    };
  };

  return {
    currentKeyId: options.currentKeyId,
    hasKey: (keyId) => keys.has(keyId),
    keyIdOf: (envelope) => parse(envelope)?.keyId ?? null,
    encrypt(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', keys.get(options.currentKeyId) as Buffer, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const sealed = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${PREFIX}.${options.currentKeyId}.${iv.toString('base64url')}.${sealed.toString('base64url')}`;
    },
    decrypt(envelope, context): Result<string, SecretCipherError> {
      const parsed = parse(envelope);
      if (!parsed || parsed.iv.length !== 12 || parsed.sealed.length < 16) {
        return err({ type: 'not_an_envelope', keyId: null, message: 'the stored value is not an encrypted secret' });
      }
      const key = keys.get(parsed.keyId);
      if (!key) {
        return err({
          type: 'unknown_key',
          keyId: parsed.keyId,
          message: `the secret was encrypted with key id ${parsed.keyId}, which is not configured`,
        });
      }
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, parsed.iv);
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(parsed.sealed.subarray(parsed.sealed.length - 16));
        return ok(
          Buffer.concat([
            decipher.update(parsed.sealed.subarray(0, parsed.sealed.length - 16)),
            decipher.final(),
          ]).toString('utf8'),
        );
      } catch {
        return err({
          type: 'tampered_or_wrong_key',
          keyId: parsed.keyId,
          message: `the secret does not decrypt with key id ${parsed.keyId}: the key is wrong or the value was altered`,
        });
      }
    },
  };
}
