import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { createAesGcmCipher } from '@acs/core';
import type { SecretCipher } from '@acs/core/ports';
import { createSqliteStorage, type SqliteStorage } from '@acs/adapter-sqlite';

export const KEY_1 = randomBytes(32);
export const KEY_2 = randomBytes(32);
export const testCipher = (keyId = 'k1', key: Uint8Array = KEY_1): SecretCipher =>
  createAesGcmCipher({ keys: { [keyId]: key }, currentKeyId: keyId });

const directory = mkdtempSync(join(tmpdir(), 'acs-sqlite-test-'));
const opened: SqliteStorage[] = [];

/** A path for a new database file in this test file's directory (removed after the file's tests). */
export const freshPath = () => join(directory, `${randomBytes(6).toString('hex')}.sqlite`);

/** Storage on a new database file, migrated; closed after the file's tests. */
export async function freshStorage(
  cipher: SecretCipher = testCipher(),
  path = freshPath(),
): Promise<SqliteStorage & { path: string }> {
  return Object.assign(await openStorage(path, cipher, 'auto'), { path });
}

/** Storage on the file at `path`; closed after the file's tests. */
export async function openStorage(
  path: string,
  cipher: SecretCipher = testCipher(),
  migrations: 'auto' | 'check' = 'check',
): Promise<SqliteStorage> {
  const storage = await createSqliteStorage({ path, cipher, migrations });
  opened.push(storage);
  return storage;
}

afterAll(async () => {
  for (const storage of opened.splice(0)) await storage.close();
  rmSync(directory, { recursive: true, force: true });
});
