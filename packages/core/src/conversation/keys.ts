import { err, ok, type Result } from 'neverthrow';
import { normalizeId } from '../ids.js';
import type { SandboxStore } from '../sandbox/store.js';
import type { ConversationRecord } from './schema.js';
import type { DomainErrorOf } from '../errors.js';
import type { ConversationStore } from './store.js';

/**
 * What a conversation's own key is bound to. The edge signs the user, the conversation, the
 * sandbox and the generation into the key (nothing of the key is stored), and checks a presented
 * key against what this says now: a key of an earlier generation (rotated), of another sandbox
 * (the conversation moved to a new one) or of a deleted sandbox opens nothing.
 */
export interface ConversationKeyBinding {
  /** The sandbox the conversation uses; null for a record without one. */
  sandbox_id: string | null;
  /** Starts at 0; each `rotateKey` adds one. */
  key_generation: number;
  /** Its sandbox was deleted (or its record is gone): no key opens the conversation until it runs in another. */
  sandbox_deleted: boolean;
}

/** What reading or rotating a key's binding can fail with. */
type KeyBindingError = DomainErrorOf<'ConversationNotFound' | 'StoreUnavailable'>;

export interface ConversationKeyDeps {
  conversations: ConversationStore;
  sandboxStore: SandboxStore;
}

/** The generation of a record's key (0 on records from before it was kept). */
const keyGenerationOf = (record: Pick<ConversationRecord, 'key_generation'>): number => record.key_generation ?? 0;

/** What the conversation's key is bound to now: two reads of the stores, never the runtime (it is asked on every request a key makes). */
export async function keyBinding(
  deps: ConversationKeyDeps,
  userId: string,
  id: string,
): Promise<Result<ConversationKeyBinding, KeyBindingError>> {
  const found = await deps.conversations.get(userId, normalizeId(id));
  if (found.isErr()) return err(found.error);
  if (!found.value) return err({ type: 'ConversationNotFound', conversationId: id });
  return bindingOf(deps, userId, found.value);
}

/** Gives the conversation's key a new generation: every key given out before opens nothing from now on. */
export async function rotateKey(
  deps: ConversationKeyDeps,
  userId: string,
  id: string,
): Promise<Result<ConversationKeyBinding, KeyBindingError>> {
  const updated = await deps.conversations.update(
    userId,
    normalizeId(id),
    (current): Result<ConversationRecord, never> => ok({ ...current, key_generation: keyGenerationOf(current) + 1 }),
  );
  if (updated.isErr()) return err(updated.error);
  if (!updated.value) return err({ type: 'ConversationNotFound', conversationId: id });
  return bindingOf(deps, userId, updated.value);
}

async function bindingOf(
  deps: ConversationKeyDeps,
  userId: string,
  record: ConversationRecord,
): Promise<Result<ConversationKeyBinding, KeyBindingError>> {
  const sandboxId = record.sandbox_id;
  const box = sandboxId ? await deps.sandboxStore.get(userId, sandboxId) : ok(null);
  if (box.isErr()) return err(box.error);
  return ok({
    sandbox_id: sandboxId,
    key_generation: keyGenerationOf(record),
    sandbox_deleted: sandboxId !== null && (box.value === null || box.value.status === 'DELETED'),
  });
}
