import type { AgentConversationService, DomainError } from '@acs/core';
import { HTTP_ERROR_CODES } from '../http-error.js';
import type { ConversationKeyCheck } from './conversation-keys.js';

/**
 * Sandbox keys: what code running inside a sandbox presents (OpenHands 1.11's
 * `X-Session-API-Key: <sandbox.session_api_key>`) to read its owner's secrets.
 *
 * Our sandboxes run no agent server: the agent runs in the service, so nothing inside a sandbox
 * holds a key of its own (`SandboxInfo.session_api_key` is null). What 1.11 clients hold as a
 * sandbox's key is the `session_api_key` of a conversation in it, which for us is that
 * conversation's key (`acsc_…`). So a sandbox key is **the key of a conversation whose sandbox
 * it is**, accepted while that sandbox is RUNNING (as 1.11 accepts a sandbox's key only while it
 * runs), and only as it is bound now: a rotated key (`POST …/rotate-key`), or one of a deleted
 * sandbox, opens nothing (auth/conversation-keys.ts). As in 1.11, whoever holds that key (the sandbox, and its owner, who reads it off the
 * conversation) can read the owner's secret values through these routes; an API key alone
 * cannot.
 *
 * Other kinds of sandboxes with a key of their own (an agent-server sandbox with a per-sandbox
 * session key) are added here, in `checkSandboxKey`: everything that decides whether a key
 * opens a sandbox is in this one function. (Such a key, `acss_…`, is given to the sandbox's
 * server in its environment when the container starts, so it cannot be rotated while the
 * sandbox runs; it is cleared when the sandbox is deleted, and a pooled sandbox gets a new one
 * when a user claims it.)
 */

/** Why a key does not open the sandbox: 401 for the first three, 403 for `other_sandbox`. */
export type SandboxKeyRefusal = 'missing' | 'invalid' | 'not_running' | 'other_sandbox';

type SandboxKeyCheck = { userId: string } | { refused: SandboxKeyRefusal } | { failed: DomainError };

export interface SandboxKeySources {
  /** What a conversation key opens now (its conversation as it is bound now). */
  conversationKey: ConversationKeyCheck;
  service: AgentConversationService;
}

/** Whose sandbox `sandboxId` is, if `key` opens it. */
export type SandboxKeyChecker = (key: string | null, sandboxId: string) => Promise<SandboxKeyCheck>;

export function sandboxKeyChecker(sources: SandboxKeySources): SandboxKeyChecker {
  return async function checkSandboxKey(key, sandboxId) {
    if (!key) return { refused: 'missing' };
    const scoped = await sources.conversationKey(key);
    if (!scoped) return { refused: 'invalid' };
    const found = await sources.service.conversations.get(scoped.userId, scoped.conversationId);
    if (found.isErr())
      return found.error.type === 'ConversationNotFound' ? { refused: 'invalid' } : { failed: found.error };
    const { record, sandbox_status } = found.value;
    if (record.sandbox_id !== sandboxId) return { refused: 'other_sandbox' };
    if (sandbox_status !== 'RUNNING') return { refused: 'not_running' };
    return { userId: scoped.userId };
  };
}

/** What a refused caller is told. */
export const SANDBOX_KEY_REFUSALS: Record<SandboxKeyRefusal, { status: 401 | 403; code: string; message: string }> = {
  missing: {
    status: 401,
    code: HTTP_ERROR_CODES.UNAUTHENTICATED,
    message: 'Send the sandbox’s key (the session_api_key of a conversation in it) as X-Session-API-Key.',
  },
  invalid: {
    status: 401,
    code: HTTP_ERROR_CODES.UNAUTHENTICATED,
    message:
      'That is not the key of a conversation in a sandbox: send the session_api_key of a conversation in this sandbox.',
  },
  not_running: {
    status: 401,
    code: HTTP_ERROR_CODES.SANDBOX_NOT_RUNNING,
    message: 'The sandbox is not running: its key opens it only while it runs.',
  },
  other_sandbox: {
    status: 403,
    code: HTTP_ERROR_CODES.SANDBOX_KEY_MISMATCH,
    message: 'That key belongs to another sandbox.',
  },
};
