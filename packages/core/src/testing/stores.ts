import { err, ok, type ResultAsync } from 'neverthrow';
import { describe, expect, it } from 'vitest';
import type { ConversationRecord, StartTaskRecord } from '../conversation/schema.js';
import type { ConversationFilter, ConversationStore, StartTaskStore } from '../conversation/store.js';
import type { Page, PageRequest } from '../pagination.js';
import { decodeCursor } from '../pagination.js';
import { POOLED_SANDBOX_OWNER, type SandboxRecord } from '../sandbox/schema.js';
import type { SandboxSpecCatalog, SandboxStore } from '../sandbox/store.js';
import type { SettingsStore } from '../settings/store.js';
import { at, conversationFixture, sandboxFixture, settingsFixture, startTaskFixture } from './fixtures.js';

/** Makes a fresh, empty store for each test. */
export type StoreFactory<S> = () => S | Promise<S>;

/** Unwraps a ResultAsync in a test, failing loudly on Err. */
export async function expectOk<T>(result: ResultAsync<T, unknown>): Promise<T> {
  const settled = await result;
  if (settled.isErr()) throw new Error(`expected Ok, got Err: ${JSON.stringify(settled.error)}`);
  return settled.value;
}

/** Walks every page of a listing. */
export async function collectPages<T>(
  list: (page: PageRequest) => ResultAsync<Page<T>, unknown>,
  limit: number,
): Promise<T[]> {
  const all: T[] = [];
  let after: PageRequest['after'] = null;
  for (let guard = 0; guard < 10_000; guard++) {
    const page: Page<T> = await expectOk(list({ limit, after }));
    expect(page.items.length).toBeLessThanOrEqual(limit);
    all.push(...page.items);
    if (page.next_page_id === null) return all;
    after = decodeCursor(page.next_page_id);
    expect(after).not.toBeNull();
  }
  throw new Error('pagination did not end');
}

/** Contract every SettingsStore must meet. */
export function describeSettingsStoreContract(name: string, make: StoreFactory<SettingsStore>): void {
  describe(`SettingsStore contract: ${name}`, () => {
    it('returns null for a user that stored nothing', async () => {
      const store = await make();
      expect(await expectOk(store.get('nobody'))).toBeNull();
    });

    it('creates on first update and reads back exactly what was written, secrets included', async () => {
      const store = await make();
      const written = settingsFixture();
      const seen: unknown[] = [];
      const result = await expectOk(
        store.update('alice', (current) => {
          seen.push(current);
          return written;
        }),
      );
      expect(seen).toEqual([null]);
      expect(result).toEqual(written);
      expect(await expectOk(store.get('alice'))).toEqual(written);
    });

    it('passes the current value to the next update', async () => {
      const store = await make();
      await expectOk(store.update('alice', () => settingsFixture({ language: 'en' })));
      await expectOk(store.update('alice', (current) => ({ ...current!, agent: `${current!.language}-agent` })));
      expect((await expectOk(store.get('alice')))?.agent).toBe('en-agent');
    });

    it('keeps users apart', async () => {
      const store = await make();
      await expectOk(store.update('alice', () => settingsFixture({ language: 'fr' })));
      expect(await expectOk(store.get('bob'))).toBeNull();
      await expectOk(store.update('bob', () => settingsFixture({ language: 'de' })));
      expect((await expectOk(store.get('alice')))?.language).toBe('fr');
    });

    it('applies concurrent updates of one user one after the other (none lost)', async () => {
      const store = await make();
      await expectOk(store.update('alice', () => settingsFixture({ max_iterations: 0 })));
      await Promise.all(
        Array.from({ length: 25 }, () =>
          expectOk(store.update('alice', (c) => ({ ...c!, max_iterations: (c!.max_iterations ?? 0) + 1 }))),
        ),
      );
      expect((await expectOk(store.get('alice')))?.max_iterations).toBe(25);
    });

    it('lands concurrent updates of different users', async () => {
      const store = await make();
      const users = Array.from({ length: 20 }, (_, i) => `user-${i}`);
      await Promise.all(
        users.map((u) => expectOk(store.update(u, () => settingsFixture({ email: `${u}@example.com` })))),
      );
      for (const u of users) expect((await expectOk(store.get(u)))?.email).toBe(`${u}@example.com`);
    });

    it('keeps LLM profiles in order with their keys, and the active one, across changes', async () => {
      const store = await make();
      await expectOk(store.update('alice', () => settingsFixture()));
      const renamed = await expectOk(
        store.update('alice', (current) => ({
          ...current!,
          llm_profiles: {
            profiles: current!.llm_profiles.profiles.map((p) =>
              p.name === 'fast' ? { ...p, name: 'quick', api_key: 'sk-rotated' } : p,
            ),
            active: 'quick',
          },
        })),
      );
      const read = await expectOk(store.get('alice'));
      expect(read).toEqual(renamed);
      expect(read?.llm_profiles).toEqual({
        profiles: [
          { id: 'profile-fast', name: 'quick', model: 'openai/gpt-4o-mini', base_url: null, api_key: 'sk-rotated' },
          {
            id: 'profile-local',
            name: 'local',
            model: 'ollama/qwen',
            base_url: 'http://127.0.0.1:11434/v1',
            api_key: null,
          },
        ],
        active: 'quick',
      });
    });

    it('hands out copies: changing a returned object does not change the store', async () => {
      const store = await make();
      const returned = await expectOk(store.update('alice', () => settingsFixture()));
      returned.secrets_store.custom_secrets['INJECTED'] = { secret: 'x', description: null };
      returned.llm_model = 'changed';
      const fresh = await expectOk(store.get('alice'));
      expect(fresh?.llm_model).toBe('openai/gpt-4o');
      expect(fresh?.secrets_store.custom_secrets['INJECTED']).toBeUndefined();
    });
  });
}

/** Contract every ConversationStore must meet. */
export function describeConversationStoreContract(name: string, make: StoreFactory<ConversationStore>): void {
  describe(`ConversationStore contract: ${name}`, () => {
    it('inserts and reads back a record unchanged', async () => {
      const store = await make();
      const record = conversationFixture({
        selected_repository: 'acme/app',
        pr_number: [1, 2],
        git_provider: 'github',
      });
      expect(await expectOk(store.insert(record))).toBe('inserted');
      expect(await expectOk(store.get('alice', record.id))).toEqual(record);
    });

    it('keeps the generation of a conversation’s key through an update', async () => {
      const store = await make();
      const record = conversationFixture();
      await expectOk(store.insert(record));
      await expectOk(store.update('alice', record.id, (c) => ok({ ...c, key_generation: 3 })));
      expect((await expectOk(store.get('alice', record.id)))?.key_generation).toBe(3);
    });

    it('refuses a second record with the same id for the same user, keeping the first', async () => {
      const store = await make();
      const record = conversationFixture({ title: 'first' });
      await expectOk(store.insert(record));
      expect(await expectOk(store.insert({ ...record, title: 'second' }))).toBe('exists');
      expect((await expectOk(store.get('alice', record.id)))?.title).toBe('first');
    });

    it('scopes ids per user: another user may use the same id and never sees the first', async () => {
      const store = await make();
      const record = conversationFixture({ title: 'alice' });
      await expectOk(store.insert(record));
      expect(await expectOk(store.get('bob', record.id))).toBeNull();
      expect(await expectOk(store.insert({ ...record, user_id: 'bob', title: 'bob' }))).toBe('inserted');
      expect((await expectOk(store.get('alice', record.id)))?.title).toBe('alice');
      expect((await expectOk(store.get('bob', record.id)))?.title).toBe('bob');
    });

    it('gets many in the order asked, with null for missing and foreign ids', async () => {
      const store = await make();
      const a = conversationFixture();
      const b = conversationFixture();
      const foreign = conversationFixture({ user_id: 'bob' });
      for (const r of [a, b, foreign]) await expectOk(store.insert(r));
      const got = await expectOk(store.getMany('alice', [b.id, 'missing', a.id, foreign.id]));
      expect(got.map((r) => r?.id ?? null)).toEqual([b.id, null, a.id, null]);
    });

    it('updates atomically through mutate, and returns null for a missing or foreign record', async () => {
      const store = await make();
      const record = conversationFixture({ status: 'STARTING' });
      await expectOk(store.insert(record));
      const updated = await expectOk(
        store.update('alice', record.id, (c) =>
          ok<ConversationRecord, never>({ ...c, status: 'RUNNING', updated_at: at(5) }),
        ),
      );
      expect(updated?.status).toBe('RUNNING');
      expect((await expectOk(store.get('alice', record.id)))?.updated_at).toBe(at(5));
      expect(
        await expectOk(store.update('bob', record.id, (c) => ok<ConversationRecord, never>({ ...c, title: 'hijack' }))),
      ).toBeNull();
      expect(await expectOk(store.update('alice', 'missing', (c) => ok<ConversationRecord, never>(c)))).toBeNull();
      expect((await expectOk(store.get('alice', record.id)))?.title).toBe(record.title);
    });

    it('finds an updated record by what changed and by what did not', async () => {
      const store = await make();
      const record = conversationFixture({
        title: 'Alpha task',
        sandbox_id: 'sandbox-1',
        selected_repository: 'acme/one',
        execution_status: null,
      });
      await expectOk(store.insert(record));
      const ids = async (filter: ConversationFilter) =>
        (await expectOk(store.search('alice', filter, { limit: 10, after: null }))).items.map((c) => c.id);
      await expectOk(
        store.update('alice', record.id, (c) =>
          ok<ConversationRecord, never>({ ...c, title: 'Beta task', execution_status: 'running' }),
        ),
      );
      expect(await ids({ title_contains: 'beta' })).toEqual([record.id]);
      expect(await ids({ title_contains: 'alpha' })).toEqual([]);
      expect(await ids({ sandbox_id: 'sandbox-1', selected_repository: 'acme/one' })).toEqual([record.id]);
      expect((await expectOk(store.listByExecutionStatus(['running']))).map((c) => c.id)).toContain(record.id);
      await expectOk(
        store.update('alice', record.id, (c) =>
          ok<ConversationRecord, never>({ ...c, sandbox_id: 'sandbox-2', execution_status: 'finished' }),
        ),
      );
      expect((await expectOk(store.listBySandbox('alice', 'sandbox-2'))).map((c) => c.id)).toEqual([record.id]);
      expect(await expectOk(store.listBySandbox('alice', 'sandbox-1'))).toEqual([]);
      expect((await expectOk(store.listByExecutionStatus(['running']))).map((c) => c.id)).not.toContain(record.id);
      expect(await ids({ title_contains: 'beta', sandbox_id: 'sandbox-2' })).toEqual([record.id]);
    });

    it('leaves the record unchanged when mutate refuses', async () => {
      const store = await make();
      const record = conversationFixture();
      await expectOk(store.insert(record));
      const refused = await store.update('alice', record.id, () => err({ type: 'nope' as const }));
      expect(refused.isErr() && refused.error).toEqual({ type: 'nope' });
      expect(await expectOk(store.get('alice', record.id))).toEqual(record);
    });

    it('serialises concurrent updates of one record', async () => {
      const store = await make();
      const record = conversationFixture({ pr_number: [] });
      await expectOk(store.insert(record));
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          expectOk(
            store.update('alice', record.id, (c) =>
              ok<ConversationRecord, never>({ ...c, pr_number: [...c.pr_number, i] }),
            ),
          ),
        ),
      );
      expect((await expectOk(store.get('alice', record.id)))?.pr_number).toHaveLength(20);
    });

    it('deletes only the owner’s record', async () => {
      const store = await make();
      const record = conversationFixture();
      await expectOk(store.insert(record));
      expect(await expectOk(store.delete('bob', record.id))).toBe(false);
      expect(await expectOk(store.delete('alice', record.id))).toBe(true);
      expect(await expectOk(store.delete('alice', record.id))).toBe(false);
      expect(await expectOk(store.get('alice', record.id))).toBeNull();
    });

    it('lists newest first across pages without skipping or repeating, ties broken by id', async () => {
      const store = await make();
      const records = Array.from({ length: 23 }, (_, i) =>
        conversationFixture({ created_at: at(Math.floor(i / 3)), updated_at: at(i) }),
      );
      for (const r of records) await expectOk(store.insert(r));
      await expectOk(store.insert(conversationFixture({ user_id: 'bob' })));
      const all = await collectPages((page) => store.search('alice', {}, page), 4);
      const expected = [...records].sort((x, y) =>
        x.created_at === y.created_at ? (x.id < y.id ? 1 : -1) : x.created_at < y.created_at ? 1 : -1,
      );
      expect(all.map((r) => r.id)).toEqual(expected.map((r) => r.id));
      expect(await expectOk(store.count('alice', {}))).toBe(23);
    });

    it('filters by title (case-insensitive), time bounds, repository, trigger, sandbox and parent', async () => {
      const store = await make();
      const parent = conversationFixture({
        title: 'Fix the LOGIN bug',
        created_at: at(10),
        updated_at: at(100),
        selected_repository: 'acme/app',
        trigger: 'gui',
        sandbox_id: 'box-9',
      });
      const other = conversationFixture({
        title: 'Write docs',
        created_at: at(20),
        updated_at: at(200),
        selected_repository: 'acme/docs',
        trigger: 'openhands_api',
      });
      const child = conversationFixture({
        title: 'login follow-up',
        created_at: at(30),
        updated_at: at(300),
        parent_conversation_id: parent.id,
      });
      for (const r of [parent, other, child]) await expectOk(store.insert(r));
      const ids = async (filter: Parameters<ConversationStore['search']>[1]) =>
        (await expectOk(store.search('alice', filter, { limit: 100, after: null }))).items.map((r) => r.id);
      expect(await ids({})).toEqual([other.id, parent.id]);
      expect(await ids({ include_sub_conversations: true })).toEqual([child.id, other.id, parent.id]);
      expect(await ids({ title_contains: 'login', include_sub_conversations: true })).toEqual([child.id, parent.id]);
      expect(await ids({ title_contains: '%' })).toEqual([]);
      expect(await ids({ created_at_gte: at(20), include_sub_conversations: true })).toEqual([child.id, other.id]);
      expect(await ids({ created_at_lt: at(20) })).toEqual([parent.id]);
      expect(await ids({ updated_at_gte: at(100), updated_at_lt: at(200) })).toEqual([parent.id]);
      expect(await ids({ selected_repository: 'acme/docs' })).toEqual([other.id]);
      expect(await ids({ trigger: 'gui' })).toEqual([parent.id]);
      expect(await ids({ sandbox_id: 'box-9' })).toEqual([parent.id]);
      expect(await ids({ sandbox_id: 'box-0' })).toEqual([]);
      expect(await expectOk(store.count('alice', { sandbox_id: 'box-9' }))).toBe(1);
      expect(await expectOk(store.count('alice', { title_contains: 'LOGIN', include_sub_conversations: true }))).toBe(
        2,
      );
      expect(await expectOk(store.count('bob', {}))).toBe(0);
    });

    it('lists the conversations of a sandbox and the children of parents', async () => {
      const store = await make();
      const parent = conversationFixture({ sandbox_id: 'box-1', created_at: at(1) });
      const c1 = conversationFixture({ sandbox_id: 'box-1', parent_conversation_id: parent.id, created_at: at(2) });
      const c2 = conversationFixture({ sandbox_id: 'box-2', parent_conversation_id: parent.id, created_at: at(3) });
      const foreign = conversationFixture({ user_id: 'bob', sandbox_id: 'box-1' });
      for (const r of [parent, c1, c2, foreign]) await expectOk(store.insert(r));
      expect((await expectOk(store.listBySandbox('alice', 'box-1'))).map((r) => r.id).sort()).toEqual(
        [parent.id, c1.id].sort(),
      );
      const children = await expectOk(store.childrenOf('alice', [parent.id, c1.id]));
      expect(children.get(parent.id)).toEqual([c1.id, c2.id]);
      expect(children.get(c1.id) ?? []).toEqual([]);
      expect((await expectOk(store.childrenOf('bob', [parent.id]))).get(parent.id) ?? []).toEqual([]);
    });

    it('lists every user’s conversations whose agent is in given states, oldest first, with the metrics kept', async () => {
      const store = await make();
      const running = conversationFixture({
        execution_status: 'running',
        created_at: at(2),
        metrics: { accumulated_cost: 0.25, max_budget_per_task: 1, prompt_tokens: 10, completion_tokens: 3 },
      });
      const bobs = conversationFixture({ user_id: 'bob', execution_status: 'running', created_at: at(1) });
      const waiting = conversationFixture({ execution_status: 'waiting_for_confirmation', created_at: at(3) });
      const finished = conversationFixture({ execution_status: 'finished' });
      const fresh = conversationFixture({ execution_status: null });
      for (const r of [running, bobs, waiting, finished, fresh]) await expectOk(store.insert(r));
      expect((await expectOk(store.listByExecutionStatus(['running']))).map((r) => r.id)).toEqual([
        bobs.id,
        running.id,
      ]);
      const both = await expectOk(store.listByExecutionStatus(['running', 'waiting_for_confirmation']));
      expect(both.map((r) => r.id)).toEqual([bobs.id, running.id, waiting.id]);
      expect(both[1]!.metrics).toEqual(running.metrics);
      expect(await expectOk(store.listByExecutionStatus(['stuck']))).toEqual([]);
    });
  });
}

/** Contract every StartTaskStore must meet. */
export function describeStartTaskStoreContract(name: string, make: StoreFactory<StartTaskStore>): void {
  describe(`StartTaskStore contract: ${name}`, () => {
    it('inserts, reads, gets many with holes, and scopes per user', async () => {
      const store = await make();
      const a = startTaskFixture();
      const b = startTaskFixture({ user_id: 'bob' });
      await expectOk(store.insert(a));
      await expectOk(store.insert(b));
      expect(await expectOk(store.get('alice', a.id))).toEqual(a);
      expect(await expectOk(store.get('alice', b.id))).toBeNull();
      expect((await expectOk(store.getMany('alice', [b.id, a.id]))).map((t) => t?.id ?? null)).toEqual([null, a.id]);
    });

    it('updates through mutate', async () => {
      const store = await make();
      const task = startTaskFixture();
      await expectOk(store.insert(task));
      const updated = await expectOk(
        store.update('alice', task.id, (t) => ok<StartTaskRecord, never>({ ...t, status: 'READY', updated_at: at(9) })),
      );
      expect(updated?.status).toBe('READY');
      expect(await expectOk(store.update('bob', task.id, (t) => ok<StartTaskRecord, never>(t)))).toBeNull();
    });

    it('searches in both orders with filters, pages and counts', async () => {
      const store = await make();
      const conversation = 'c'.repeat(32);
      const tasks = Array.from({ length: 9 }, (_, i) =>
        startTaskFixture({
          created_at: at(i),
          app_conversation_id: i % 3 === 0 ? conversation : `${i}`.repeat(32).slice(0, 32),
        }),
      );
      for (const t of tasks) await expectOk(store.insert(t));
      const newest = await collectPages((page) => store.search('alice', {}, page, 'newest_first'), 2);
      expect(newest.map((t) => t.id)).toEqual([...tasks].reverse().map((t) => t.id));
      const oldest = await collectPages((page) => store.search('alice', {}, page, 'oldest_first'), 4);
      expect(oldest.map((t) => t.id)).toEqual(tasks.map((t) => t.id));
      const forConversation = await expectOk(
        store.search('alice', { app_conversation_id: conversation }, { limit: 100, after: null }, 'oldest_first'),
      );
      expect(forConversation.items.map((t) => t.id)).toEqual([tasks[0]!.id, tasks[3]!.id, tasks[6]!.id]);
      expect(await expectOk(store.count('alice', { created_at_gte: at(6) }))).toBe(3);
      expect(await expectOk(store.count('bob', {}))).toBe(0);
    });

    it('deletes the tasks of one conversation of one user', async () => {
      const store = await make();
      const conversation = 'd'.repeat(32);
      const mine = [
        startTaskFixture({ app_conversation_id: conversation }),
        startTaskFixture({ app_conversation_id: conversation }),
      ];
      const other = startTaskFixture();
      const foreign = startTaskFixture({ user_id: 'bob', app_conversation_id: conversation });
      for (const t of [...mine, other, foreign]) await expectOk(store.insert(t));
      expect(await expectOk(store.deleteByConversation('alice', conversation))).toBe(2);
      expect(await expectOk(store.get('alice', mine[0]!.id))).toBeNull();
      expect(await expectOk(store.get('alice', other.id))).not.toBeNull();
      expect(await expectOk(store.get('bob', foreign.id))).not.toBeNull();
    });
  });
}

/** Contract every SandboxStore must meet. */
export function describeSandboxStoreContract(name: string, make: StoreFactory<SandboxStore>): void {
  describe(`SandboxStore contract: ${name}`, () => {
    it('inserts, reads back unchanged, and scopes per user', async () => {
      const store = await make();
      const record = sandboxFixture();
      await expectOk(store.insert(record));
      expect(await expectOk(store.get('alice', record.id))).toEqual(record);
      expect(await expectOk(store.get('bob', record.id))).toBeNull();
      expect((await expectOk(store.getMany('bob', [record.id])))[0]).toBeNull();
    });

    it('finds the owner of a live sandbox by its id alone, and no owner of a deleted one', async () => {
      const store = await make();
      const record = sandboxFixture();
      await expectOk(store.insert(record));
      expect(await expectOk(store.ownerOf(record.id))).toBe('alice');
      expect(await expectOk(store.ownerOf('no-such-sandbox'))).toBeNull();
      await expectOk(store.update('alice', record.id, (r) => ok<SandboxRecord, never>({ ...r, status: 'DELETED' })));
      expect(await expectOk(store.ownerOf(record.id))).toBeNull();
    });

    it('updates through mutate and keeps tombstones readable but unlisted', async () => {
      const store = await make();
      const live = sandboxFixture({ created_at: at(1) });
      const doomed = sandboxFixture({ created_at: at(2) });
      await expectOk(store.insert(live));
      await expectOk(store.insert(doomed));
      await expectOk(
        store.update('alice', doomed.id, (r) =>
          ok<SandboxRecord, never>({ ...r, status: 'DELETED', exposed_urls: [] }),
        ),
      );
      expect((await expectOk(store.get('alice', doomed.id)))?.status).toBe('DELETED');
      expect((await expectOk(store.getMany('alice', [doomed.id])))[0]?.status).toBe('DELETED');
      const listed = await expectOk(store.search('alice', { limit: 100, after: null }));
      expect(listed.items.map((r) => r.id)).toEqual([live.id]);
    });

    it('keeps when a sandbox was last used, as the service writes it for other processes', async () => {
      const store = await make();
      const record = sandboxFixture({ status: 'RUNNING' });
      await expectOk(store.insert(record));
      await expectOk(
        store.update('alice', record.id, (r) => ok<SandboxRecord, never>({ ...r, last_active_at: at(7) })),
      );
      expect(await expectOk(store.get('alice', record.id))).toEqual({ ...record, last_active_at: at(7) });
      expect(
        (await expectOk(store.listByStatus(null, ['RUNNING']))).find((r) => r.id === record.id)?.last_active_at,
      ).toBe(at(7));
    });

    it('lists by status, oldest first, for one user or for every user', async () => {
      const store = await make();
      const a1 = sandboxFixture({ status: 'RUNNING', created_at: at(3) });
      const a2 = sandboxFixture({ status: 'STARTING', created_at: at(1) });
      const a3 = sandboxFixture({ status: 'PAUSED', created_at: at(2) });
      const b1 = sandboxFixture({ user_id: 'bob', status: 'RUNNING', created_at: at(0) });
      const gone = sandboxFixture({ status: 'DELETED', created_at: at(4) });
      for (const r of [a1, a2, a3, b1, gone]) await expectOk(store.insert(r));
      expect((await expectOk(store.listByStatus('alice', ['RUNNING', 'STARTING']))).map((r) => r.id)).toEqual([
        a2.id,
        a1.id,
      ]);
      expect((await expectOk(store.listByStatus(null, ['RUNNING']))).map((r) => r.id)).toEqual([b1.id, a1.id]);
      expect(await expectOk(store.listByStatus('bob', ['PAUSED']))).toEqual([]);
      expect((await expectOk(store.listByStatus('alice', ['DELETED']))).map((r) => r.id)).toEqual([gone.id]);
    });

    it("claims the oldest ready pooled sandbox of a spec for a user, once: then it is the user's alone", async () => {
      const store = await make();
      const pooled = (overrides: Partial<SandboxRecord>) =>
        sandboxFixture({ user_id: POOLED_SANDBOX_OWNER, sandbox_spec_id: 'warm', ...overrides });
      const older = pooled({ created_at: at(1) });
      const newer = pooled({ created_at: at(2) });
      const starting = pooled({ status: 'STARTING', created_at: at(0) });
      const otherSpec = pooled({ sandbox_spec_id: 'cold', created_at: at(0) });
      const alices = sandboxFixture({ sandbox_spec_id: 'warm', created_at: at(0) });
      for (const r of [older, newer, starting, otherSpec, alices]) await expectOk(store.insert(r));
      expect(await expectOk(store.search('bob', { limit: 100, after: null }))).toEqual({
        items: [],
        next_page_id: null,
      });

      const claimed = await expectOk(store.claimPooled('warm', 'bob', at(9)));
      expect(claimed).toEqual({ ...older, user_id: 'bob', updated_at: at(9), last_active_at: at(9) });
      expect(await expectOk(store.get('bob', older.id))).toEqual(claimed);
      expect(await expectOk(store.get(POOLED_SANDBOX_OWNER, older.id))).toBeNull();
      expect(await expectOk(store.ownerOf(older.id))).toBe('bob');
      expect((await expectOk(store.search('bob', { limit: 100, after: null }))).items.map((r) => r.id)).toEqual([
        older.id,
      ]);
      expect((await expectOk(store.listByStatus('bob', ['RUNNING']))).map((r) => r.id)).toEqual([older.id]);
      expect(
        (await expectOk(store.listByStatus(POOLED_SANDBOX_OWNER, ['RUNNING', 'STARTING']))).map((r) => r.id).sort(),
      ).toEqual([newer.id, starting.id, otherSpec.id].sort());
      // Updates after the claim go through the user's id.
      await expectOk(store.update('bob', older.id, (r) => ok<SandboxRecord, never>({ ...r, status: 'PAUSED' })));
      expect((await expectOk(store.get('bob', older.id)))?.status).toBe('PAUSED');

      expect((await expectOk(store.claimPooled('warm', 'carol', at(10))))?.id).toBe(newer.id);
      // Only STARTING (not ready) and another spec's are left: nothing to claim.
      expect(await expectOk(store.claimPooled('warm', 'dave', at(11)))).toBeNull();
      expect(await expectOk(store.claimPooled('none', 'dave', at(11)))).toBeNull();
    });

    it('never gives one pooled sandbox to two concurrent claims', async () => {
      const store = await make();
      const pool = Array.from({ length: 3 }, (_, i) =>
        sandboxFixture({ user_id: POOLED_SANDBOX_OWNER, sandbox_spec_id: 'warm', created_at: at(i) }),
      );
      for (const r of pool) await expectOk(store.insert(r));
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, i) => expectOk(store.claimPooled('warm', `user-${i}`, at(20)))),
      );
      const won = claims.filter((c): c is SandboxRecord => c !== null);
      expect(won).toHaveLength(3);
      expect(new Set(won.map((c) => c.id))).toEqual(new Set(pool.map((r) => r.id)));
      for (const c of won) expect(await expectOk(store.ownerOf(c.id))).toBe(c.user_id);
      expect(await expectOk(store.listByStatus(POOLED_SANDBOX_OWNER, ['RUNNING']))).toEqual([]);
    });

    it('pages newest first without skipping or repeating', async () => {
      const store = await make();
      const records = Array.from({ length: 11 }, (_, i) => sandboxFixture({ created_at: at(i % 4) }));
      for (const r of records) await expectOk(store.insert(r));
      await expectOk(store.insert(sandboxFixture({ user_id: 'bob' })));
      const all = await collectPages((page) => store.search('alice', page), 3);
      expect(new Set(all.map((r) => r.id))).toEqual(new Set(records.map((r) => r.id)));
      expect(all).toHaveLength(11);
      for (let i = 1; i < all.length; i++) expect(all[i - 1]!.created_at >= all[i]!.created_at).toBe(true);
    });
  });
}

/** Contract every SandboxSpecCatalog must meet. `make` must return a catalog with at least three specs. */
export function describeSandboxSpecCatalogContract(name: string, make: StoreFactory<SandboxSpecCatalog>): void {
  describe(`SandboxSpecCatalog contract: ${name}`, () => {
    it('lists every spec once across pages, default first', async () => {
      const catalog = await make();
      const all = await collectPages((page) => catalog.list(page), 2);
      expect(all.length).toBeGreaterThanOrEqual(3);
      expect(new Set(all.map((s) => s.id)).size).toBe(all.length);
      expect((await expectOk(catalog.getDefault())).id).toBe(all[0]!.id);
    });

    it('gets a spec by id and null for an unknown one', async () => {
      const catalog = await make();
      const [first] = (await expectOk(catalog.list({ limit: 1, after: null }))).items;
      expect(await expectOk(catalog.get(first!.id))).toEqual(first);
      expect(await expectOk(catalog.get('no-such-spec'))).toBeNull();
    });
  });
}
