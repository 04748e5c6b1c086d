/**
 * One conversation: its events streamed live (and the agent's answer as it is written), what it has cost so far, the actions waiting for
 * the user (risk and reasons, accept or reject), a composer (text and images), stop and resume.
 */
import type { TargetedEvent } from 'preact';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  api,
  unwrap,
  type ActionEvent,
  type AppConversation,
  type ConversationEvent,
  type ExecutionStatus,
  type LlmCallEvent,
} from '../api.js';
import { entriesOf, entriesWithLiveText, EntryView } from '../events/event-view.js';
import { useEventStream, type EventStream } from '../events/stream.js';
import { Badge, ErrorBox, formatCost, Loading, useAction, useLoad } from '../ui.js';

/** How many entries are drawn at first; earlier ones come on request (a long log paints at once). */
const WINDOW = 150;

export function ConversationPage({ id }: { id: string }) {
  const { conversation, stream, entries, status, usage, waiting } = useConversation(id);
  const earlier = useEventWindow(entries);
  const scroller = useStickToBottom(entries.length, conversation.value, writingSize(stream));
  const lifecycle = useLifecycle(id, conversation.reload);

  const c = conversation.value;
  if (conversation.error !== undefined && !c)
    return <ErrorBox error={conversation.error} onRetry={conversation.reload} />;
  return (
    <section class="page conversation">
      <ConversationHead id={id} c={c} status={status} usage={usage} streamState={stream.state} lifecycle={lifecycle} />
      {lifecycle.error !== undefined && <ErrorBox error={lifecycle.error} />}
      <EventList stream={stream} entries={entries} earlier={earlier} scroller={scroller} />
      {waiting.length > 0 && <Confirmation id={id} actions={waiting} />}
      <Composer id={id} disabled={!c} />
    </section>
  );
}

/**
 * The conversation's record and its events, live, with what is read from them: the entries to
 * draw, the agent's latest status, the usage so far, and the actions waiting for the user.
 */
function useConversation(id: string) {
  const conversation = useLoad(
    () => unwrap(api.GET('/api/v1/app-conversations/{conversation_id}', { params: { path: { conversation_id: id } } })),
    [id],
  );
  const stream = useEventStream(id);
  const stored = useMemo(() => entriesOf(stream.events), [stream.events]);
  const entries = useMemo(() => entriesWithLiveText(stored, stream.live), [stored, stream.live]);
  const status = useMemo(() => latestStatus(stream.events), [stream.events]);
  const usage = useMemo(() => usageOf(stream.events), [stream.events]);
  const waiting = useMemo(() => waitingActions(stream.events, status), [stream.events, status]);

  // The conversation's own record (its status, its sandbox's) follows the agent's status changes.
  const { reload } = conversation;
  useEffect(() => {
    if (status) reload();
  }, [status, reload]);
  return { conversation, stream, entries, status, usage, waiting };
}

type Entries = ReturnType<typeof entriesOf>;

/** The last entries drawn (WINDOW at first), and a way to draw WINDOW more of the earlier ones. */
function useEventWindow(entries: Entries) {
  const [shown, setShown] = useState(WINDOW);
  const visible = entries.slice(Math.max(0, entries.length - shown));
  return { visible, hidden: entries.length - visible.length, showMore: () => setShown(shown + WINDOW) };
}

/** How much of the answer being written there is: the list follows it as it grows. */
const writingSize = (stream: EventStream) =>
  (stream.live.writing?.content.length ?? 0) + (stream.live.writing?.reasoning.length ?? 0);

/** Keeps the event list at its bottom while new events (or words) come in, unless the reader scrolled up. */
function useStickToBottom(entryCount: number, record: unknown, writing: number) {
  const list = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => {
    const el = list.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [entryCount, record, writing]);
  // The pane also changes size (the header grows a line, the window turns): keep the bottom in view.
  useEffect(() => {
    const el = list.current;
    if (!el) return;
    const observer = new ResizeObserver(() => {
      if (atBottom.current) el.scrollTop = el.scrollHeight;
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  const onScroll = (e: TargetedEvent<HTMLDivElement>) => {
    const el = e.currentTarget;
    atBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };
  return { list, onScroll };
}

/** Stop and resume; the record is reloaded after either. */
function useLifecycle(id: string, reload: () => void) {
  return useAction(async (what: 'stop' | 'start') => {
    await unwrap(
      what === 'stop'
        ? api.POST('/api/conversations/{conversation_id}/stop', { params: { path: { conversation_id: id } } })
        : api.POST('/api/conversations/{conversation_id}/start', {
            params: { path: { conversation_id: id } },
            body: {},
          }),
    );
    reload();
  });
}

interface HeadProps {
  id: string;
  c: AppConversation | undefined;
  status: ExecutionStatus | null;
  usage: ReturnType<typeof usageOf>;
  streamState: EventStream['state'];
  lifecycle: ReturnType<typeof useLifecycle>;
}

/** The title, the badges (conversation, agent, sandbox), the repository, the usage, the stream's state, and stop or resume. */
function ConversationHead({ id, c, status, usage, streamState, lifecycle }: HeadProps) {
  const title = c?.title || `Conversation ${id.slice(0, 8)}`;
  const running = c?.conversation_status !== 'STOPPED';
  return (
    <header class="conversation-head">
      <div>
        <h1>{title}</h1>
        <div class="meta">
          {c && <Badge value={c.conversation_status} />}
          <Badge value={status ?? c?.execution_status ?? null} label="agent" />
          {c?.sandbox_status && c.sandbox_status !== 'RUNNING' && <Badge value={c.sandbox_status} label="sandbox" />}
          {c?.selected_repository && (
            <span class="hint">
              {c.selected_repository}
              {c.selected_branch ? ` @ ${c.selected_branch}` : ''}
            </span>
          )}
          <span class="usage" data-testid="usage" title="Cost and tokens so far">
            {formatCost(usage.cost)} · {usage.promptTokens.toLocaleString()} in /{' '}
            {usage.completionTokens.toLocaleString()} out tokens
          </span>
          <span class={`stream ${streamState}`} role="status">
            {streamState === 'live'
              ? 'live'
              : streamState === 'connecting'
                ? 'connecting…'
                : streamState === 'reconnecting'
                  ? 'reconnecting…'
                  : 'disconnected'}
          </span>
        </div>
        {c?.status_detail && <p class="hint">{c.status_detail}</p>}
      </div>
      <div class="buttons">
        {c && running && (
          <button type="button" class="secondary" disabled={lifecycle.busy} onClick={() => void lifecycle.run('stop')}>
            Stop
          </button>
        )}
        {c && !running && (
          <button type="button" disabled={lifecycle.busy} onClick={() => void lifecycle.run('start')}>
            Resume
          </button>
        )}
      </div>
    </header>
  );
}

interface EventListProps {
  stream: EventStream;
  entries: Entries;
  earlier: ReturnType<typeof useEventWindow>;
  scroller: ReturnType<typeof useStickToBottom>;
}

/** The events as they come: loading, "nothing yet", "show earlier", and the entries drawn. */
function EventList({ stream, entries, earlier, scroller }: EventListProps) {
  return (
    <div
      class="events"
      ref={scroller.list}
      aria-live="polite"
      aria-busy={stream.state === 'connecting'}
      onScroll={scroller.onScroll}
    >
      {stream.state === 'connecting' && stream.events.length === 0 && <Loading what="events" />}
      {stream.state !== 'connecting' && entries.length === 0 && <p class="state empty">Nothing has happened yet.</p>}
      {earlier.hidden > 0 && (
        <button type="button" class="secondary earlier" onClick={earlier.showMore}>
          Show {Math.min(WINDOW, earlier.hidden)} earlier of {earlier.hidden}
        </button>
      )}
      {earlier.visible.map((entry) => (
        <EntryView key={entry.key} entry={entry} />
      ))}
    </div>
  );
}

function latestStatus(events: readonly ConversationEvent[]): ExecutionStatus | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.kind === 'status') return e.execution_status;
  }
  return null;
}

function usageOf(events: readonly ConversationEvent[]) {
  let cost: number | null = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  for (const e of events) {
    if (e.kind !== 'llm_call') continue;
    const call: LlmCallEvent = e;
    if (call.accumulated) {
      cost = call.accumulated.cost_usd;
      promptTokens = call.accumulated.prompt_tokens;
      completionTokens = call.accumulated.completion_tokens;
    } else {
      cost = cost === null || call.cost_usd === null ? null : cost + call.cost_usd;
      promptTokens += call.prompt_tokens;
      completionTokens += call.completion_tokens;
    }
  }
  return { cost, promptTokens, completionTokens };
}

/** The actions that wait for the user: asked for confirmation, not yet answered or run. */
function waitingActions(events: readonly ConversationEvent[], status: ExecutionStatus | null): ActionEvent[] {
  if (status !== 'waiting_for_confirmation') return [];
  const answered = new Set<string>();
  for (const e of events) {
    if (e.kind === 'observation') answered.add(e.tool_call_id);
    if (e.kind === 'confirmation') for (const id of e.tool_call_ids) answered.add(id);
  }
  return events.filter(
    (e): e is ActionEvent => e.kind === 'action' && e.requires_confirmation === true && !answered.has(e.tool_call_id),
  );
}

function Confirmation({ id, actions }: { id: string; actions: ActionEvent[] }) {
  const [reason, setReason] = useState('');
  const respond = useAction(async (accept: boolean) => {
    await unwrap(
      api.POST('/api/v1/app-conversations/{conversation_id}/respond-to-confirmation', {
        params: { path: { conversation_id: id } },
        body: { accept, reason: reason.trim() || null },
      }),
    );
    setReason('');
  });
  return (
    <aside class="confirmation-panel" aria-label="Actions waiting for you">
      <h2>{actions.length === 1 ? 'An action waits' : `${actions.length} actions wait`} for your decision</h2>
      <ul>
        {actions.map((a) => (
          <li key={a.tool_call_id}>
            <code>
              {a.tool_name === 'execute_bash'
                ? typeof a.arguments?.['command'] === 'string'
                  ? a.arguments['command']
                  : a.raw_arguments
                : `${a.tool_name} ${a.raw_arguments}`}
            </code>{' '}
            <Badge value={a.security_risk ?? 'unknown'} label="risk" />
            {a.risk_reasons && a.risk_reasons.length > 0 && (
              <ul class="reasons">
                {a.risk_reasons.map((r) => (
                  <li key={r}>{r}</li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
      <input
        aria-label="Reason (optional, shown to the agent on a rejection)"
        placeholder="Reason (optional)"
        value={reason}
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      <div class="buttons">
        <button type="button" disabled={respond.busy} onClick={() => void respond.run(true)}>
          Accept
        </button>
        <button type="button" class="danger" disabled={respond.busy} onClick={() => void respond.run(false)}>
          Reject
        </button>
      </div>
      {respond.error !== undefined && <ErrorBox error={respond.error} />}
    </aside>
  );
}

const readAsDataUrl = (file: File) =>
  new Promise<string>((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(typeof reader.result === 'string' ? reader.result : '');
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });

function Composer({ id, disabled }: { id: string; disabled: boolean }) {
  const [text, setText] = useState('');
  const [images, setImages] = useState<string[]>([]);
  const send = useAction(async () => {
    const content = [
      ...(text.trim() ? [{ type: 'text' as const, text }] : []),
      ...(images.length > 0 ? [{ type: 'image' as const, image_urls: images }] : []),
    ];
    await unwrap(
      api.POST('/api/v1/app-conversations/{conversation_id}/send-message', {
        params: { path: { conversation_id: id } },
        body: { role: 'user', content, run: true },
      }),
    );
    setText('');
    setImages([]);
  });
  const submit = () => {
    if (text.trim() || images.length > 0) void send.run();
  };
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <textarea
        aria-label="Message to the agent"
        placeholder="Message the agent (Enter sends, Shift+Enter for a new line)"
        rows={2}
        value={text}
        disabled={disabled}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            submit();
          }
        }}
      />
      <div class="composer-side">
        <label class="file button secondary">
          Image{images.length > 0 ? ` (${images.length})` : ''}
          <input
            type="file"
            accept="image/*"
            multiple
            aria-label="Attach images"
            onChange={(e) => {
              const files = [...(e.currentTarget.files ?? [])];
              e.currentTarget.value = '';
              void Promise.all(files.map(readAsDataUrl)).then((urls) => setImages((current) => [...current, ...urls]));
            }}
          />
        </label>
        <button type="submit" disabled={disabled || send.busy || (!text.trim() && images.length === 0)}>
          Send
        </button>
      </div>
      {send.error !== undefined && <ErrorBox error={send.error} />}
    </form>
  );
}
