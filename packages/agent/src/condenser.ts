import type { CondensationEvent, ConversationEvent, MessageEvent } from '@acs/core/schemas';
import type { LlmMessage } from '@acs/core/ports';

/**
 * The default condenser. When what the model would be shown grows past a bound, the events
 * between the start of the conversation (kept as it is) and a recent window (kept as it is)
 * are summarised by the model into a `condensation` event; the prompt then shows the head,
 * the summary and the window. Cuts fall only where no tool call is separated from its result.
 * The log keeps every event: condensing changes what the model sees, never the history.
 */
export interface CondenserOptions {
  /** Events shown to the model (messages, calls and results) beyond which older ones are summarised. Default 120; the user's `condenser_max_size` overrides it. */
  maxEvents?: number;
  /** Characters of events shown to the model beyond which older ones are summarised. Default 400,000 (about 100k tokens). */
  maxPromptChars?: number;
  /** Events at the start of the conversation always shown as they are (the task). Default 4. */
  keepFirst?: number;
  /** Characters of one event in the text given to the summariser (head and tail kept). Default 4,000. */
  maxEventChars?: number;
}

export const DEFAULT_CONDENSER_MAX_EVENTS = 120;
const DEFAULT_CONDENSER_MAX_PROMPT_CHARS = 400_000;
const DEFAULT_CONDENSER_KEEP_FIRST = 4;
const DEFAULT_MAX_EVENT_CHARS = 4_000;

type Shown = Extract<ConversationEvent, { kind: 'message' | 'action' | 'observation' }>;

const isShown = (e: ConversationEvent): e is Shown =>
  e.kind === 'message' || e.kind === 'action' || e.kind === 'observation';

/** What the condenser's bounds count of one event of the view: 1 and its size if the model is shown it, else nothing. */
export const shownSize = (e: ConversationEvent): number | null => (isShown(e) ? sizeOf(e) : null);

/**
 * Whether a view of `shownEvents` events the model is shown, of `shownChars` characters, is
 * within the condenser's bounds: planCondensation (unforced) plans nothing then. Lets a caller
 * that keeps these counts skip the planning (which reads the whole log) on most steps.
 */
export function withinCondenserBounds(
  shownEvents: number,
  shownChars: number,
  options: CondenserOptions = {},
): boolean {
  return (
    shownEvents <= (options.maxEvents ?? DEFAULT_CONDENSER_MAX_EVENTS) &&
    shownChars <= (options.maxPromptChars ?? DEFAULT_CONDENSER_MAX_PROMPT_CHARS)
  );
}

/** The text size of an event as the model would see it (roughly; for the bound only). */
const sizeOf = (e: Shown): number =>
  e.kind === 'message'
    ? e.text.length + e.image_urls.length * 1_000
    : e.kind === 'action'
      ? e.raw_arguments.length + (e.thought?.length ?? 0) + e.tool_name.length
      : e.content.length;

/**
 * Positions i (0..n) in the shown events where a cut between shown[i-1] and shown[i] separates
 * no tool call from its result: every call before i has its result before i.
 */
function safeCuts(shown: readonly Shown[]): boolean[] {
  const results = new Set(shown.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
  const open = new Set<string>();
  const cuts: boolean[] = [true];
  for (const e of shown) {
    // A call whose result is not in the log (still running) does not block cuts after it.
    if (e.kind === 'action' && results.has(e.tool_call_id)) open.add(e.tool_call_id);
    if (e.kind === 'observation') open.delete(e.tool_call_id);
    cuts.push(open.size === 0);
  }
  return cuts;
}

export interface ConversationView {
  /** The events shown as they are, oldest first, with the summary (if any) in its place as an environment message. */
  events: ConversationEvent[];
  /** The latest condensation, if any. */
  condensation: CondensationEvent | null;
}

/** What the model is shown: the whole log, or after a condensation the head, its summary and what came after. */
export function condensedView(events: readonly ConversationEvent[]): ConversationView {
  let latest: CondensationEvent | null = null;
  for (let i = events.length - 1; i >= 0 && !latest; i--) {
    const e = events[i]!;
    if (e.kind === 'condensation') latest = e;
  }
  if (!latest) return { events: [...events], condensation: null };
  const c = latest;
  const summary: MessageEvent = {
    kind: 'message',
    source: 'environment',
    id: c.id,
    timestamp: c.timestamp,
    text: summaryMessage(c.summary, c.forgotten_events),
    image_urls: [],
  };
  const head = events.filter((e) => e.id <= c.kept_head_through);
  const rest = events.filter((e) => e.id > c.forgotten_through && e.kind !== 'condensation');
  return { events: [...head, summary, ...rest], condensation: c };
}

const summaryMessage = (summary: string, forgotten: number): string =>
  `<CONVERSATION_SUMMARY>\n${forgotten} earlier events of this conversation were condensed into this summary (written for you by a summariser):\n${summary.trim()}\n</CONVERSATION_SUMMARY>`;

export interface CondensationPlan {
  /** Shown events up to this id stay as they are. */
  keptHeadThrough: number;
  /** Shown events after the head up to this id go into the summary. */
  forgottenThrough: number;
  /** The events to summarise now (those not already in the previous summary). */
  toSummarise: Shown[];
  /** The previous summary, which the new one replaces and must carry forward. */
  previousSummary: string | null;
  /** How many shown events the new summary stands for (the previous summary's included). */
  forgottenCount: number;
  reason: string;
}

/**
 * Whether the view is past a bound and, if so, what to summarise; null when it is within
 * bounds (or nothing can be cut). `force` (the model said its context was too long) condenses
 * whatever the bounds say and keeps a smaller window.
 */
export function planCondensation(
  events: readonly ConversationEvent[],
  options: CondenserOptions = {},
  force = false,
): CondensationPlan | null {
  const maxEvents = options.maxEvents ?? DEFAULT_CONDENSER_MAX_EVENTS;
  const maxChars = options.maxPromptChars ?? DEFAULT_CONDENSER_MAX_PROMPT_CHARS;
  const keepFirst = options.keepFirst ?? DEFAULT_CONDENSER_KEEP_FIRST;

  const view = condensedView(events);
  const shownInView = view.events.filter(isShown);
  const viewChars = shownInView.reduce((n, e) => n + sizeOf(e), 0);
  const tooMany = shownInView.length > maxEvents;
  const tooLong = viewChars > maxChars;
  if (!force && !tooMany && !tooLong) return null;

  const shown = events.filter(isShown);
  const cuts = safeCuts(shown);
  let head = Math.min(keepFirst, shown.length);
  while (head < shown.length && !cuts[head]) head++;

  // The recent window: half the bounds (a quarter when forced), so condensing is not needed again at once.
  const windowEvents = Math.max(1, Math.floor(maxEvents / (force ? 4 : 2)));
  const windowChars = Math.floor(maxChars / (force ? 4 : 2));
  let tail = shown.length - windowEvents;
  let chars = 0;
  for (let i = shown.length - 1; i >= Math.max(head, tail); i--) {
    chars += sizeOf(shown[i]!);
    if (chars > windowChars) {
      tail = i + 1;
      break;
    }
  }
  // Forward to the next safe cut: the window only shrinks, so the view stays within the bound…
  tail = Math.max(tail, head);
  while (tail < shown.length && !cuts[tail]) tail++;
  // …but never past the user's last message: the agent must still read what it is answering.
  const lastUser = shown.findLastIndex((e) => e.kind === 'message' && e.source === 'user');
  if (lastUser >= head && tail > lastUser) {
    tail = lastUser;
    while (tail > head && !cuts[tail]) tail--;
  }
  const keptHeadThrough = head > 0 ? shown[head - 1]!.id : 0;
  const previous = view.condensation;
  const alreadyForgotten = previous ? previous.forgotten_through : keptHeadThrough;
  const forgottenThrough = tail > head ? shown[tail - 1]!.id : 0;
  if (forgottenThrough <= alreadyForgotten) return null; // nothing new to forget
  const toSummarise = shown.slice(head, tail).filter((e) => e.id > alreadyForgotten);
  const reason = force
    ? 'the model said the prompt was too long'
    : tooMany
      ? `${shownInView.length} events shown, more than ${maxEvents}`
      : `${viewChars} characters shown, more than ${maxChars}`;
  return {
    keptHeadThrough,
    forgottenThrough,
    toSummarise,
    previousSummary: previous?.summary ?? null,
    forgottenCount: tail - head,
    reason,
  };
}

const clip = (text: string, max: number): string =>
  text.length <= max
    ? text
    : `${text.slice(0, Math.floor(max * 0.4))}\n[… ${text.length - max} characters left out …]\n${text.slice(text.length - Math.ceil(max * 0.6))}`;

function describe(e: Shown, maxChars: number): string {
  switch (e.kind) {
    case 'message':
      return `[${e.source === 'agent' ? 'agent' : e.source === 'user' ? 'user' : 'note'} #${e.id}] ${clip(e.text, maxChars)}${e.image_urls.length ? ` (+${e.image_urls.length} image(s))` : ''}`;
    case 'action':
      return `[agent called ${e.tool_name} #${e.id}]${e.thought ? ` (thinking: ${clip(e.thought, maxChars / 4)})` : ''} ${clip(e.raw_arguments, maxChars)}`;
    case 'observation':
      return `[result of ${e.tool_name} #${e.id}${e.is_error ? ', error' : ''}${e.exit_code !== null ? `, exit ${e.exit_code}` : ''}] ${clip(e.content, maxChars)}`;
  }
}

/** The request to the summariser: its instructions, the previous summary and the events to fold in. */
export function summaryRequest(plan: CondensationPlan, options: CondenserOptions = {}): LlmMessage[] {
  const maxEventChars = options.maxEventChars ?? DEFAULT_MAX_EVENT_CHARS;
  const instructions = [
    'You keep the memory of a software engineering agent that works in a sandbox on a user’s task. Older parts of its conversation are being removed from its view; write the summary that will stand in for them.',
    'Keep what the agent needs to go on without repeating work. Use these sections, leaving out those with nothing to say:',
    'USER_CONTEXT: what the user asked for and every requirement or preference they stated (quote exact values: names, versions, paths).',
    'COMPLETED: what was done, with file paths and the commands that worked.',
    'PENDING: what remains to do.',
    'CODE_STATE: files changed or created and what is in them now; function and class names.',
    'TESTS: which tests exist, how to run them, what passed and what failed.',
    'CURRENT_STATE: where the work stands, open processes, the current directory, errors not yet solved.',
    'Be factual and compact; do not invent anything that is not in the events. Write the summary only.',
  ].join('\n');
  const body = [
    plan.previousSummary ? `<PREVIOUS_SUMMARY>\n${plan.previousSummary}\n</PREVIOUS_SUMMARY>` : null,
    `<EVENTS>\n${plan.toSummarise.map((e) => describe(e, maxEventChars)).join('\n')}\n</EVENTS>`,
    plan.previousSummary
      ? 'Write one summary covering the previous summary and these events.'
      : 'Write the summary of these events.',
  ]
    .filter((part): part is string => part !== null)
    .join('\n\n');
  return [
    { role: 'system', content: instructions },
    { role: 'user', content: body },
  ];
}
