import { describe, expect, it } from 'vitest';
import type { SecretCipher } from '../secrets/cipher.js';

export interface SecretCipherFixture {
  /** The cipher under test. */
  cipher: SecretCipher;
  /** A second cipher of the same kind with a different current key, which `cipher` does not hold. */
  stranger: SecretCipher;
}

/**
 * What every `SecretCipher` must do, whatever seals the values (AES-GCM here, a KMS elsewhere):
 * round trips, values bound to their context, a fresh envelope each time, and failures tagged
 * by `type` rather than thrown.
 */
export function describeSecretCipherContract(
  name: string,
  make: () => SecretCipherFixture | Promise<SecretCipherFixture>,
): void {
  describe(`SecretCipher contract: ${name}`, () => {
    it('round-trips values (unicode, empty, long), names its key in the envelope and never shows the plaintext', async () => {
      const { cipher } = await make();
      expect(cipher.hasKey(cipher.currentKeyId)).toBe(true);
      for (const value of ['sk-live-123', 'ключ 🔑', '', 'x'.repeat(10_000)]) {
        const envelope = cipher.encrypt(value, 'alice:llm_api_key');
        if (value) expect(envelope).not.toContain(value);
        expect(cipher.keyIdOf(envelope)).toBe(cipher.currentKeyId);
        expect(cipher.decrypt(envelope, 'alice:llm_api_key')._unsafeUnwrap()).toBe(value);
      }
    });

    it('seals the same value differently each time', async () => {
      const { cipher } = await make();
      expect(cipher.encrypt('same', 'ctx')).not.toBe(cipher.encrypt('same', 'ctx'));
    });

    it('binds a value to its context: under another user or field it does not open', async () => {
      const { cipher } = await make();
      const envelope = cipher.encrypt('secret', 'alice:llm_api_key');
      expect(cipher.decrypt(envelope, 'bob:llm_api_key')._unsafeUnwrapErr().type).toBe('tampered_or_wrong_key');
      expect(cipher.decrypt(envelope, 'alice:search_api_key')._unsafeUnwrapErr().type).toBe('tampered_or_wrong_key');
    });

    it('refuses a changed envelope, a stranger key and text that is no envelope, with a type and a message', async () => {
      const { cipher, stranger } = await make();
      const envelope = cipher.encrypt('secret', 'ctx');
      // A character well inside the envelope (all of its bits count, unlike a last base64 character's).
      const at = envelope.length - 5;
      const changed = cipher.decrypt(
        envelope.slice(0, at) + (envelope[at] === 'A' ? 'B' : 'A') + envelope.slice(at + 1),
        'ctx',
      );
      expect(changed.isErr()).toBe(true);
      const fromStranger = cipher.decrypt(stranger.encrypt('secret', 'ctx'), 'ctx')._unsafeUnwrapErr();
      expect(fromStranger.type).toBe('unknown_key');
      expect(fromStranger.keyId).toBe(stranger.currentKeyId);
      expect(cipher.hasKey(stranger.currentKeyId)).toBe(false);
      const garbage = cipher.decrypt('plain text, not sealed', 'ctx')._unsafeUnwrapErr();
      expect(garbage.type).toBe('not_an_envelope');
      expect(garbage.message.length).toBeGreaterThan(10);
      expect(cipher.keyIdOf('plain text, not sealed')).toBeNull();
    });
  });
}
