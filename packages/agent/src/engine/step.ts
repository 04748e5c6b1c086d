import type { ActionEvent, ConversationEventDraft, ConversationMetrics, ConversationRecord, StoredSettings } from '@acs/core/schemas';
import type { LlmCredentials, LlmResponse } from '@acs/core/ports';
import { CUT_OFF_ANSWER_NOTE, CUT_OFF_CALL_RESULT, EMPTY_ANSWER_NOTE, noteStillStands } from '../answer-notes.js';
import { planCondensation, summaryRequest, type CondenserOptions } from '../condenser.js';
import { systemPrompt } from '../prompt.js';
import { assessAction, needsConfirmation, SECURITY_RISK_GUIDANCE, type SecurityPolicy } from '../security.js';
import { detectStuck } from '../stuck.js';
import { parseToolArguments } from '../toolset.js';
import type { Actions } from './actions.js';
import type { EngineBase } from './base.js';
import { errorCodeOf } from './log-reading.js';
import type { Recording } from './recording.js';
import type { Runner, StepEnd } from './runner.js';

/**
 * One step of the loop: limits and stuck checks, the condenser, one model call with the
 * conversation's tools, the response's actions appended (rated, maybe held for confirmation)
 * before any runs.
 */
export function createStepper(kit: EngineBase & Recording & Actions) {
  const { deps, sandboxes, llm, defaultMaxIterations, append, catchUp, now, setStatus, saveMetrics, errorEvent, fail, stopUntilMessage, ruleContext, reportLostMcp, toolsetOf, toolContext, runActions, afterActions } = kit;

  const condenserOptions = (stored: StoredSettings | null): CondenserOptions => ({
    ...deps.options?.condenser,
    ...(stored?.condenser_max_size ? { maxEvents: stored.condenser_max_size } : {}),
  });

  /** The llm_call event of a response, with the conversation's totals after it (also what the record's metrics become). */
  const llmCallDraft = (
    r: Runner,
    answer: LlmResponse,
    responseId: string,
    purpose: 'agent' | 'condenser',
    budget: number | null,
  ): { event: ConversationEventDraft; metrics: ConversationMetrics } => {
    const draft = {
      kind: 'llm_call' as const,
      source: 'environment' as const,
      timestamp: now(),
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
    const accumulated = { cost_usd: metrics.accumulated_cost, prompt_tokens: metrics.prompt_tokens, completion_tokens: metrics.completion_tokens };
    return { event: { ...draft, accumulated }, metrics };
  };

  /**
   * Summarises older events when the view is past the condenser's bounds (or, forced, because
   * the model said the prompt was too long). 'none' when nothing needed condensing.
   */
  const condense = async (r: Runner, credentials: LlmCredentials, stored: StoredSettings | null, force: boolean): Promise<'none' | 'condensed' | 'stop'> => {
    const options = condenserOptions(stored);
    // Within bounds (most steps), planning would find nothing: skip its reading of the whole log.
    if (!force && r.log.withinCondenserBounds(options)) return 'none';
    const plan = planCondensation(r.log.events, options, force);
    if (!plan) return 'none';
    const response = await llm.complete({ credentials, messages: summaryRequest(plan, options), tools: [], signal: r.abort.signal });
    if (response.isErr()) {
      if (response.error.type === 'cancelled' || r.abort.signal.aborted) return 'stop';
      await fail(r, errorCodeOf(response.error), `Summarising older events to keep the prompt bounded failed (${response.error.type}): ${response.error.message}`);
      return 'stop';
    }
    const answer = response.value;
    const call = llmCallDraft(r, answer, answer.id ?? `condense-${r.log.lastId}`, 'condenser', stored?.max_budget_per_task ?? null);
    await append(r, [
      call.event,
      {
        kind: 'condensation',
        source: 'environment',
        timestamp: now(),
        summary: answer.content?.trim() || '(The summariser returned nothing; the earlier events are not available.)',
        kept_head_through: plan.keptHeadThrough,
        forgotten_through: plan.forgottenThrough,
        forgotten_events: plan.forgottenCount,
        reason: plan.reason,
      },
    ]);
    await saveMetrics(r, call.metrics);
    return 'condensed';
  };

  /** A note from the service to the model, unless the model has it already and has shown nothing since. */
  const noteOnce = async (r: Runner, text: string): Promise<void> => {
    if (noteStillStands(r.log.events, text)) return;
    await append(r, [{ kind: 'message', source: 'environment', timestamp: now(), text, image_urls: [] }]);
  };

  /**
   * An answer cut off by the output token limit (`finish_reason: length`): its calls may be
   * truncated, so none runs; each gets a result that says why, and an answer without calls a
   * note. The agent goes on, so the model can answer again in smaller pieces.
   */
  const answerCutOff = async (r: Runner, actions: readonly ActionEvent[]): Promise<StepEnd> => {
    if (actions.length === 0) {
      await noteOnce(r, CUT_OFF_ANSWER_NOTE);
      return 'continue';
    }
    await append(
      r,
      actions.map((a) => ({
        kind: 'observation' as const,
        source: 'environment' as const,
        timestamp: now(),
        tool_call_id: a.tool_call_id,
        tool_name: a.tool_name,
        content: CUT_OFF_CALL_RESULT,
        is_error: true,
        exit_code: null,
        details: { cut_off: true },
      })),
    );
    return 'continue';
  };

  /** One model call and what follows from it. */
  const step = async (
    r: Runner,
    record: ConversationRecord,
    stored: StoredSettings | null,
    policy: SecurityPolicy,
    credentials: LlmCredentials,
    sandboxId: string,
    workingDir: string,
  ): Promise<StepEnd> => {
    await catchUp(r);
    if (r.abort.signal.aborted) return 'stop';
    await reportLostMcp(r);

    const verdict = detectStuck(r.log.events);
    if (verdict.kind === 'stuck') {
      await append(r, [errorEvent('stuck', `The agent is stuck: ${verdict.reason}. Send a message to give it new directions.`, true)]);
      await setStatus(r, 'stuck', verdict.reason);
      return 'stop';
    }
    if (verdict.kind === 'nudge') {
      await append(r, [{ kind: 'message', source: 'environment', timestamp: now(), text: verdict.message, image_urls: [] }]);
    }

    const iterations = r.log.agentCallsSinceUserMessage;
    const maxIterations = stored?.max_iterations ?? defaultMaxIterations;
    if (iterations >= maxIterations) {
      await stopUntilMessage(
        r,
        'max_iterations_reached',
        `The agent took ${iterations} steps for the last message, the limit (max_iterations = ${maxIterations}), and stopped. Send a message to let it continue: each message allows ${maxIterations} more.`,
      );
      return 'stop';
    }

    const budget = stored?.max_budget_per_task ?? null;
    if (budget !== null) {
      const metrics = r.log.metrics(budget);
      if (metrics.accumulated_cost === null) {
        if (!r.log.hasError('budget_unenforceable')) {
          await append(r, [
            errorEvent(
              'budget_unenforceable',
              `max_budget_per_task is ${budget} USD, but the price of ${credentials.model} is unknown, so the budget cannot be enforced. Tokens are still counted.`,
            ),
          ]);
        }
      } else if (metrics.accumulated_cost + r.log.lastKnownCost > budget) {
        await fail(
          r,
          'budget_exceeded',
          `The conversation has cost ${metrics.accumulated_cost.toFixed(4)} USD; the next model call would likely take it past max_budget_per_task (${budget} USD), so the agent stopped.`,
        );
        return 'stop';
      }
    }

    const condenserOn = stored?.enable_default_condenser ?? true;
    if (condenserOn && (await condense(r, credentials, stored, false)) === 'stop') return 'stop';

    const toolset = toolsetOf(r, workingDir);
    const messages = [
      {
        role: 'system' as const,
        content: systemPrompt({
          workingDir,
          instructions: record.launch.conversation_instructions,
          startedAt: record.created_at,
          repository: record.workspace ? { name: record.workspace.repository, branch: record.workspace.branch, guidance: record.workspace.guidance } : null,
          riskGuidance: policy.analyzer === 'llm' || policy.analyzer === 'ensemble' ? SECURITY_RISK_GUIDANCE : null,
        }),
      },
      ...r.log.prompt(record.workspace?.guidance.knowledge ?? []),
    ];
    const seenUpTo = r.log.lastId;
    r.handledUpTo = seenUpTo;
    const response = await llm.complete({ credentials, messages, tools: toolset.definitions, signal: r.abort.signal });
    if (response.isErr()) {
      if (response.error.type === 'cancelled' || r.abort.signal.aborted) return 'stop';
      // Too long for the model: condense harder and try again, once per step.
      if (response.error.type === 'context_too_long' && condenserOn && !r.forcedCondensation) {
        r.forcedCondensation = true;
        const condensed = await condense(r, credentials, stored, true);
        if (condensed === 'stop') return 'stop';
        if (condensed === 'condensed') return 'continue';
      }
      await fail(r, errorCodeOf(response.error), `The model call failed (${response.error.type}${response.error.status ? `, HTTP ${response.error.status}` : ''}): ${response.error.message}`);
      return 'stop';
    }
    r.forcedCondensation = false;
    const answer = response.value;
    const responseId = answer.id ?? `resp-${seenUpTo}-${r.log.events.length}`;
    const call = llmCallDraft(r, answer, responseId, 'agent', budget);
    const drafts: ConversationEventDraft[] = [call.event];
    const rules = ruleContext(workingDir);
    const actionDrafts: Extract<ConversationEventDraft, { kind: 'action' }>[] = [];
    const usedIds = new Set<string>();
    for (const [i, call] of answer.tool_calls.entries()) {
      const parsed = parseToolArguments(call.arguments);
      // Tool call ids must be unique in the history; some servers reuse or omit them.
      let id = call.id || `call_${seenUpTo}_${i}`;
      if (usedIds.has(id) || r.log.hasAction(id)) id = `${id}_${seenUpTo}_${i}`;
      usedIds.add(id);
      call.id = id;
      const mcp = toolset.get(call.name)?.mcp;
      const assessment = assessAction(policy, { tool_name: call.name, arguments: parsed.value, ...(mcp ? { mcp } : {}) }, rules);
      actionDrafts.push({
        kind: 'action',
        source: 'agent',
        timestamp: now(),
        tool_call_id: id,
        tool_name: call.name,
        arguments: parsed.value,
        raw_arguments: call.arguments,
        thought: i === 0 ? (answer.content?.trim() || null) : null,
        response_id: responseId,
        ...(assessment ? { security_risk: assessment.risk, risk_reasons: assessment.reasons } : {}),
      });
    }
    // A cut-off answer is never held for confirmation: accepting it would run a truncated call.
    const cutOff = answer.finish_reason === 'length';
    const confirm = !cutOff && needsConfirmation(policy, actionDrafts.map((a) => ({ tool_name: a.tool_name, risk: a.security_risk ?? null })));
    drafts.push(...actionDrafts.map((a) => (confirm ? { ...a, requires_confirmation: true } : a)));
    if (answer.tool_calls.length === 0 && answer.content?.trim()) {
      drafts.push({ kind: 'message', source: 'agent', timestamp: now(), text: answer.content, image_urls: [] });
    }
    const appended = await append(r, drafts);
    await saveMetrics(r, call.metrics);
    sandboxes.touch(r.userId, sandboxId);
    const actions = appended.filter((e): e is ActionEvent => e.kind === 'action');

    if (cutOff) return answerCutOff(r, actions);
    if (answer.tool_calls.length === 0) {
      if (answer.content?.trim()) {
        await setStatus(r, 'finish', 'the agent replied and waits for the user');
        return 'stop';
      }
      await noteOnce(r, EMPTY_ANSWER_NOTE);
      return 'continue';
    }

    if (confirm) {
      const risky = actionDrafts.filter((a) => a.security_risk === 'high' || a.security_risk === 'unknown').length;
      await setStatus(
        r,
        'await_confirmation',
        `${actionDrafts.length} action(s) wait for the user to accept or reject them${policy.confirm === 'risky' ? ` (${risky} rated high or unknown risk)` : ''}`,
      );
      return 'stop';
    }

    return afterActions(r, await runActions(r, actions, answer.tool_calls, sandboxId, toolContext(r, sandboxId, workingDir), toolset), sandboxId);
  };

  return { condenserOptions, llmCallDraft, condense, step };
}

export type Stepper = ReturnType<typeof createStepper>;
