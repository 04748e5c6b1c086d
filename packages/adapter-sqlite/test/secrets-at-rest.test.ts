import { existsSync, readFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { createAesGcmCipher } from '@acs/core';
import { EVERY_SECRET as SECRETS, expectOk, settingsWithEverySecret } from '@acs/core/testing';
import { createSqliteStorage, SecretKeyMismatchError } from '@acs/adapter-sqlite';
import { freshPath, freshStorage, KEY_1, KEY_2, openStorage, testCipher } from './databases.js';

/** Every byte SQLite wrote: the database file and its write-ahead log. */
const fileBytes = (path: string) =>
  Buffer.concat([readFileSync(path), ...(existsSync(`${path}-wal`) ? [readFileSync(`${path}-wal`)] : [])]);

const rows = (path: string, sql: string) => {
  const db = new DatabaseSync(path);
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
};

describe('secrets at rest on sqlite', () => {
  it('writes no secret in plain text into the file or its log, and reads every one back', async () => {
    const storage = await freshStorage();
    const written = settingsWithEverySecret();
    await expectOk(storage.settings.update('alice', () => written));
    await expectOk(storage.settings.update('alice', (c) => ({ ...c!, language: 'de' })));

    const bytes = fileBytes(storage.path);
    expect(bytes.includes('gitlab.example.com')).toBe(true);
    expect(bytes.includes('acs1.k1.')).toBe(true);
    for (const value of Object.values(SECRETS)) expect(bytes.includes(value), value).toBe(false);
    await storage.close();
    // After the last connection closed, SQLite folded the log into the file.
    for (const value of Object.values(SECRETS)) expect(readFileSync(storage.path).includes(value), value).toBe(false);
    expect(rows(storage.path, `SELECT key_ids FROM acs_settings WHERE user_id = 'alice'`)).toEqual([
      { key_ids: '["k1"]' },
    ]);

    const again = await openStorage(storage.path);
    expect(await expectOk(again.settings.get('alice'))).toEqual({ ...written, language: 'de' });
  });

  it('binds each value to its user: a row copied to another user does not decrypt', async () => {
    const storage = await freshStorage();
    await expectOk(storage.settings.update('alice', () => settingsWithEverySecret()));
    const db = new DatabaseSync(storage.path);
    db.exec(
      `INSERT INTO acs_settings (user_id, data, key_ids, updated_at) SELECT 'mallory', data, key_ids, updated_at FROM acs_settings WHERE user_id = 'alice'`,
    );
    db.close();
    const stolen = await storage.settings.get('mallory');
    expect(stolen.isErr() && stolen.error).toMatchObject({ type: 'StoreUnavailable' });
    expect(stolen.isErr() && stolen.error.message).toMatch(/cannot decrypt llm_api_key of user mallory/);
  });

  it('rotates keys: old values stay readable, new writes use the new key', async () => {
    const first = await freshStorage(testCipher('old', KEY_1));
    await expectOk(first.settings.update('alice', () => settingsWithEverySecret()));
    await expectOk(first.settings.update('bob', () => settingsWithEverySecret()));
    await first.close();

    const rotated = createAesGcmCipher({ keys: { old: KEY_1, new: KEY_2 }, currentKeyId: 'new' });
    const second = await openStorage(first.path, rotated);
    expect((await expectOk(second.settings.get('alice')))?.llm_api_key).toBe(SECRETS.llm);
    await expectOk(second.settings.update('alice', (c) => ({ ...c!, language: 'de' })));
    expect(rows(first.path, `SELECT user_id, key_ids FROM acs_settings ORDER BY user_id`)).toEqual([
      { user_id: 'alice', key_ids: '["new"]' },
      { user_id: 'bob', key_ids: '["old"]' },
    ]);
    expect((await expectOk(second.settings.get('bob')))?.secrets_store.custom_secrets['DEPLOY_TOKEN']?.secret).toBe(
      SECRETS.custom,
    );
  });

  it('refuses to start without the key that encrypted the stored secrets, or with a different key under its id, and changes nothing', async () => {
    const first = await freshStorage(testCipher('k1', KEY_1));
    await expectOk(first.settings.update('alice', () => settingsWithEverySecret()));
    await first.close();
    const before = readFileSync(first.path);

    const missing = createSqliteStorage({ path: first.path, cipher: testCipher('k2', KEY_2) });
    await expect(missing).rejects.toBeInstanceOf(SecretKeyMismatchError);
    await expect(missing).rejects.toThrow(/encrypted with key id k1, which is not configured/);
    const wrong = createSqliteStorage({ path: first.path, cipher: testCipher('k1', KEY_2) });
    await expect(wrong).rejects.toThrow(/configured as id k1 is not the key the stored secrets were encrypted with/);

    expect(readFileSync(first.path).equals(before)).toBe(true);
    const again = await openStorage(first.path, testCipher('k1', KEY_1));
    expect((await expectOk(again.settings.get('alice')))?.llm_api_key).toBe(SECRETS.llm);
  });

  it('refuses a different key also before any secret was stored (the key is recorded at the first start)', async () => {
    const path = freshPath();
    const first = await openStorage(path, testCipher('k1', KEY_1), 'auto');
    await first.close();
    await expect(createSqliteStorage({ path, cipher: testCipher('k1', KEY_2) })).rejects.toBeInstanceOf(
      SecretKeyMismatchError,
    );
  });
});
