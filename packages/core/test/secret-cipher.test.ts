import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createAesGcmCipher, keyFingerprint, parseSecretKey } from '../src/index.js';
import { describeSecretCipherContract } from '../src/testing/index.js';

const keyA = randomBytes(32);
const keyB = randomBytes(32);

describe('AES-256-GCM secret cipher', () => {
  it('round-trips values (unicode, empty, long) and never shows the plaintext in the envelope', () => {
    const cipher = createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' });
    for (const value of ['sk-live-123', 'ключ 🔑', '', 'x'.repeat(10_000)]) {
      const envelope = cipher.encrypt(value, 'alice:llm_api_key');
      if (value) expect(envelope).not.toContain(value);
      expect(cipher.keyIdOf(envelope)).toBe('a');
      expect(cipher.decrypt(envelope, 'alice:llm_api_key')._unsafeUnwrap()).toBe(value);
    }
  });

  it('uses a fresh IV each time', () => {
    const cipher = createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' });
    expect(cipher.encrypt('same', 'ctx')).not.toBe(cipher.encrypt('same', 'ctx'));
  });

  it('binds the value to its context: moved to another user or field it does not decrypt', () => {
    const cipher = createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' });
    const envelope = cipher.encrypt('secret', 'alice:llm_api_key');
    expect(cipher.decrypt(envelope, 'bob:llm_api_key')._unsafeUnwrapErr().type).toBe('tampered_or_wrong_key');
    expect(cipher.decrypt(envelope, 'alice:search_api_key').isErr()).toBe(true);
  });

  it('detects tampering, a wrong key under the same id, an unknown key and garbage', () => {
    const cipher = createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' });
    const envelope = cipher.encrypt('secret', 'ctx');
    const parts = envelope.split('.');
    const flipped = Buffer.from(parts[3]!, 'base64url');
    flipped[0]! ^= 1;
    expect(
      cipher.decrypt([...parts.slice(0, 3), flipped.toString('base64url')].join('.'), 'ctx')._unsafeUnwrapErr().type,
    ).toBe('tampered_or_wrong_key');
    const impostor = createAesGcmCipher({ keys: { a: keyB }, currentKeyId: 'a' });
    expect(impostor.decrypt(envelope, 'ctx')._unsafeUnwrapErr().type).toBe('tampered_or_wrong_key');
    const other = createAesGcmCipher({ keys: { b: keyB }, currentKeyId: 'b' });
    expect(other.decrypt(envelope, 'ctx')._unsafeUnwrapErr()).toMatchObject({ type: 'unknown_key', keyId: 'a' });
    expect(cipher.decrypt('plain text', 'ctx')._unsafeUnwrapErr().type).toBe('not_an_envelope');
    expect(cipher.keyIdOf('plain text')).toBeNull();
  });

  it('rotates: new values use the current key, old ones stay readable', () => {
    const old = createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' });
    const before = old.encrypt('v1', 'ctx');
    const rotated = createAesGcmCipher({ keys: { a: keyA, b: keyB }, currentKeyId: 'b' });
    expect(rotated.decrypt(before, 'ctx')._unsafeUnwrap()).toBe('v1');
    expect(rotated.keyIdOf(rotated.encrypt('v2', 'ctx'))).toBe('b');
    expect(rotated.hasKey('a') && rotated.hasKey('b') && !rotated.hasKey('c')).toBe(true);
  });

  it('refuses bad configuration with messages that say what to fix', () => {
    expect(() => createAesGcmCipher({ keys: { a: randomBytes(16) }, currentKeyId: 'a' })).toThrow(/32 bytes/);
    expect(() => createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'b' })).toThrow(/not among the configured keys/);
    expect(() => createAesGcmCipher({ keys: { 'bad id': keyA }, currentKeyId: 'bad id' })).toThrow(/may only contain/);
  });

  it('parses keys given as hex, base64 or base64url, and refuses anything else', () => {
    expect(parseSecretKey(keyA.toString('hex')).equals(keyA)).toBe(true);
    expect(parseSecretKey(keyA.toString('base64')).equals(keyA)).toBe(true);
    expect(parseSecretKey(` ${keyA.toString('base64url')}\n`).equals(keyA)).toBe(true);
    for (const bad of [
      '',
      'passphrase',
      randomBytes(16).toString('hex'),
      randomBytes(31).toString('base64'),
      'g'.repeat(64),
    ]) {
      expect(() => parseSecretKey(bad, 'ACS_SECRET_KEY')).toThrow(/ACS_SECRET_KEY must be 32 random bytes/);
    }
    expect(keyFingerprint(keyA)).toMatch(/^[0-9a-f]{12}$/);
    expect(keyFingerprint(keyA)).not.toBe(keyFingerprint(keyB));
  });
});

describeSecretCipherContract('AES-256-GCM', () => ({
  cipher: createAesGcmCipher({ keys: { a: keyA }, currentKeyId: 'a' }),
  stranger: createAesGcmCipher({ keys: { b: keyB }, currentKeyId: 'b' }),
}));
