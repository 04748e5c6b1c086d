/** Conversations: a searchable, paged list, and the form that starts a new one. */
import { useEffect, useState } from 'preact/hooks';
import { api, unwrap, type AppConversation } from '../api.js';
import { href, navigate } from '../router.js';
import { Badge, Empty, ErrorBox, formatAge, formatCost, Loading, useAction, useLoad } from '../ui.js';

const PAGE_SIZE = 20;

export function ConversationsPage({ query }: { query: URLSearchParams }) {
  const search = query.get('q') ?? '';
  const pageId = query.get('page') ?? undefined;
  const list = useConversationList(search, pageId);

  return (
    <section class="page conversations">
      <div class="page-head">
        <h1>Conversations</h1>
        <a class="button" href={href('/new')}>
          New conversation
        </a>
      </div>
      <SearchForm search={search} />
      {list.error !== undefined && <ErrorBox error={list.error} onRetry={list.reload} />}
      {!list.value && !list.error && <Loading what="conversations" />}
      {list.value && list.value.items.length === 0 && <NoConversations search={search} />}
      {list.value && list.value.items.length > 0 && (
        <>
          <ConversationTable items={list.value.items} />
          <Pager search={search} pageId={pageId} nextPageId={list.value.next_page_id} />
        </>
      )}
    </section>
  );
}

/** One page of the user's conversations, those with `search` in their title when it is given. */
function useConversationList(search: string, pageId: string | undefined) {
  return useLoad(
    () =>
      unwrap(
        api.GET('/api/v1/app-conversations/search', {
          params: {
            query: {
              limit: PAGE_SIZE,
              ...(search ? { title__contains: search } : {}),
              ...(pageId ? { page_id: pageId } : {}),
            },
          },
        }),
      ),
    [search, pageId],
  );
}

/** Goes to the list for a search and a page (the address is the list's state). */
const goTo = (q: string, page?: string | null) =>
  navigate(
    `/?${new URLSearchParams({ ...(q ? { q } : {}), ...(page ? { page } : {}) }).toString()}`.replace(/\?$/, ''),
  );

/** The title search: what is typed follows the address, and a search goes to its first page. */
function SearchForm({ search }: { search: string }) {
  const [typed, setTyped] = useState(search);
  useEffect(() => setTyped(search), [search]);
  return (
    <form
      class="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        goTo(typed.trim());
      }}
    >
      <input
        type="search"
        aria-label="Search titles"
        placeholder="Search titles"
        value={typed}
        onInput={(e) => setTyped(e.currentTarget.value)}
      />
      <button type="submit" class="secondary">
        Search
      </button>
    </form>
  );
}

function NoConversations({ search }: { search: string }) {
  return (
    <Empty>
      {search ? (
        <>No conversation has “{search}” in its title.</>
      ) : (
        <>
          No conversations yet. <a href={href('/new')}>Start one</a>.
        </>
      )}
    </Empty>
  );
}

function ConversationTable({ items }: { items: AppConversation[] }) {
  return (
    <table class="list">
      <thead>
        <tr>
          <th>Title</th>
          <th>Status</th>
          <th>Agent</th>
          <th class="wide">Repository</th>
          <th class="num">Cost</th>
          <th>Updated</th>
        </tr>
      </thead>
      <tbody>
        {items.map((c) => (
          <ConversationRow key={c.id} c={c} />
        ))}
      </tbody>
    </table>
  );
}

function ConversationRow({ c }: { c: AppConversation }) {
  return (
    <tr>
      <td data-label="Title">
        <a href={href(`/conversations/${c.id}`)}>{c.title || c.id}</a>
      </td>
      <td data-label="Status">
        <Badge value={c.conversation_status} />
      </td>
      <td data-label="Agent">
        <Badge value={c.execution_status} />
      </td>
      <td data-label="Repository" class="wide">
        {c.selected_repository ? `${c.selected_repository}${c.selected_branch ? ` @ ${c.selected_branch}` : ''}` : '—'}
      </td>
      <td data-label="Cost" class="num">
        {formatCost(c.metrics?.accumulated_cost_known ? c.metrics.accumulated_cost : null)}
      </td>
      <td data-label="Updated" title={c.updated_at}>
        {formatAge(c.updated_at)}
      </td>
    </tr>
  );
}

function Pager({
  search,
  pageId,
  nextPageId,
}: {
  search: string;
  pageId: string | undefined;
  nextPageId: string | null | undefined;
}) {
  return (
    <nav class="pager" aria-label="Pages">
      {pageId && (
        <button type="button" class="secondary" onClick={() => goTo(search)}>
          First page
        </button>
      )}
      {nextPageId && (
        <button type="button" class="secondary" onClick={() => goTo(search, nextPageId)}>
          Next page
        </button>
      )}
    </nav>
  );
}

export function NewConversationPage() {
  const [form, setForm] = useState({ message: '', repository: '', branch: '', instructions: '' });
  const start = useAction(async () => {
    const created = await unwrap(
      api.POST('/api/conversations', {
        body: {
          initial_user_msg: form.message,
          ...(form.repository.trim() ? { repository: form.repository.trim() } : {}),
          ...(form.branch.trim() ? { selected_branch: form.branch.trim() } : {}),
          ...(form.instructions.trim() ? { conversation_instructions: form.instructions } : {}),
        },
      }),
    );
    navigate(`/conversations/${created.conversation_id}`);
  });
  return (
    <section class="page new-conversation">
      <h1>New conversation</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void start.run();
        }}
      >
        <label>
          What should the agent do?
          <textarea
            name="message"
            rows={6}
            required
            value={form.message}
            placeholder="Fix the failing test in src/parser.ts"
            onInput={(e) => setForm({ ...form, message: e.currentTarget.value })}
          />
        </label>
        <div class="row">
          <label>
            Repository <span class="hint">(optional)</span>
            <input
              name="repository"
              placeholder="owner/name"
              value={form.repository}
              onInput={(e) => setForm({ ...form, repository: e.currentTarget.value })}
            />
          </label>
          <label>
            Branch <span class="hint">(optional)</span>
            <input
              name="branch"
              placeholder="main"
              value={form.branch}
              onInput={(e) => setForm({ ...form, branch: e.currentTarget.value })}
            />
          </label>
        </div>
        <label>
          Instructions <span class="hint">(optional: how to work, shown to the agent with the task)</span>
          <textarea
            name="instructions"
            rows={3}
            value={form.instructions}
            onInput={(e) => setForm({ ...form, instructions: e.currentTarget.value })}
          />
        </label>
        <div class="actions">
          <button type="submit" disabled={start.busy}>
            {start.busy ? 'Starting…' : 'Start'}
          </button>
        </div>
        {start.error !== undefined && <ErrorBox error={start.error} />}
      </form>
    </section>
  );
}
