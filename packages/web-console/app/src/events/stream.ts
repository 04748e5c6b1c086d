/**
 * A conversation's events, live: one EventSource on the V1 stream, which replays the log from
 * the start and then sends each new event once. After a network drop the browser reconnects by
 * itself with Last-Event-ID, and the server resumes after it; events are also keyed by id here,
 * so none is shown twice whatever happens. Arrivals are applied once per animation frame, so
 * a replay of thousands of events or a burst of 50 a second is one render, not one each.
 *
 * Between stored events come the pieces of the answer the model is writing (`delta` messages,
 * without an id: never stored, never replayed); they join into the text shown until the stored
 * event with the whole answer replaces it (live-text.ts), in the same frame-paced renders.
 */
import { useEffect, useState } from 'preact/hooks';
import { apiBase, CONVERSATION_EVENT_KINDS, type ConversationEvent } from '../api.js';
import { NO_LIVE_TEXT, parseDelta, withDelta, withoutWriting, withStoredEvent, type LiveText } from './live-text.js';

type StreamState = 'connecting' | 'live' | 'reconnecting' | 'closed';

export interface EventStream {
  events: ConversationEvent[];
  state: StreamState;
  /** The answer being written, and what the stored answers that replaced one keep of it. */
  live: LiveText;
}

export function useEventStream(conversationId: string): EventStream {
  const [snapshot, setSnapshot] = useState<EventStream>({ events: [], state: 'connecting', live: NO_LIVE_TEXT });

  useEffect(() => {
    // This stream's own state: a newer stream (another conversation) never sees it.
    const mine = {
      events: [] as ConversationEvent[],
      lastId: 0,
      pending: [] as ConversationEvent[],
      live: NO_LIVE_TEXT,
      shownLive: NO_LIVE_TEXT,
      frame: null as number | null,
    };
    setSnapshot({ events: [], state: 'connecting', live: NO_LIVE_TEXT });
    const source = new EventSource(
      `${apiBase}/api/v1/app-conversations/${encodeURIComponent(conversationId)}/events/stream`,
    );
    const flush = () => {
      mine.frame = null;
      if (mine.pending.length === 0 && mine.live === mine.shownLive) return;
      if (mine.pending.length > 0) mine.events = mine.events.concat(mine.pending);
      mine.pending = [];
      mine.shownLive = mine.live;
      const { events, live } = mine;
      setSnapshot((s) => ({ ...s, events, live }));
    };
    const schedule = () => {
      mine.frame ??= requestAnimationFrame(flush);
    };
    const onEvent = (message: Event) => {
      // `error` is both an event kind of ours and EventSource's own "connection failed" event (no data).
      if (!(message instanceof MessageEvent) || typeof message.data !== 'string') return;
      const event = JSON.parse(message.data) as ConversationEvent;
      if (event.id <= mine.lastId) return;
      mine.lastId = event.id;
      mine.pending.push(event);
      mine.live = withStoredEvent(mine.live, event);
      schedule();
    };
    const onDelta = (message: MessageEvent<unknown>) => {
      const delta = typeof message.data === 'string' ? parseDelta(message.data) : null;
      if (!delta) return;
      mine.live = withDelta(mine.live, delta, mine.lastId);
      schedule();
    };
    // A lost connection (or a new one) drops the text being written: the server does not replay pieces.
    const dropWriting = () => {
      mine.live = withoutWriting(mine.live);
      schedule();
    };
    source.onopen = () => {
      dropWriting();
      setSnapshot((s) => ({ ...s, state: 'live' }));
    };
    source.onerror = (event) => {
      // An `error` event of the log (it has data) is not a lost connection: it reaches onerror too.
      if (event instanceof MessageEvent && typeof event.data === 'string') return;
      dropWriting();
      setSnapshot((s) => ({ ...s, state: source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting' }));
    };
    for (const kind of CONVERSATION_EVENT_KINDS) source.addEventListener(kind, onEvent);
    source.addEventListener('delta', onDelta);
    return () => {
      source.close();
      if (mine.frame !== null) cancelAnimationFrame(mine.frame);
    };
  }, [conversationId]);

  return snapshot;
}
