import { isSandboxKey, type AgentConversationService, type DomainError, type DomainErrorOf } from '@acs/core';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { HTTP_ERROR_CODES } from '../http-error.js';
import type { ConversationKeyCheck, ConversationKeyClaims } from './conversation-keys.js';

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
 * A sandbox with a key of its own (an agent-server sandbox: `acss_…`, given to its server in its
 * environment when the container starts) opens the same routes with that key while it runs. It
 * cannot be rotated while the sandbox runs; it is cleared when the sandbox is deleted, and a
 * pooled sandbox gets a new one when a user claims it. Everything that decides whether a key
 * opens a sandbox is in this file.
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
    if (!scoped) return ownKeyOpens(sources.service, key, sandboxId);
    const found = await conversationSandbox(sources.service, scoped);
    if (found.isErr()) return { failed: found.error };
    if (!found.value) return { refused: 'invalid' };
    if (found.value.sandboxId !== sandboxId) return { refused: 'other_sandbox' };
    if (!found.value.running) return { refused: 'not_running' };
    return { userId: scoped.userId };
  };
}

/** The sandbox of a conversation key's conversation, and whether it runs; null when the conversation is gone. */
function conversationSandbox(
  service: AgentConversationService,
  scoped: ConversationKeyClaims,
): ResultAsync<{ sandboxId: string | null; running: boolean } | null, DomainErrorOf<'StoreUnavailable'>> {
  return service.conversations
    .get(scoped.userId, scoped.conversationId)
    .map((found) => ({ sandboxId: found.record.sandbox_id, running: found.sandbox_status === 'RUNNING' }))
    .orElse((error) => (error.type === 'ConversationNotFound' ? okAsync(null) : errAsync(error)));
}

/** Whether `key` is the sandbox's own key (an agent-server sandbox's), and the sandbox runs. */
async function ownKeyOpens(
  service: AgentConversationService,
  key: string,
  sandboxId: string,
): Promise<SandboxKeyCheck> {
  // The name only picks a URL, which is not read here: any name gives the owner, status and key.
  const found = await service.sandboxes.endpoint(sandboxId, '');
  if (found.isErr()) return found.error.type === 'SandboxNotFound' ? { refused: 'invalid' } : { failed: found.error };
  const endpoint = found.value;
  if (!isSandboxKey({ session_api_key: endpoint.sessionApiKey }, key)) return { refused: 'invalid' };
  return endpoint.status === 'RUNNING' ? { userId: endpoint.userId } : { refused: 'not_running' };
}

/** Whether a key held by `userId`'s caller is the key of a running sandbox of theirs (or of a conversation in one). */
export type OwnSandboxKeyCheck = (
  userId: string,
  key: string | null,
) => ResultAsync<void, DomainErrorOf<'SecretsNotExposed' | 'StoreUnavailable'>>;

/**
 * For `GET /api/v1/users/me?expose_secrets=true` (OpenHands' rule): secret values go only to a
 * caller who also shows the key of one of their running sandboxes, i.e. code inside it (the
 * SDK's `OpenHandsCloudWorkspace.get_llm()` sends both its API key and the sandbox's key). A
 * conversation key counts as its sandbox's, as on the sandbox secret routes.
 */
export function ownSandboxKeyCheck(sources: SandboxKeySources): OwnSandboxKeyCheck {
  const refuse = (reason: 'missing' | 'invalid' | 'other_user') =>
    errAsync<void, DomainErrorOf<'SecretsNotExposed'>>({ type: 'SecretsNotExposed', reason });
  return (userId, key) => {
    if (!key) return refuse('missing');
    return ResultAsync.fromSafePromise(sources.conversationKey(key)).andThen((scoped) => {
      if (scoped && scoped.userId !== userId) return refuse('other_user');
      if (scoped)
        return conversationSandbox(sources.service, scoped).andThen((found) =>
          found?.running && found.sandboxId ? okAsync(undefined) : refuse('invalid'),
        );
      return sources.service.sandboxes
        .runningByKey(userId, key)
        .andThen((found) => (found ? okAsync(undefined) : refuse('invalid')));
    });
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
