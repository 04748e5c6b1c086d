/**
 * Page ids of the git searches, as OpenHands 1.x makes them: the decimal digits of a number,
 * base64url without padding (`Mg` is 2). The number is a page (repositories, branches,
 * suggested tasks; from 1) or an offset (installations; from 0). Clients pass them back opaque.
 */

/** Three digits (0x30–0x39) encode to: [MNO] then the low bits of the first with the next digit's high nibble, and so on. */
const FIRST_TWO = '(?:M[DTjz]|N[DTjz]|O[DT])';
const THREE_DIGITS = `${FIRST_TWO}[AEIMQUYcgk][w-z0-5]`;
const TWO_DIGITS = `${FIRST_TWO}[AEIMQUYcgk]`;
const ONE_DIGIT = '(?:[MN][AQgw]|O[AQ])';

/**
 * Exactly the base64url texts (unpadded) of 1 to 6 decimal digits: every string of this form
 * is a page id the server takes (a leading zero is read past; page 0 is the first page).
 */
export const GIT_PAGE_ID_PATTERN = `^(?:${THREE_DIGITS})?(?:${THREE_DIGITS}|${TWO_DIGITS}|${ONE_DIGIT})$`;
const GIT_PAGE_ID = new RegExp(GIT_PAGE_ID_PATTERN);

export function encodeGitPageId(value: number): string {
  return Buffer.from(String(value), 'utf8').toString('base64url');
}

/** The number in a page id, or null when it does not have the form of one (GIT_PAGE_ID_PATTERN). */
export function decodeGitPageId(pageId: string): number | null {
  if (!GIT_PAGE_ID.test(pageId)) return null;
  return Number(Buffer.from(pageId, 'base64url').toString('utf8'));
}
