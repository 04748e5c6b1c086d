import type { CondensationEvent, ConversationEvent, ConversationMetrics, ErrorEvent } from '@acs/core/schemas';
import type { KnowledgeFile, LlmMessage } from '@acs/core/ports';
import { condensedView, shownSize, withinCondenserBounds, type CondenserOptions } from '../condenser.js';
import { IncrementalProjection } from '../prompt.js';
import { addCall, emptyTotals, isAgentCall, metricsFromTotals, type MetricTotals } from './log-reading.js';

type LlmCallFields = Parameters<typeof addCall>[1];

/**
 * A runner's copy of its conversation's log, with what every step reads off it kept up to date
 * as events arrive: the metric totals, the model calls since the user's last message, the tool
 * call ids in use, the condensed view's size and its prompt projection. A step then costs what
 * its own events cost, not a scan of the whole history (issue 27); each answer equals the scan
 * it replaces (log-reading's functions, condensedView, projectMessages), which the tests check.
 */
export class RunnerLog {
  /** Every event read or appended, in id order. */
  readonly events: ConversationEvent[] = [];
  #lastId = 0;
  readonly #totals: MetricTotals = emptyTotals();
  #lastKnownCost = 0;
  #lastUserMessageId = 0;
  #agentCallsSinceUser = 0;
  readonly #actionIds = new Set<string>();
  readonly #errorCodes = new Set<ErrorEvent['code']>();
  /** The latest condensation and what the model is shown because of it (condensedView's events). */
  #condensation: CondensationEvent | null = null;
  #view: ConversationEvent[] = [];
  #shownEvents = 0;
  #shownChars = 0;
  #projection: IncrementalProjection | null = null;

  /** The id of the last event held (0 for none). */
  get lastId(): number {
    return this.#lastId;
  }

  /** Adds events that follow the last one held; those at or before it are skipped. */
  add(events: readonly ConversationEvent[]): void {
    for (const e of events) {
      if (e.id <= this.#lastId) continue;
      this.events.push(e);
      this.#lastId = e.id;
      this.#track(e);
    }
  }

  #track(e: ConversationEvent): void {
    switch (e.kind) {
      case 'llm_call':
        addCall(this.#totals, e);
        if (e.cost_usd !== null) this.#lastKnownCost = e.cost_usd;
        if (isAgentCall(e)) this.#agentCallsSinceUser++;
        break;
      case 'message':
        if (e.source === 'user') {
          this.#lastUserMessageId = e.id;
          this.#agentCallsSinceUser = 0;
        }
        break;
      case 'action':
        this.#actionIds.add(e.tool_call_id);
        break;
      case 'error':
        this.#errorCodes.add(e.code);
        break;
      case 'condensation':
        this.#condensation = e;
        this.#rebuildView();
        return;
      default:
        break;
    }
    // After the latest condensation every new event is in the view (condensations themselves are not).
    this.#view.push(e);
    this.#countShown(e);
    this.#projection?.add(e);
  }

  /** A new condensation: the view is the head, the summary and what came after (once per condensation). */
  #rebuildView(): void {
    this.#view = condensedView(this.events).events;
    this.#shownEvents = 0;
    this.#shownChars = 0;
    for (const e of this.#view) this.#countShown(e);
    this.#projection = null;
  }

  #countShown(e: ConversationEvent): void {
    const size = shownSize(e);
    if (size === null) return;
    this.#shownEvents++;
    this.#shownChars += size;
  }

  /** metricsOf(events, budget). */
  metrics(budget: number | null): ConversationMetrics {
    return metricsFromTotals(this.#totals, budget);
  }

  /** metricsOf(events + the call, budget): the totals once this call is recorded. */
  metricsWith(call: LlmCallFields, budget: number | null): ConversationMetrics {
    const totals = { ...this.#totals };
    addCall(totals, call);
    return metricsFromTotals(totals, budget);
  }

  /** lastKnownCost(events). */
  get lastKnownCost(): number {
    return this.#lastKnownCost;
  }

  /** Agent model calls after the user's last message (all of them when there is none). */
  get agentCallsSinceUserMessage(): number {
    return this.#agentCallsSinceUser;
  }

  /** The id of the user's last message, 0 for none. */
  get lastUserMessageId(): number {
    return this.#lastUserMessageId;
  }

  hasAction(toolCallId: string): boolean {
    return this.#actionIds.has(toolCallId);
  }

  hasError(code: ErrorEvent['code']): boolean {
    return this.#errorCodes.has(code);
  }

  /** The latest condensation, if any (condensedView(events).condensation). */
  get condensation(): CondensationEvent | null {
    return this.#condensation;
  }

  /** Whether the condensed view is within the condenser's bounds (so planCondensation, unforced, would plan nothing). */
  withinCondenserBounds(options: CondenserOptions): boolean {
    return withinCondenserBounds(this.#shownEvents, this.#shownChars, options);
  }

  /** `head` then projectMessages(condensedView(events).events, knowledge), extended with each new event instead of projected again. */
  prompt(knowledge: readonly KnowledgeFile[], head: readonly LlmMessage[] = []): LlmMessage[] {
    if (!this.#projection || !sameKnowledge(this.#projection.knowledge, knowledge)) {
      this.#projection = new IncrementalProjection(knowledge);
      for (const e of this.#view) this.#projection.add(e);
    }
    return this.#projection.messages(head);
  }
}

/** The same knowledge files (a record read again holds equal copies). */
function sameKnowledge(a: readonly KnowledgeFile[], b: readonly KnowledgeFile[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  return a.every((file, i) => JSON.stringify(file) === JSON.stringify(b[i]));
}
