/**
 * One entry of a conversation's story: messages as markdown, commands with their output, exit
 * code and duration, file edits as diffs, thoughts, errors, setup steps, confirmations and
 * condensation summaries. An action and its observation (matched by tool_call_id) are one entry.
 * The answer the model is writing is an entry too, drawn as the agent's message it will become.
 */
import { memo } from 'preact/compat';
import type { ActionEvent, ConversationEvent, LlmCallEvent, ObservationEvent } from '../api.js';
import { highlight, languageOfPath, lineDiff, markdown } from '../render.js';
import { Badge, formatDuration } from '../ui.js';
import { shownWriting, type LiveText } from './live-text.js';

type MessageEvent = Extract<ConversationEvent, { kind: 'message' }>;

export type Entry =
  | {
      key: string;
      kind: 'event';
      event: Exclude<ConversationEvent, ActionEvent | ObservationEvent | LlmCallEvent>;
      /** The model's reasoning seen while this message was written (this page only). */
      reasoning?: string;
    }
  | { key: string; kind: 'tool'; action: ActionEvent; observation: ObservationEvent | null }
  | { key: string; kind: 'orphan'; observation: ObservationEvent }
  | { key: string; kind: 'writing'; content: string; reasoning: string };

/** Pairs actions with their observations; hides the per-call accounting (shown in the header). */
export function entriesOf(events: readonly ConversationEvent[]): Entry[] {
  const observations = new Map<string, ObservationEvent>();
  const actions = new Set<string>();
  for (const e of events) {
    if (e.kind === 'observation') observations.set(e.tool_call_id, e);
    if (e.kind === 'action') actions.add(e.tool_call_id);
  }
  const entries: Entry[] = [];
  for (const e of events) {
    if (e.kind === 'llm_call') continue;
    if (e.kind === 'action')
      entries.push({ key: `a${e.id}`, kind: 'tool', action: e, observation: observations.get(e.tool_call_id) ?? null });
    else if (e.kind === 'observation') {
      if (!actions.has(e.tool_call_id)) entries.push({ key: `o${e.id}`, kind: 'orphan', observation: e });
    } else entries.push({ key: `e${e.id}`, kind: 'event', event: e });
  }
  return entries;
}

/** The key of the entry of a message being written, which the stored message that replaces it takes over. */
const writingKey = (messageId: string) => `w-${messageId}`;

/**
 * The entries with the answer being written drawn last, and each stored message that replaced
 * one keeping its key (Preact updates the same element in place: nothing is drawn anew, nothing
 * jumps) and the reasoning the reader saw.
 */
export function entriesWithLiveText(entries: readonly Entry[], live: LiveText): Entry[] {
  const out =
    live.replaced.size === 0
      ? entries.slice()
      : entries.map((entry) => {
          const replaced = entry.kind === 'event' ? live.replaced.get(entry.event.id) : undefined;
          if (!replaced || entry.kind !== 'event') return entry;
          return {
            ...entry,
            key: writingKey(replaced.messageId),
            ...(replaced.reasoning ? { reasoning: replaced.reasoning } : {}),
          };
        });
  const writing = shownWriting(live);
  if (writing)
    out.push({
      key: writingKey(writing.messageId),
      kind: 'writing',
      content: writing.content,
      reasoning: writing.reasoning,
    });
  return out;
}

/** A tool argument as text (the model may send anything: a number, an object…). */
const text = (value: unknown, fallback = ''): string =>
  typeof value === 'string' ? value : value === undefined || value === null ? fallback : JSON.stringify(value);

const Markdown = ({ text, class: className }: { text: string; class?: string }) => (
  // Sanitised by DOMPurify in markdown().
  <div class={`markdown ${className ?? ''}`} dangerouslySetInnerHTML={{ __html: markdown(text) }} />
);

const Code = ({
  code,
  language,
  class: className,
}: {
  code: string;
  language?: string | undefined;
  class?: string;
}) => (
  <pre class={`code ${className ?? ''}`}>
    <code class="hljs" dangerouslySetInnerHTML={{ __html: highlight(code, language) }} />
  </pre>
);

function Images({ urls }: { urls: readonly string[] }) {
  if (urls.length === 0) return null;
  return (
    <div class="images">
      {urls.map((url) =>
        url.startsWith('data:image/') ? (
          <img key={url.slice(0, 64)} src={url} alt="attached image" />
        ) : (
          <a key={url} href={url} target="_blank" rel="noopener noreferrer">
            image
          </a>
        ),
      )}
    </div>
  );
}

/**
 * An entry is drawn again only when what it shows changed (its action got an observation):
 * markdown and highlighting are the costly part, and a live conversation re-renders often.
 */
export const EntryView = memo(EntryViewOf, (a, b) => sameEntry(a.entry, b.entry));

function sameEntry(a: Entry, b: Entry): boolean {
  if (a.kind === 'tool' && b.kind === 'tool') return a.action === b.action && a.observation === b.observation;
  if (a.kind === 'event' && b.kind === 'event') return a.event === b.event && a.reasoning === b.reasoning;
  if (a.kind === 'writing' && b.kind === 'writing') return a.content === b.content && a.reasoning === b.reasoning;
  if (a.kind === 'orphan' && b.kind === 'orphan') return a.observation === b.observation;
  return false;
}

function EntryViewOf({ entry }: { entry: Entry }) {
  if (entry.kind === 'tool') return <ToolView action={entry.action} observation={entry.observation} />;
  if (entry.kind === 'orphan') return <Output observation={entry.observation} />;
  if (entry.kind === 'writing') return <Message event={null} text={entry.content} reasoning={entry.reasoning} />;
  const e = entry.event;
  switch (e.kind) {
    case 'message':
      return <Message event={e} text={e.text} reasoning={entry.reasoning} />;
    case 'status':
      return (
        <div class="event status" data-event-id={e.id}>
          Agent <Badge value={e.execution_status} />
          {e.reason && <span class="hint"> {e.reason}</span>}
        </div>
      );
    case 'error':
      return (
        <div class={`event error ${e.fatal ? 'fatal' : 'warning'}`} data-event-id={e.id} role="alert">
          <strong>
            {e.fatal ? 'Stopped' : 'Warning'}: {e.code.replaceAll('_', ' ')}
          </strong>
          <p>{e.message}</p>
        </div>
      );
    case 'setup':
      return (
        <details class="event setup" data-event-id={e.id}>
          <summary>
            {e.step === 'repository' ? 'Repository' : 'Setup script'}: {e.summary}{' '}
            <span class="hint">({formatDuration(e.duration_ms)})</span>
            {e.exit_code !== null && e.exit_code !== 0 && <Badge value="error" label={`exit ${e.exit_code}`} />}
          </summary>
          {e.output && <Code code={e.output} />}
        </details>
      );
    case 'confirmation':
      return (
        <div class="event confirmation" data-event-id={e.id}>
          You {e.accept ? 'accepted' : 'rejected'}{' '}
          {e.tool_call_ids.length === 1 ? 'the waiting action' : `${e.tool_call_ids.length} waiting actions`}
          {e.reason ? `: ${e.reason}` : '.'}
        </div>
      );
    case 'condensation':
      return (
        <details class="event condensation" data-event-id={e.id}>
          <summary>
            {e.forgotten_events} older events were summarised for the model <span class="hint">({e.reason})</span>
          </summary>
          <Markdown text={e.summary} />
        </details>
      );
    default:
      // A new kind: draw it here (entriesOf decides which kinds are entries of their own).
      return e satisfies never;
  }
}

/**
 * A message; also the agent's answer while it is written, in the same element with the same
 * look, so the stored message that replaces it changes only its header's "writing…" marker.
 * `aria-busy` while writing: a screen reader announces the answer once, whole.
 */
function Message({
  event,
  text,
  reasoning,
}: {
  event: MessageEvent | null;
  text: string;
  reasoning?: string | undefined;
}) {
  const source = event?.source ?? 'agent';
  return (
    <article
      class={`event message ${source}`}
      data-event-id={event?.id}
      aria-label={`${source} message`}
      aria-busy={event ? undefined : 'true'}
    >
      <header>
        {source === 'user' ? 'You' : source === 'agent' ? 'Agent' : 'Service note'}
        {!event && <span class="writing">writing…</span>}
      </header>
      {reasoning && (
        <details class="reasoning">
          <summary>Reasoning</summary>
          <div class="reasoning-text">{reasoning}</div>
        </details>
      )}
      <Markdown text={text} />
      {event && <Images urls={event.image_urls} />}
    </article>
  );
}

function ToolView({ action, observation }: { action: ActionEvent; observation: ObservationEvent | null }) {
  const args = action.arguments ?? {};
  const duration = observation ? Date.parse(observation.timestamp) - Date.parse(action.timestamp) : null;
  const risk = action.security_risk ? <Badge value={action.security_risk} label="risk" /> : null;
  const thought = action.thought ? <Markdown text={action.thought} class="thought" /> : null;

  if (action.tool_name === 'think') {
    return (
      <article class="event think" data-event-id={action.id}>
        <header>Thinking</header>
        <Markdown text={text(args['thought'], action.raw_arguments)} />
      </article>
    );
  }
  if (action.tool_name === 'finish') {
    return (
      <article class="event message agent finish" data-event-id={action.id}>
        <header>Agent · finished</header>
        <Markdown text={text(args['message'])} />
      </article>
    );
  }
  if (action.tool_name === 'execute_bash') {
    return (
      <article class="event command" data-event-id={action.id}>
        {thought}
        <header>
          <span class="tool">Command</span> {risk}
          {observation && observation.exit_code !== null && (
            <Badge value={observation.exit_code === 0 ? 'finished' : 'error'} label={`exit ${observation.exit_code}`} />
          )}
          {duration !== null && <span class="hint duration">{formatDuration(Math.max(0, duration))}</span>}
          {!observation && <span class="hint running">running…</span>}
        </header>
        <Code code={text(args['command'], action.raw_arguments)} language="bash" class="command-line" />
        {observation && <Output observation={observation} />}
      </article>
    );
  }
  if (action.tool_name === 'str_replace_editor') {
    const path = text(args['path']);
    const command = text(args['command']);
    const language = languageOfPath(path);
    return (
      <article class="event edit" data-event-id={action.id}>
        {thought}
        <header>
          <span class="tool">{command === 'view' ? 'Read' : command === 'create' ? 'Create' : 'Edit'}</span>{' '}
          <code>{path}</code> {risk}
          {observation?.is_error && <Badge value="error" />}
        </header>
        {command === 'str_replace' && (
          <Diff before={text(args['old_str'])} after={text(args['new_str'])} language={language} />
        )}
        {command === 'insert' && <Diff before="" after={text(args['new_str'])} language={language} />}
        {command === 'create' && <Diff before="" after={text(args['file_text'])} language={language} />}
        {observation && (command === 'view' || observation.is_error) && (
          <Output observation={observation} collapsed={command === 'view'} />
        )}
      </article>
    );
  }
  return (
    <article class="event tool-call" data-event-id={action.id}>
      {thought}
      <header>
        <span class="tool">{action.tool_name}</span> {risk}
        {duration !== null && <span class="hint duration">{formatDuration(Math.max(0, duration))}</span>}
      </header>
      <Code code={JSON.stringify(args, null, 2)} language="json" />
      {observation && <Output observation={observation} collapsed />}
    </article>
  );
}

function Output({ observation, collapsed = false }: { observation: ObservationEvent; collapsed?: boolean }) {
  const text = observation.content;
  const body = <Code code={text || '(no output)'} class={`output ${observation.is_error ? 'failed' : ''}`} />;
  if (!collapsed && text.length < 4_000) return body;
  return (
    <details class="output-details">
      <summary>Output ({text.length.toLocaleString()} characters)</summary>
      {body}
    </details>
  );
}

function Diff({ before, after, language }: { before: string; after: string; language: string | undefined }) {
  const lines = lineDiff(before, after);
  return (
    <div class="diff" role="table" aria-label="changes">
      {lines.map((line, i) =>
        line.kind === 'gap' ? (
          <div key={i} class="diff-line gap" role="row">
            ⋯ {line.count} unchanged line{line.count === 1 ? '' : 's'}
          </div>
        ) : (
          <div key={i} class={`diff-line ${line.kind}`} role="row">
            <span class="sign" aria-hidden="true">
              {line.kind === 'added' ? '+' : line.kind === 'removed' ? '−' : ' '}
            </span>
            <code dangerouslySetInnerHTML={{ __html: highlight(line.text, language) || ' ' }} />
          </div>
        ),
      )}
    </div>
  );
}
