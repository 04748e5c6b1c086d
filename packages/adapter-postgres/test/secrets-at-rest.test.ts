import { describe, expect, it } from 'vitest';
import { createAesGcmCipher } from '@acs/core';
import { EVERY_SECRET as SECRETS, expectOk, settingsWithEverySecret } from '@acs/core/testing';
import { createPostgresStorage, SecretKeyMismatchError } from '@acs/adapter-postgres';
import { DATABASES, freshSchema, KEY_1, KEY_2, testCipher } from './databases.js';

for (const db of DATABASES) {
  describe(`secrets at rest on ${db.name}`, () => {
    it('stores no secret in plain text, and reads every one back', async () => {
      const schema = freshSchema(db);
      const storage = await createPostgresStorage({
        db: await db.executor(),
        cipher: testCipher(),
        schema,
        migrations: 'auto',
      });
      const written = settingsWithEverySecret();
      await expectOk(storage.settings.update('alice', () => written));

      const raw = JSON.stringify(await db.raw(`SELECT * FROM "${schema}".acs_settings`));
      for (const value of Object.values(SECRETS)) expect(raw).not.toContain(value);
      expect(raw).toContain('acs1.k1.');
      expect(raw).toContain('gitlab.example.com');
      const [row] = await db.raw<{ key_ids: string[] }>(
        `SELECT key_ids FROM "${schema}".acs_settings WHERE user_id = 'alice'`,
      );
      expect(row?.key_ids).toEqual(['k1']);

      expect(await expectOk(storage.settings.get('alice'))).toEqual(written);
    });

    it('binds each value to its user: a row copied to another user does not decrypt', async () => {
      const schema = freshSchema(db);
      const storage = await createPostgresStorage({
        db: await db.executor(),
        cipher: testCipher(),
        schema,
        migrations: 'auto',
      });
      await expectOk(storage.settings.update('alice', () => settingsWithEverySecret()));
      await db.raw(
        `INSERT INTO "${schema}".acs_settings (user_id, data, key_ids) SELECT 'mallory', data, key_ids FROM "${schema}".acs_settings WHERE user_id = 'alice'`,
      );
      const stolen = await storage.settings.get('mallory');
      expect(stolen.isErr() && stolen.error).toMatchObject({ type: 'StoreUnavailable' });
      expect(stolen.isErr() && stolen.error.message).toMatch(/cannot decrypt llm_api_key of user mallory/);
    });

    it('rotates keys: old values stay readable, new writes use the new key', async () => {
      const schema = freshSchema(db);
      const first = await createPostgresStorage({
        db: await db.executor(),
        cipher: testCipher('old', KEY_1),
        schema,
        migrations: 'auto',
      });
      await expectOk(first.settings.update('alice', () => settingsWithEverySecret()));
      await expectOk(first.settings.update('bob', () => settingsWithEverySecret()));

      const rotated = createAesGcmCipher({ keys: { old: KEY_1, new: KEY_2 }, currentKeyId: 'new' });
      const second = await createPostgresStorage({ db: await db.executor(), cipher: rotated, schema });
      expect((await expectOk(second.settings.get('alice')))?.llm_api_key).toBe(SECRETS.llm);
      await expectOk(second.settings.update('alice', (c) => ({ ...c!, language: 'de' })));
      const rows = await db.raw<{ user_id: string; key_ids: string[]; data: unknown }>(
        `SELECT user_id, key_ids, data FROM "${schema}".acs_settings ORDER BY user_id`,
      );
      expect(rows.map((r) => [r.user_id, r.key_ids])).toEqual([
        ['alice', ['new']],
        ['bob', ['old']],
      ]);
      expect(JSON.stringify(rows[0]?.data)).not.toContain('acs1.old.');
      expect((await expectOk(second.settings.get('bob')))?.secrets_store.custom_secrets['DEPLOY_TOKEN']?.secret).toBe(
        SECRETS.custom,
      );
    });

    it('refuses to start without the key that encrypted the stored secrets, and changes nothing', async () => {
      const schema = freshSchema(db);
      const first = await createPostgresStorage({
        db: await db.executor(),
        cipher: testCipher('k1', KEY_1),
        schema,
        migrations: 'auto',
      });
      await expectOk(first.settings.update('alice', () => settingsWithEverySecret()));
      const before = JSON.stringify(await db.raw(`SELECT * FROM "${schema}".acs_settings`));

      const missing = createPostgresStorage({ db: await db.executor(), cipher: testCipher('k2', KEY_2), schema });
      await expect(missing).rejects.toBeInstanceOf(SecretKeyMismatchError);
      await expect(missing).rejects.toThrow(/encrypted with key id k1, which is not configured/);

      const wrong = createPostgresStorage({ db: await db.executor(), cipher: testCipher('k1', KEY_2), schema });
      await expect(wrong).rejects.toThrow(/configured as id k1 is not the key the stored secrets were encrypted with/);

      expect(JSON.stringify(await db.raw(`SELECT * FROM "${schema}".acs_settings`))).toBe(before);
      const again = await createPostgresStorage({ db: await db.executor(), cipher: testCipher('k1', KEY_1), schema });
      expect((await expectOk(again.settings.get('alice')))?.llm_api_key).toBe(SECRETS.llm);
    });
  });
}
