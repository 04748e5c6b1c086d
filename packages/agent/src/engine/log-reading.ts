import type { ActionEvent, ConfirmationEvent, ConversationErrorCode, ConversationEvent, ConversationMetrics, ConversationRecord, StoredSettings } from '@acs/core/schemas';
import type { LlmCredentials, LlmError } from '@acs/core/ports';

/** What the engine reads off a conversation's log (pure functions): metrics, what waits for confirmation, what was handled, the model to call. */

export const errorCodeOf = (e: LlmError): ConversationErrorCode =>
  e.type === 'cancelled' ? 'internal_error' : (`llm_${e.type}` as ConversationErrorCode);

/** How much the next call may cost: the last call's cost (calls grow with the history, so this is a lower bound). */
export const lastKnownCost = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'llm_call' && e.cost_usd !== null) return e.cost_usd;
  }
  return 0;
};

export function metricsOf(events: readonly ConversationEvent[], budget: number | null): ConversationMetrics {
  let cost = 0;
  let known = true;
  let prompt = 0;
  let completion = 0;
  let cached = 0;
  let last: { model: string; tokens: number } | null = null;
  for (const e of events) {
    if (e.kind !== 'llm_call') continue;
    prompt += e.prompt_tokens;
    completion += e.completion_tokens;
    cached += e.cached_prompt_tokens;
    last = { model: e.model, tokens: e.prompt_tokens + e.completion_tokens };
    if (e.cost_usd === null) known = false;
    else cost += e.cost_usd;
  }
  const priced = Math.round(cost * 1e6) / 1e6;
  return {
    accumulated_cost: known ? priced : null,
    max_budget_per_task: budget,
    prompt_tokens: prompt,
    completion_tokens: completion,
    cache_read_tokens: cached,
    priced_cost: priced,
    ...(last ? { model: last.model, last_call_tokens: last.tokens } : {}),
  };
}

/** Model calls that were agent steps (not summaries). */
export const isAgentCall = (e: ConversationEvent): boolean => e.kind === 'llm_call' && e.purpose !== 'condenser';

/** The actions that wait for the user: asked to be confirmed, with no result yet. */
export function pendingConfirmation(events: readonly ConversationEvent[]): ActionEvent[] {
  const answered = new Set(events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
  return events.filter((e): e is ActionEvent => e.kind === 'action' && e.requires_confirmation === true && !answered.has(e.tool_call_id));
}

/** The user's decision on those actions, if one was recorded after them. */
export const decisionOn = (events: readonly ConversationEvent[], pending: readonly ActionEvent[]): ConfirmationEvent | null => {
  const ids = new Set(pending.map((a) => a.tool_call_id));
  const after = pending[pending.length - 1]?.id ?? 0;
  return (events.find((e): e is ConfirmationEvent => e.kind === 'confirmation' && e.id > after && e.tool_call_ids.some((id) => ids.has(id))) ?? null);
};

/** Index just after the last user message: the steps taken for it come after. */
export const lastUserMessageIndex = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'message' && e.source === 'user') return i;
  }
  return -1;
};

/** From a log alone: the last model call, replayed action or stopping error, the point up to which the agent has acted. */
export const lastHandledId = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (isAgentCall(e) || (e.kind === 'error' && e.fatal)) return e.id;
    if ((e.kind === 'action' || (e.kind === 'message' && e.source === 'agent')) && e.replay_step !== undefined) return e.id;
  }
  return 0;
};

/**
 * The model a conversation calls now: the LLM profile it was switched to (its model, base URL
 * and key, the settings' key when it has none), else its own `llm_model` with the settings' key
 * and base URL. A profile deleted since counts as none.
 */
export const credentialsOf = (record: ConversationRecord, settings: StoredSettings | null): LlmCredentials | null => {
  const profile = record.llm_profile_id ? settings?.llm_profiles?.profiles.find((p) => p.id === record.llm_profile_id) : undefined;
  if (profile) {
    const model = profile.model ?? record.llm_model ?? settings?.llm_model ?? null;
    return model ? { model, api_key: profile.api_key ?? settings?.llm_api_key ?? null, base_url: profile.base_url || null } : null;
  }
  const model = record.llm_model ?? settings?.llm_model ?? null;
  if (!model) return null;
  return { model, api_key: settings?.llm_api_key ?? null, base_url: settings?.llm_base_url || null };
};
