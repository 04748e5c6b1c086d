import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Keys for one conversation alone (the `session_api_key` of a conversation record, which the
 * OpenHands UI sends on its realtime channels and agent routes). A key names its user and
 * conversation and carries an HMAC of both under the router's secret, so nothing is stored
 * (there is no table of keys to leak) and the record can show the same key on every read.
 * It opens only that conversation's channels and agent routes, never anything else, and it is
 * never the user's API key.
 */
export class ConversationKeys {
  readonly #secret: Buffer;

  /** `secret`: at least 32 bytes; keys minted under another secret are refused. Default: random (keys last as long as the process). */
  constructor(secret?: Uint8Array) {
    if (secret && secret.length < 32) throw new Error('The conversation key secret must be at least 32 bytes.');
    this.#secret = Buffer.from(secret ?? randomBytes(32));
  }

  mint(userId: string, conversationId: string): string {
    return `${PREFIX}${Buffer.from(userId, 'utf8').toString('base64url')}.${conversationId}.${this.#mac(userId, conversationId)}`;
  }

  /** Who a key belongs to, or null when it is not one of ours (or was minted under another secret). */
  verify(key: string): { userId: string; conversationId: string } | null {
    if (!key.startsWith(PREFIX)) return null;
    const body = key.slice(PREFIX.length);
    const first = body.indexOf('.');
    const last = body.lastIndexOf('.');
    if (first <= 0 || last <= first) return null;
    const userId = Buffer.from(body.slice(0, first), 'base64url').toString('utf8');
    const conversationId = body.slice(first + 1, last);
    const expected = Buffer.from(this.#mac(userId, conversationId));
    const given = Buffer.from(body.slice(last + 1));
    if (userId === '' || conversationId === '' || expected.length !== given.length || !timingSafeEqual(expected, given))
      return null;
    return { userId, conversationId };
  }

  #mac(userId: string, conversationId: string): string {
    return createHmac('sha256', this.#secret)
      .update(`acs-conversation-key\0${userId}\0${conversationId}`, 'utf8')
      .digest('base64url');
  }
}

const PREFIX = 'acsc_';
