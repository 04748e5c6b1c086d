import { resultAsync } from '@acs/core/ports';
import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { AgentConversationService, ConversationServiceError } from '@acs/core';
import { V1EventTranslator, type V1Event } from '../realtime/v1-events.js';

/**
 * A conversation's log as OpenHands SDK events (the `Event` union of the 1.11 app server's
 * event routes): our events translated in the `sdk` dialect, each frame's id its event's id.
 * The log is read from its start, a page at a time, because an observation's frame needs its
 * action; only the page being read and the actions still waiting for results are held.
 */

/** The event kinds of OpenHands 1.11's event search (`kind__eq`). */
export const SDK_EVENT_KINDS = [
  'ServerErrorEvent',
  'ACPToolCallEvent',
  'Condensation',
  'CondensationRequest',
  'CondensationSummaryEvent',
  'ConversationErrorEvent',
  'ConversationStateUpdateEvent',
  'HookExecutionEvent',
  'LLMCompletionLogEvent',
  'ActionEvent',
  'MessageEvent',
  'AgentErrorEvent',
  'ObservationEvent',
  'UserRejectObservation',
  'SystemPromptEvent',
  'StreamingDeltaEvent',
  'TokenEvent',
  'InterruptEvent',
  'PauseEvent',
] as const;

export interface FrameFilter {
  kind?: string | undefined;
  /** ISO-8601 UTC bounds on the frame's timestamp: [gte, lt). */
  timestamp_gte?: string | undefined;
  timestamp_lt?: string | undefined;
}

type ScanError = ConversationServiceError<'searchEvents'>;

const PAGE = 100;

/**
 * Visits the frames of a conversation's log in order (with their event ids) until `visit`
 * returns false or the log ends.
 */
function scanFrames(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  visit: (frame: V1Event, eventId: number) => boolean,
): ResultAsync<void, ScanError> {
  return resultAsync(scanFramesOf(service, userId, conversationId, visit));
}

async function scanFramesOf(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  visit: (frame: V1Event, eventId: number) => boolean,
): Promise<Result<void, ScanError>> {
  const translator = new V1EventTranslator('sdk');
  for (let after: number | null = 0; after !== null;) {
    const page = await service.conversations.searchEvents(userId, conversationId, { after, kinds: null, limit: PAGE });
    if (page.isErr()) return err(page.error);
    for (const event of page.value.items) {
      for (const frame of translator.translate(event)) if (!visit(frame, event.id)) return ok(undefined);
    }
    after = page.value.next_after;
  }
  return ok(undefined);
}

const matches = (frame: V1Event, filter: FrameFilter) =>
  (filter.kind === undefined || frame.kind === filter.kind) &&
  (filter.timestamp_gte === undefined || frame.timestamp >= filter.timestamp_gte) &&
  (filter.timestamp_lt === undefined || frame.timestamp < filter.timestamp_lt);

export interface FramePage {
  items: V1Event[];
  /** The event id to continue from (as `page_id`); null on the last page. */
  next_page_id: string | null;
}

/**
 * One page of frames, oldest first (after the event id `pageId`) or newest first (before it).
 * Newest first keeps only the last `limit + 1` matching frames of the scan.
 */
export function framePage(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  query: { filter: FrameFilter; newestFirst: boolean; pageId: number | null; limit: number },
): ResultAsync<FramePage, ScanError> {
  const { filter, newestFirst, pageId, limit } = query;
  const kept: V1Event[] = [];
  return scanFrames(service, userId, conversationId, (frame, eventId) => {
    if (newestFirst) {
      if (pageId !== null && eventId >= pageId) return false;
      if (!matches(frame, filter)) return true;
      kept.push(frame);
      if (kept.length > limit + 1) kept.shift();
      return true;
    }
    if (pageId !== null && eventId <= pageId) return true;
    if (matches(frame, filter)) kept.push(frame);
    return kept.length <= limit;
  }).map(() => {
    const more = kept.length > limit;
    const items = newestFirst ? kept.slice(more ? 1 : 0).reverse() : kept.slice(0, limit);
    return { items, next_page_id: more ? (items.at(-1)?.id ?? null) : null };
  });
}

/** How many frames match the filter. */
export function frameCount(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  filter: FrameFilter,
): ResultAsync<number, ScanError> {
  let count = 0;
  return scanFrames(service, userId, conversationId, (frame) => {
    if (matches(frame, filter)) count++;
    return true;
  }).map(() => count);
}

/** The frames of these event ids, in the order asked; null for an id with no frame. */
export function framesById(
  service: AgentConversationService,
  userId: string,
  conversationId: string,
  ids: readonly number[],
): ResultAsync<(V1Event | null)[], ScanError> {
  const wanted = new Set(ids);
  const last = Math.max(0, ...ids);
  const found = new Map<number, V1Event>();
  return scanFrames(service, userId, conversationId, (frame, eventId) => {
    if (wanted.has(eventId) && !found.has(eventId)) found.set(eventId, frame);
    return eventId < last;
  }).map(() => ids.map((id) => found.get(id) ?? null));
}
