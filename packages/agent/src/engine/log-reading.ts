import type {
  ActionEvent,
  ConfirmationEvent,
  ConversationErrorCode,
  ConversationEvent,
  ConversationMetrics,
  ConversationRecord,
  StoredSettings,
} from '@acs/core/schemas';
import type { LlmCredentials, LlmError } from '@acs/core/ports';

/** What the engine reads off a conversation's log (pure functions): metrics, what waits for confirmation, what was handled, the model to call. */

export const errorCodeOf = (e: LlmError): ConversationErrorCode =>
  e.type === 'cancelled' ? 'internal_error' : (`llm_${e.type}` as ConversationErrorCode);

/** What a conversation's model calls add up to, kept as events arrive (metricsOf is these totals over a whole log). */
export interface MetricTotals {
  cost: number;
  /** Every call had a price. */
  known: boolean;
  prompt: number;
  completion: number;
  cached: number;
  last: { model: string; tokens: number } | null;
}

export const emptyTotals = (): MetricTotals => ({
  cost: 0,
  known: true,
  prompt: 0,
  completion: 0,
  cached: 0,
  last: null,
});

type LlmCallFields = Pick<
  Extract<ConversationEvent, { kind: 'llm_call' }>,
  'prompt_tokens' | 'completion_tokens' | 'cached_prompt_tokens' | 'model' | 'cost_usd'
>;

/** Adds one model call to the totals (in log order, so the sums are the same floating-point numbers as a scan's). */
export function addCall(totals: MetricTotals, e: LlmCallFields): void {
  totals.prompt += e.prompt_tokens;
  totals.completion += e.completion_tokens;
  totals.cached += e.cached_prompt_tokens;
  totals.last = { model: e.model, tokens: e.prompt_tokens + e.completion_tokens };
  if (e.cost_usd === null) totals.known = false;
  else totals.cost += e.cost_usd;
}

/** The conversation's metrics from its totals. */
export function metricsFromTotals(totals: MetricTotals, budget: number | null): ConversationMetrics {
  const priced = Math.round(totals.cost * 1e6) / 1e6;
  return {
    accumulated_cost: totals.known ? priced : null,
    max_budget_per_task: budget,
    prompt_tokens: totals.prompt,
    completion_tokens: totals.completion,
    cache_read_tokens: totals.cached,
    priced_cost: priced,
    ...(totals.last ? { model: totals.last.model, last_call_tokens: totals.last.tokens } : {}),
  };
}

/** The metrics of a whole log (a scan; the engine keeps running totals instead, see RunnerLog). */
export function metricsOf(events: readonly ConversationEvent[], budget: number | null): ConversationMetrics {
  const totals = emptyTotals();
  for (const e of events) if (e.kind === 'llm_call') addCall(totals, e);
  return metricsFromTotals(totals, budget);
}

/** Model calls that were agent steps (not summaries). */
export const isAgentCall = (e: ConversationEvent): boolean => e.kind === 'llm_call' && e.purpose !== 'condenser';

/** The actions that wait for the user: asked to be confirmed, with no result yet. */
export function pendingConfirmation(events: readonly ConversationEvent[]): ActionEvent[] {
  const answered = new Set(events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
  return events.filter(
    (e): e is ActionEvent => e.kind === 'action' && e.requires_confirmation === true && !answered.has(e.tool_call_id),
  );
}

/** The user's decision on those actions, if one was recorded after them. */
export const decisionOn = (
  events: readonly ConversationEvent[],
  pending: readonly ActionEvent[],
): ConfirmationEvent | null => {
  const ids = new Set(pending.map((a) => a.tool_call_id));
  const after = pending[pending.length - 1]?.id ?? 0;
  return (
    events.find(
      (e): e is ConfirmationEvent =>
        e.kind === 'confirmation' && e.id > after && e.tool_call_ids.some((id) => ids.has(id)),
    ) ?? null
  );
};

/** From a log alone: the last model call, replayed action or stopping error, the point up to which the agent has acted. */
export const lastHandledId = (events: readonly ConversationEvent[]): number => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (isAgentCall(e) || (e.kind === 'error' && e.fatal)) return e.id;
    if ((e.kind === 'action' || (e.kind === 'message' && e.source === 'agent')) && e.replay_step !== undefined)
      return e.id;
  }
  return 0;
};

/** The LLM profile a conversation was switched to, if it still exists. */
const switchedProfile = (record: ConversationRecord, settings: StoredSettings | null) =>
  record.llm_profile_id ? settings?.llm_profiles?.profiles.find((p) => p.id === record.llm_profile_id) : undefined;

/**
 * The model a conversation calls now: the LLM profile it was switched to (its model, base URL
 * and key, the settings' key when it has none), else its own `llm_model` with the settings' key
 * and base URL. A profile deleted since counts as none.
 */
export const credentialsOf = (record: ConversationRecord, settings: StoredSettings | null): LlmCredentials | null => {
  const profile = switchedProfile(record, settings);
  if (profile) {
    const model = profile.model ?? record.llm_model ?? settings?.llm_model ?? null;
    return model
      ? { model, api_key: profile.api_key ?? settings?.llm_api_key ?? null, base_url: profile.base_url || null }
      : null;
  }
  const model = record.llm_model ?? settings?.llm_model ?? null;
  if (!model) return null;
  return { model, api_key: settings?.llm_api_key ?? null, base_url: settings?.llm_base_url || null };
};

/** Whether the model's answers stream: as the profile the conversation was switched to says, else the settings' `llm_stream` (default true). */
export const streamsOf = (record: ConversationRecord, settings: StoredSettings | null): boolean => {
  const profile = switchedProfile(record, settings);
  return (profile ? profile.stream : settings?.llm_stream) ?? true;
};
