import { describe, expect, it } from 'vitest';
import { decodeGitPageId, encodeGitPageId, GIT_PAGE_ID_PATTERN } from '../src/git/page-id.js';

describe('git page ids', () => {
  it('are what OpenHands 1.x makes: base64url of the digits, unpadded', () => {
    expect([1, 2, 3, 10, 100, 123456].map(encodeGitPageId)).toEqual(['MQ', 'Mg', 'Mw', 'MTA', 'MTAw', 'MTIzNDU2']);
  });

  it('every number up to 999 999 (and with leading zeros) reads back; nothing else has the form', () => {
    const pattern = new RegExp(GIT_PAGE_ID_PATTERN);
    for (let n = 0; n <= 999_999; n += n < 2000 ? 1 : 997)
      expect(decodeGitPageId(encodeGitPageId(n)), String(n)).toBe(n);
    expect(decodeGitPageId(Buffer.from('007').toString('base64url'))).toBe(7);
    // Every string of the documented form decodes to digits: try all of length 2 and 3, and random ones of 4 to 8.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const all = (length: number): string[] =>
      length === 0 ? [''] : all(length - 1).flatMap((s) => [...alphabet].map((c) => s + c));
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 64;
    const random = Array.from({ length: 200_000 }, (_, i) =>
      Array.from({ length: 4 + (i % 5) }, () => alphabet[next()]).join(''),
    );
    for (const text of [...all(2), ...all(3), ...random]) {
      const digits = Buffer.from(text, 'base64url').toString('latin1');
      expect(pattern.test(text), text).toBe(
        /^[0-9]{1,6}$/.test(digits) && Buffer.from(digits).toString('base64url') === text,
      );
    }
    for (const text of ['', 'M', 'MTIzNDU2Nw', 'Mg==', 'eyJ4IjoxfQ', 'AAAAAAAA', 'Mg '])
      expect(decodeGitPageId(text), text).toBeNull();
  });
});
