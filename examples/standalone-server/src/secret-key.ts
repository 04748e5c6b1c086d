import { hkdfSync, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createAesGcmCipher, keyFingerprint, parseSecretKey } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';

export interface LoadedCipher {
  cipher: SecretCipher;
  /** Where the current key came from, for the start-up log (never the key itself). */
  source: 'ACS_SECRET_KEY' | 'key file' | 'generated key file';
  keyFile: string | null;
  /** 32 bytes derived from the current key, for signing what must survive restarts (conversation keys); never the key itself. */
  signingSecret: Uint8Array;
}

/**
 * The key that encrypts secrets at rest: ACS_SECRET_KEY, else `secret.key` in the
 * data directory, created once (owner-only) when missing. Key ids are fingerprints
 * of the keys, so a different key is recognised as such instead of failing to decrypt.
 */
export async function loadCipher(options: {
  secretKey: string | null;
  previousSecretKeys: string[];
  dataDir: string;
}): Promise<LoadedCipher> {
  let current: Buffer;
  let source: LoadedCipher['source'];
  let keyFile: string | null = null;
  if (options.secretKey) {
    current = parseSecretKey(options.secretKey, 'ACS_SECRET_KEY');
    source = 'ACS_SECRET_KEY';
  } else {
    keyFile = join(options.dataDir, 'secret.key');
    await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
    try {
      current = parseSecretKey(await readFile(keyFile, 'utf8'), `key in ${keyFile}`);
      if (((await stat(keyFile)).mode & 0o077) !== 0) await chmod(keyFile, 0o600);
      source = 'key file';
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      current = randomBytes(32);
      // 'wx': never overwrite a key another process wrote meanwhile.
      await writeFile(keyFile, `${current.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
      source = 'generated key file';
    }
  }
  const keys: Record<string, Buffer> = { [keyFingerprint(current)]: current };
  options.previousSecretKeys.forEach((text, i) => {
    const key = parseSecretKey(text, `ACS_PREVIOUS_SECRET_KEYS entry ${i + 1}`);
    keys[keyFingerprint(key)] = key;
  });
  const signingSecret = new Uint8Array(hkdfSync('sha256', current, Buffer.alloc(0), 'acs conversation keys', 32));
  return {
    cipher: createAesGcmCipher({ keys, currentKeyId: keyFingerprint(current) }),
    source,
    keyFile,
    signingSecret,
  };
}
