import type {
  ActionEvent,
  ConversationEventDraft,
  ConversationMetrics,
  ConversationRecord,
  StoredSettings,
} from '@acs/core/schemas';
import type { KeyedSemaphore } from '@acs/core';
import type { AgentHost, LlmCredentials, LlmError, LlmMessage, LlmRequest, LlmResponse } from '@acs/core/ports';
import { err, type Result } from 'neverthrow';
import { CUT_OFF_ANSWER_NOTE, CUT_OFF_CALL_RESULT, EMPTY_ANSWER_NOTE, noteStillStands } from '../answer-notes.js';
import { planCondensation, summaryRequest, type CondenserOptions } from '../condenser.js';
import { systemPrompt } from '../prompt.js';
import { assessAction, needsConfirmation, SECURITY_RISK_GUIDANCE, type SecurityPolicy } from '../security.js';
import { detectStuck } from '../stuck.js';
import { parseToolArguments, type Toolset } from '../toolset.js';
import type { Actions } from './actions.js';
import { errorCodeOf } from './log-reading.js';
import { coalescingSink, DELTA_WINDOW_MS, deltaPublisher } from './deltas.js';
import type { AgentEngineOptions } from './options.js';
import type { Recording } from './recording.js';
import { answering, ends, type Answered, type Runner, type StepEnd } from './runner.js';

/** What a step needs: the model, the sandboxes and the log (for the answer's deltas), the engine's options and step limit, recording and actions. */
export interface StepperDeps {
  host: Pick<AgentHost, 'llm' | 'sandboxes' | 'log'>;
  options: AgentEngineOptions;
  /** Steps per user message when the user's `max_iterations` is unset. */
  defaultMaxIterations: number;
  recording: Recording;
  actions: Actions;
  /** Each user's model calls at once (`maxModelCallsPerUser`): a call waits here for its turn. */
  modelCalls: KeyedSemaphore;
}

/** What a run steps with: read once when it starts (the credentials and `stream` again before each step). */
interface StepInput {
  record: ConversationRecord;
  stored: StoredSettings | null;
  policy: SecurityPolicy;
  credentials: LlmCredentials;
  /** The model's answer streams, each piece published to live clients as a transient delta. */
  stream: boolean;
  sandboxId: string;
  workingDir: string;
}

/**
 * One step of the loop: limits and stuck checks, the condenser, one model call with the
 * conversation's tools, the response's actions appended (rated, maybe held for confirmation)
 * before any runs.
 */
export interface Stepper {
  step: (r: Runner, input: StepInput) => Promise<StepEnd>;
}

export function createStepper(deps: StepperDeps): Stepper {
  return { step: (r, input) => step(deps, r, input) };
}

/** One model call, once the user has a free place among their calls at once; a stop while it waits is a cancelled call. */
async function callModel(deps: StepperDeps, r: Runner, request: LlmRequest): Promise<Result<LlmResponse, LlmError>> {
  const answered = await deps.modelCalls.run(r.userId, r.signal, () => deps.host.llm.complete(request));
  return (
    answered ??
    err({
      type: 'cancelled',
      message: 'The run was stopped while its model call waited for its turn.',
      status: null,
      retryable: false,
      attempts: 0,
    })
  );
}

async function step(deps: StepperDeps, r: Runner, input: StepInput): Promise<StepEnd> {
  const { recording, actions } = deps;
  await recording.catchUp(r);
  if (r.stopped) return 'stop';
  await actions.reportLostMcp(r);
  const limits = await checkLimits(deps, r, input);
  if (ends(limits)) return limits;
  const condenserOn = input.stored?.enable_default_condenser ?? true;
  const condensed = condenserOn ? await condense(deps, r, input, false) : 'none';
  if (condensed !== 'none' && condensed !== 'condensed') return condensed;
  // The model is shown the log up to here: whatever the step does next answers it up to here.
  const seenUpTo = r.log.lastId;
  return answering(seenUpTo, await ask(deps, r, input, condenserOn, seenUpTo));
}

/** The model call of a step and what follows its answer. */
async function ask(
  deps: StepperDeps,
  r: Runner,
  input: StepInput,
  condenserOn: boolean,
  seenUpTo: number,
): Promise<StepEnd> {
  const { recording, actions } = deps;
  const toolset = actions.toolsetOf(r, input.workingDir);
  const deltas = input.stream ? coalescingSink(deps.host.log, deps.options.deltaWindowMs ?? DELTA_WINDOW_MS) : null;
  const response = await callModel(deps, r, {
    credentials: input.credentials,
    messages: promptOf(r, input),
    tools: toolset.definitions,
    signal: r.signal,
    ...(deltas ? { onDelta: deltaPublisher({ log: deltas, now: deps.recording.now }, r) } : {}),
  });
  // The last pieces go out before the stored event that holds the whole answer (none once stopped).
  if (r.stopped) deltas?.drop();
  else deltas?.flush();
  if (response.isErr()) {
    if (response.error.type === 'cancelled' || r.stopped) return 'stop';
    // Too long for the model: condense harder and try again, once per step.
    if (response.error.type === 'context_too_long' && condenserOn && !r.forcedCondensation) {
      r.setForcedCondensation(true);
      const condensed = await condense(deps, r, input, true);
      if (condensed === 'condensed') return 'continue';
      if (condensed !== 'none') return condensed;
    }
    const { type, status, message } = response.error;
    return recording.fail(
      r,
      errorCodeOf(response.error),
      `The model call failed (${type}${status ? `, HTTP ${status}` : ''}): ${message}`,
    );
  }
  r.setForcedCondensation(false);
  return answer(deps, r, input, toolset, response.value, seenUpTo);
}

/** The stuck detector, max_iterations and the budget: 'stop' when one of them ends the run (after saying why). */
async function checkLimits(deps: StepperDeps, r: Runner, input: StepInput): Promise<StepEnd> {
  const { recording } = deps;
  const verdict = detectStuck(r.log.events);
  if (verdict.kind === 'stuck') {
    await recording.append(r, [
      recording.errorEvent(
        'stuck',
        `The agent is stuck: ${verdict.reason}. Send a message to give it new directions.`,
        true,
      ),
    ]);
    await recording.setStatus(r, 'stuck', verdict.reason);
    return 'stop';
  }
  if (verdict.kind === 'nudge') {
    await recording.append(r, [
      { kind: 'message', source: 'environment', timestamp: recording.now(), text: verdict.message, image_urls: [] },
    ]);
  }

  const iterations = r.log.agentCallsSinceUserMessage;
  const maxIterations = input.stored?.max_iterations ?? deps.defaultMaxIterations;
  if (iterations >= maxIterations) {
    return recording.stopUntilMessage(
      r,
      'max_iterations_reached',
      `The agent took ${iterations} steps for the last message, the limit (max_iterations = ${maxIterations}), and stopped. Send a message to let it continue: each message allows ${maxIterations} more.`,
    );
  }
  return checkBudget(deps, r, input);
}

async function checkBudget(deps: StepperDeps, r: Runner, input: StepInput): Promise<StepEnd> {
  const budget = input.stored?.max_budget_per_task ?? null;
  if (budget === null) return 'continue';
  const { recording } = deps;
  const metrics = r.log.metrics(budget);
  if (metrics.accumulated_cost === null) {
    if (!r.log.hasError('budget_unenforceable')) {
      const why = `max_budget_per_task is ${budget} USD, but the price of ${input.credentials.model} is unknown, so the budget cannot be enforced. Tokens are still counted.`;
      await recording.append(r, [recording.errorEvent('budget_unenforceable', why)]);
    }
    return 'continue';
  }
  if (metrics.accumulated_cost + r.log.lastKnownCost > budget) {
    return recording.fail(
      r,
      'budget_exceeded',
      `The conversation has cost ${metrics.accumulated_cost.toFixed(4)} USD; the next model call would likely take it past max_budget_per_task (${budget} USD), so the agent stopped.`,
    );
  }
  return 'continue';
}

/** The system prompt and the conversation as the model sees it. */
function promptOf(r: Runner, input: StepInput): LlmMessage[] {
  const { record, policy, workingDir } = input;
  const system = systemPrompt({
    workingDir,
    instructions: record.launch.conversation_instructions,
    startedAt: record.created_at,
    repository: record.workspace
      ? { name: record.workspace.repository, branch: record.workspace.branch, guidance: record.workspace.guidance }
      : null,
    riskGuidance: policy.analyzer === 'llm' || policy.analyzer === 'ensemble' ? SECURITY_RISK_GUIDANCE : null,
  });
  return r.log.prompt(record.workspace?.guidance.knowledge ?? [], [{ role: 'system', content: system }]);
}

const condenserOptions = (deps: StepperDeps, stored: StoredSettings | null): CondenserOptions => ({
  ...deps.options.condenser,
  ...(stored?.condenser_max_size ? { maxEvents: stored.condenser_max_size } : {}),
});

/** The llm_call event of a response, with the conversation's totals after it (also what the record's metrics become). */
function llmCallDraft(
  deps: StepperDeps,
  r: Runner,
  answer: LlmResponse,
  responseId: string,
  purpose: 'agent' | 'condenser',
  budget: number | null,
): { event: ConversationEventDraft; metrics: ConversationMetrics } {
  const draft = {
    kind: 'llm_call' as const,
    source: 'environment' as const,
    timestamp: deps.recording.now(),
    response_id: responseId,
    model: answer.model,
    prompt_tokens: answer.usage.prompt_tokens,
    completion_tokens: answer.usage.completion_tokens,
    cached_prompt_tokens: answer.usage.cached_prompt_tokens,
    cost_usd: answer.usage.cost_usd,
    latency_ms: Math.round(answer.latency_ms),
    attempts: answer.attempts,
    purpose,
  };
  const metrics = r.log.metricsWith(draft, budget);
  const accumulated = {
    cost_usd: metrics.accumulated_cost,
    prompt_tokens: metrics.prompt_tokens,
    completion_tokens: metrics.completion_tokens,
  };
  return { event: { ...draft, accumulated }, metrics };
}

/**
 * Summarises older events when the view is past the condenser's bounds (or, forced, because
 * the model said the prompt was too long). 'none' when nothing needed condensing; a stop when
 * the summary could not be made.
 */
async function condense(
  deps: StepperDeps,
  r: Runner,
  input: StepInput,
  force: boolean,
): Promise<'none' | 'condensed' | 'stop' | Answered> {
  const { recording } = deps;
  const options = condenserOptions(deps, input.stored);
  // Within bounds (most steps), planning would find nothing: skip its reading of the whole log.
  if (!force && r.log.withinCondenserBounds(options)) return 'none';
  const plan = planCondensation(r.log.events, options, force);
  if (!plan) return 'none';
  const response = await callModel(deps, r, {
    credentials: input.credentials,
    messages: summaryRequest(plan, options),
    tools: [],
    signal: r.signal,
  });
  if (response.isErr()) {
    if (response.error.type === 'cancelled' || r.stopped) return 'stop';
    return recording.fail(
      r,
      errorCodeOf(response.error),
      `Summarising older events to keep the prompt bounded failed (${response.error.type}): ${response.error.message}`,
    );
  }
  const answer = response.value;
  const call = llmCallDraft(
    deps,
    r,
    answer,
    answer.id ?? `condense-${r.log.lastId}`,
    'condenser',
    input.stored?.max_budget_per_task ?? null,
  );
  await recording.append(r, [
    call.event,
    {
      kind: 'condensation',
      source: 'environment',
      timestamp: recording.now(),
      summary: answer.content?.trim() || '(The summariser returned nothing; the earlier events are not available.)',
      kept_head_through: plan.keptHeadThrough,
      forgotten_through: plan.forgottenThrough,
      forgotten_events: plan.forgottenCount,
      reason: plan.reason,
    },
  ]);
  await recording.saveMetrics(r, call.metrics);
  return 'condensed';
}

type ActionDraft = Extract<ConversationEventDraft, { kind: 'action' }>;

/** The response's tool calls as action drafts: ids made unique in the history, each rated by the security policy. */
function actionDrafts(
  deps: StepperDeps,
  r: Runner,
  input: StepInput,
  toolset: Toolset,
  answer: LlmResponse,
  responseId: string,
  seenUpTo: number,
): ActionDraft[] {
  const rules = deps.actions.ruleContext(input.workingDir);
  const drafts: ActionDraft[] = [];
  const usedIds = new Set<string>();
  for (const [i, call] of answer.tool_calls.entries()) {
    const parsed = parseToolArguments(call.arguments);
    // Tool call ids must be unique in the history; some servers reuse or omit them.
    let id = call.id || `call_${seenUpTo}_${i}`;
    if (usedIds.has(id) || r.log.hasAction(id)) id = `${id}_${seenUpTo}_${i}`;
    usedIds.add(id);
    call.id = id;
    const mcp = toolset.get(call.name)?.mcp;
    const assessment = assessAction(
      input.policy,
      { tool_name: call.name, arguments: parsed.value, ...(mcp ? { mcp } : {}) },
      rules,
    );
    drafts.push({
      kind: 'action',
      source: 'agent',
      timestamp: deps.recording.now(),
      tool_call_id: id,
      tool_name: call.name,
      arguments: parsed.value,
      raw_arguments: call.arguments,
      thought: i === 0 ? answer.content?.trim() || null : null,
      response_id: responseId,
      ...(assessment ? { security_risk: assessment.risk, risk_reasons: assessment.reasons } : {}),
    });
  }
  return drafts;
}

/** What follows a model's answer: its llm_call and actions (or message) appended, then the actions run, held for confirmation, or the run ends. */
async function answer(
  deps: StepperDeps,
  r: Runner,
  input: StepInput,
  toolset: Toolset,
  response: LlmResponse,
  seenUpTo: number,
): Promise<StepEnd> {
  const { recording, actions } = deps;
  const responseId = response.id ?? `resp-${seenUpTo}-${r.log.events.length}`;
  const call = llmCallDraft(deps, r, response, responseId, 'agent', input.stored?.max_budget_per_task ?? null);
  const planned = actionDrafts(deps, r, input, toolset, response, responseId, seenUpTo);
  // A cut-off answer is never held for confirmation: accepting it would run a truncated call.
  const cutOff = response.finish_reason === 'length';
  const confirm =
    !cutOff &&
    needsConfirmation(
      input.policy,
      planned.map((a) => ({ tool_name: a.tool_name, risk: a.security_risk ?? null })),
    );
  const drafts: ConversationEventDraft[] = [
    call.event,
    ...planned.map((a) => (confirm ? { ...a, requires_confirmation: true } : a)),
  ];
  if (response.tool_calls.length === 0 && response.content?.trim()) {
    drafts.push({
      kind: 'message',
      source: 'agent',
      timestamp: recording.now(),
      text: response.content,
      image_urls: [],
    });
  }
  // Both at once: a store that commits the calls of one turn together (SQLite) makes them one
  // commit, one fsync, instead of two in a row (issue 27).
  const [appended] = await Promise.all([recording.append(r, drafts), recording.saveMetrics(r, call.metrics)]);
  deps.host.sandboxes.touch(r.userId, input.sandboxId);
  const appendedActions = appended.filter((e): e is ActionEvent => e.kind === 'action');

  if (cutOff) return answerCutOff(deps, r, appendedActions);
  if (response.tool_calls.length === 0) {
    if (response.content?.trim()) {
      await recording.setStatus(r, 'finish', 'the agent replied and waits for the user');
      return 'stop';
    }
    await noteOnce(deps, r, EMPTY_ANSWER_NOTE);
    return 'continue';
  }
  if (confirm) {
    const risky = planned.filter((a) => a.security_risk === 'high' || a.security_risk === 'unknown').length;
    const why = `${planned.length} action(s) wait for the user to accept or reject them${input.policy.confirm === 'risky' ? ` (${risky} rated high or unknown risk)` : ''}`;
    await recording.setStatus(r, 'await_confirmation', why);
    return 'stop';
  }
  const context = actions.toolContext(r, input.sandboxId, input.workingDir);
  const outcome = await actions.runActions(r, appendedActions, response.tool_calls, input.sandboxId, context, toolset);
  return actions.afterActions(r, outcome, input.sandboxId);
}

/** A note from the service to the model, unless the model has it already and has shown nothing since. */
async function noteOnce(deps: StepperDeps, r: Runner, text: string): Promise<void> {
  if (noteStillStands(r.log.events, text)) return;
  await deps.recording.append(r, [
    { kind: 'message', source: 'environment', timestamp: deps.recording.now(), text, image_urls: [] },
  ]);
}

/**
 * An answer cut off by the output token limit (`finish_reason: length`): its calls may be
 * truncated, so none runs; each gets a result that says why, and an answer without calls a
 * note. The agent goes on, so the model can answer again in smaller pieces.
 */
async function answerCutOff(deps: StepperDeps, r: Runner, actions: readonly ActionEvent[]): Promise<StepEnd> {
  if (actions.length === 0) {
    await noteOnce(deps, r, CUT_OFF_ANSWER_NOTE);
    return 'continue';
  }
  const now = deps.recording.now();
  await deps.recording.append(
    r,
    actions.map((a) => ({
      kind: 'observation' as const,
      source: 'environment' as const,
      timestamp: now,
      tool_call_id: a.tool_call_id,
      tool_name: a.tool_name,
      content: CUT_OFF_CALL_RESULT,
      is_error: true,
      exit_code: null,
      details: { cut_off: true },
    })),
  );
  return 'continue';
}
