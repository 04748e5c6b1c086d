/**
 * A conversation's events, live: one EventSource on the V1 stream, which replays the log from
 * the start and then sends each new event once. After a network drop the browser reconnects by
 * itself with Last-Event-ID, and the server resumes after it; events are also keyed by id here,
 * so none is shown twice whatever happens. Arrivals are applied once per animation frame, so
 * a replay of thousands of events or a burst of 50 a second is one render, not one each.
 */
import { useEffect, useState } from 'preact/hooks';
import { apiBase, CONVERSATION_EVENT_KINDS, type ConversationEvent } from '../api.js';

type StreamState = 'connecting' | 'live' | 'reconnecting' | 'closed';

export interface EventStream {
  events: ConversationEvent[];
  state: StreamState;
}

export function useEventStream(conversationId: string): EventStream {
  const [snapshot, setSnapshot] = useState<EventStream>({ events: [], state: 'connecting' });

  useEffect(() => {
    // This stream's own state: a newer stream (another conversation) never sees it.
    const mine = {
      events: [] as ConversationEvent[],
      lastId: 0,
      pending: [] as ConversationEvent[],
      frame: null as number | null,
    };
    setSnapshot({ events: [], state: 'connecting' });
    const source = new EventSource(
      `${apiBase}/api/v1/app-conversations/${encodeURIComponent(conversationId)}/events/stream`,
    );
    const flush = () => {
      mine.frame = null;
      if (mine.pending.length === 0) return;
      mine.events = mine.events.concat(mine.pending);
      mine.pending = [];
      const events = mine.events;
      setSnapshot((s) => ({ ...s, events }));
    };
    const onEvent = (message: Event) => {
      // `error` is both an event kind of ours and EventSource's own "connection failed" event (no data).
      if (!(message instanceof MessageEvent) || typeof message.data !== 'string') return;
      const event = JSON.parse(message.data) as ConversationEvent;
      if (event.id <= mine.lastId) return;
      mine.lastId = event.id;
      mine.pending.push(event);
      mine.frame ??= requestAnimationFrame(flush);
    };
    source.onopen = () => setSnapshot((s) => ({ ...s, state: 'live' }));
    source.onerror = (event) => {
      // An `error` event of the log (it has data) is not a lost connection: it reaches onerror too.
      if (event instanceof MessageEvent && typeof event.data === 'string') return;
      setSnapshot((s) => ({ ...s, state: source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting' }));
    };
    for (const kind of CONVERSATION_EVENT_KINDS) source.addEventListener(kind, onEvent);
    return () => {
      source.close();
      if (mine.frame !== null) cancelAnimationFrame(mine.frame);
    };
  }, [conversationId]);

  return snapshot;
}
