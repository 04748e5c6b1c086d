import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AgentConversationService, ConversationKeyBinding } from '@acs/core';
import type { Logger } from '@acs/core/ports';

/** The user and conversation a conversation key names. */
export interface ConversationKeyClaims {
  userId: string;
  conversationId: string;
}

/** What of a conversation a key is signed over besides its user and id (core's `keyBinding`). */
type SignedBinding = Pick<ConversationKeyBinding, 'sandbox_id' | 'key_generation'>;

/**
 * Keys for one conversation alone (the `session_api_key` of a conversation record, which the
 * OpenHands UI sends on its realtime channels and agent routes). A key names its user and
 * conversation and carries an HMAC, under the router's secret, of both and of what the
 * conversation is bound to now: its sandbox and its key generation. Nothing of the key is stored
 * (there is no table of keys to leak) and the record shows the same key on every read, yet a key
 * stops opening anything when the conversation's key is rotated (its generation grows), when it
 * moves to another sandbox, or when its sandbox is deleted (`opens`). It opens only that
 * conversation's channels and agent routes, never anything else, and it is never the user's API
 * key.
 */
export class ConversationKeys {
  readonly #secret: Buffer;

  /** `secret`: at least 32 bytes; keys minted under another secret are refused. Default: random (keys last as long as the process). */
  constructor(secret?: Uint8Array) {
    if (secret && secret.length < 32) throw new Error('The conversation key secret must be at least 32 bytes.');
    this.#secret = Buffer.from(secret ?? randomBytes(32));
  }

  /** The key of the conversation as it is bound now (`binding`: its sandbox and key generation). */
  mint(userId: string, conversationId: string, binding: SignedBinding): string {
    const mac = this.#mac(userId, conversationId, binding);
    return `${PREFIX}${Buffer.from(userId, 'utf8').toString('base64url')}.${conversationId}.${mac}`;
  }

  /** The user and conversation a key names, when it has the form of ours; whether it opens them is `opens`'s to say. */
  claimsOf(key: string): ConversationKeyClaims | null {
    if (!key.startsWith(PREFIX)) return null;
    const body = key.slice(PREFIX.length);
    const first = body.indexOf('.');
    const last = body.lastIndexOf('.');
    if (first <= 0 || last <= first) return null;
    // An HMAC-SHA256 in base64url is 43 characters: anything else is no key of ours, and costs no store read.
    if (!MAC_PATTERN.test(body.slice(last + 1))) return null;
    const userId = Buffer.from(body.slice(0, first), 'base64url').toString('utf8');
    const conversationId = body.slice(first + 1, last);
    return userId === '' || conversationId === '' ? null : { userId, conversationId };
  }

  /** Whether `key` is the key of the conversation `claims` names as it is bound now (and its sandbox is not deleted). */
  opens(key: string, claims: ConversationKeyClaims, binding: ConversationKeyBinding): boolean {
    if (binding.sandbox_deleted) return false;
    const expected = Buffer.from(this.mint(claims.userId, claims.conversationId, binding));
    const given = Buffer.from(key);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }

  #mac(userId: string, conversationId: string, binding: SignedBinding): string {
    return createHmac('sha256', this.#secret)
      .update(
        `acs-conversation-key\0v2\0${userId}\0${conversationId}\0${binding.sandbox_id ?? ''}\0${binding.key_generation}`,
        'utf8',
      )
      .digest('base64url');
  }
}

const PREFIX = 'acsc_';
const MAC_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** What a presented conversation key opens now: its user and conversation, or null. */
export type ConversationKeyCheck = (key: string) => Promise<ConversationKeyClaims | null>;

/**
 * Checks a presented conversation key against the conversation as it is now (two store reads,
 * only for text of the key's form). A store that fails is logged and thrown, so the request
 * fails as a 500 rather than a 401 (a client that drops keys on 401 keeps it).
 */
export function conversationKeyCheck(
  keys: ConversationKeys,
  service: AgentConversationService,
  logger: Logger,
): ConversationKeyCheck {
  return async (key) => {
    const claims = keys.claimsOf(key);
    if (!claims) return null;
    const binding = await service.conversations.keyBinding(claims.userId, claims.conversationId);
    if (binding.isErr()) {
      if (binding.error.type === 'ConversationNotFound') return null;
      logger.error(
        { operation: binding.error.operation, errorClass: binding.error.errorClass },
        'storage failed while a conversation key was checked',
      );
      throw new Error('storage failed while a conversation key was checked');
    }
    return keys.opens(key, claims, binding.value) ? claims : null;
  };
}
