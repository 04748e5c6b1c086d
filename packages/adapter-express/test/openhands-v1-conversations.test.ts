import { afterEach, describe, expect, it } from 'vitest';
import { fakeGit, type ScriptedTurn } from '@acs/testing';
import {
  arr,
  errorCode,
  items,
  KEY_B,
  obj,
  startAppConversation,
  startHarness,
  storeSettings,
  type CallResult,
  type Harness,
  type HarnessOptions,
} from './harness.js';
import { expectOpenHandsShape } from './openhands-shapes.js';
import { readFileSync } from 'node:fs';

/**
 * The OpenHands 1.11 app-conversation routes over HTTP: each answer is checked against the 1.11
 * app server's own model of it (expectOpenHandsShape), bad input is a 4xx, and Bob sees nothing
 * of Alice's. Streaming (stream-start) and the download are in openhands-v1-streams.test.ts.
 */

let harnesses: Harness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness({ clock: 'manual', ...options });
  harnesses.push(h);
  await storeSettings(h);
  await storeSettings(h, undefined, KEY_B);
  return h;
}

const message = (text: string) => ({ role: 'user', content: [{ type: 'text', text }] });

async function ok(h: Harness, method: string, path: string, body?: unknown, key?: string): Promise<unknown> {
  const r = await h.call(method, path, { ...(body !== undefined ? { body } : {}), ...(key ? { key } : {}) });
  expect(r.status, `${method} ${path}: ${r.text}`).toBe(200);
  return r.body;
}

function expectError(r: CallResult, status: number, code: string): void {
  expect(r.status, r.text).toBe(status);
  expect(errorCode(r.body)).toBe(code);
  // 1.11 clients read `detail`; ours says the same as message.
  expect(obj(r.body).detail).toBe(obj(r.body).message);
}

/** Starts a V1 conversation and waits for its start (and first agent run) to end; its id. */
async function started(
  h: Harness,
  body: Record<string, unknown> = { initial_message: message('Please do the task.') },
  key?: string,
): Promise<string> {
  const task = await startAppConversation(h, body, key);
  await h.idle();
  return task.app_conversation_id as string;
}

const schemaProperties = (model: string) =>
  Object.keys(
    (
      JSON.parse(readFileSync(new URL(`./openhands-1.11/schemas/${model}.json`, import.meta.url), 'utf8')) as {
        properties: object;
      }
    ).properties,
  );

describe('search, batch get and count in the 1.11 shapes', () => {
  it('AppConversationPage and AppConversation, with metrics as 1.11 reports them (model, a cost that is a number, token usage)', async () => {
    const h = await harness();
    h.ports.llm.push({
      content: 'Hi.',
      usage: { prompt_tokens: 100, completion_tokens: 20, cached_prompt_tokens: 30, cost_usd: 0.01 },
    });
    const priced = await started(h);
    const fresh = await startAppConversation(h, {});
    await h.idle();

    const page = await ok(h, 'GET', '/api/v1/app-conversations/search');
    expectOpenHandsShape('AppConversationPage', page);
    const byId = new Map(items(page).map((c) => [c.id, c]));
    expect(byId.get(priced)?.metrics).toEqual({
      model_name: 'anthropic/claude-sonnet-4',
      accumulated_cost: 0.01,
      accumulated_cost_known: true,
      max_budget_per_task: null,
      accumulated_token_usage: {
        model: 'anthropic/claude-sonnet-4',
        prompt_tokens: 100,
        completion_tokens: 20,
        cache_read_tokens: 30,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        context_window: 0,
        per_turn_token: 120,
        response_id: '',
      },
    });
    // No model call yet: no metrics (1.11's default).
    expect(byId.get(fresh.app_conversation_id)?.metrics).toBeNull();
    expect(byId.get(priced)).toMatchObject({
      agent_kind: 'openhands',
      public: null,
      tags: {},
      acp_server: null,
      launched_agent_profile: null,
    });

    const batch = arr(await ok(h, 'GET', `/api/v1/app-conversations?ids=${priced}&ids=${'f'.repeat(32)}`));
    expectOpenHandsShape('AppConversation', batch[0]);
    expect(batch[1]).toBeNull();
    expect(await ok(h, 'GET', '/api/v1/app-conversations/count')).toBe(2);
    expectOpenHandsShape('AppConversation', await ok(h, 'GET', `/api/v1/app-conversations/${priced}`));
  });

  it('an unknown price is a cost of 0 as 1.11 counts it, and accumulated_cost_known says so', async () => {
    const h = await harness();
    h.ports.llm.push({ content: 'Hi.', usage: { cost_usd: null } });
    const id = await started(h);
    const c = obj(arr(await ok(h, 'GET', `/api/v1/app-conversations?ids=${id}`))[0]);
    expectOpenHandsShape('AppConversation', c);
    expect(c.metrics).toMatchObject({ accumulated_cost: 0, accumulated_cost_known: false });
  });

  it('sandbox_id__eq filters search and count', async () => {
    const h = await harness();
    const a = await startAppConversation(h, {});
    await startAppConversation(h, {});
    await h.idle();
    const page = await ok(h, 'GET', `/api/v1/app-conversations/search?sandbox_id__eq=${a.sandbox_id as string}`);
    expect(items(page).map((c) => c.id)).toEqual([a.app_conversation_id]);
    expect(await ok(h, 'GET', `/api/v1/app-conversations/count?sandbox_id__eq=${a.sandbox_id as string}`)).toBe(1);
    expect(await ok(h, 'GET', '/api/v1/app-conversations/count?sandbox_id__eq=none')).toBe(0);
  });

  it('Bob sees none of Alice’s conversations: null in a batch, absent from search and count', async () => {
    const h = await harness();
    const id = await started(h);
    expect(arr(await ok(h, 'GET', `/api/v1/app-conversations?ids=${id}`, undefined, KEY_B))).toEqual([null]);
    expect(items(await ok(h, 'GET', '/api/v1/app-conversations/search', undefined, KEY_B))).toEqual([]);
    expect(await ok(h, 'GET', '/api/v1/app-conversations/count', undefined, KEY_B)).toBe(0);
  });
});

describe('POST /api/v1/app-conversations with the fields of 1.11’s AppConversationStartRequest', () => {
  it('answers an AppConversationStartTask echoing every field of the request; tasks read back in the 1.11 shapes', async () => {
    const h = await harness();
    const r = await h.call('POST', '/api/v1/app-conversations', {
      body: {
        initial_message: { content: [{ text: 'hello' }] },
        title: 'Mine',
        processors: [{ kind: 'SetTitleCallbackProcessor' }],
      },
    });
    expect(r.status, r.text).toBe(200);
    expectOpenHandsShape('AppConversationStartTask', r.body);
    const task = obj(r.body);
    expect(Object.keys(obj(task.request)).sort()).toEqual(schemaProperties('AppConversationStartRequest').sort());
    expect(task.request).toMatchObject({
      initial_message: { role: 'user', content: [{ type: 'text', text: 'hello', cache_prompt: false }], run: false },
      title: 'Mine',
      agent_type: 'default',
      pr_number: [],
      secrets: null,
    });
    await h.idle();
    const page = await ok(h, 'GET', '/api/v1/app-conversations/start-tasks/search');
    expectOpenHandsShape('AppConversationStartTaskPage', page);
    const [done] = arr(await ok(h, 'GET', `/api/v1/app-conversations/start-tasks?ids=${task.id as string}`));
    expectOpenHandsShape('AppConversationStartTask', done);
    expect(done).toMatchObject({ status: 'READY', app_conversation_id: task.app_conversation_id });
    expect(await ok(h, 'GET', '/api/v1/app-conversations/start-tasks/count')).toBe(1);
  });

  it('conversation_id (dashed or not) is the conversation’s id; taken again → 409 and nothing more stored', async () => {
    const h = await harness();
    const dashed = '3387d26a-07df-48e8-add9-d60b19695f1f';
    const task = await startAppConversation(h, { conversation_id: dashed });
    expect(task.app_conversation_id).toBe(dashed.replaceAll('-', ''));
    expect(obj(task.request).conversation_id).toBe(dashed);
    await h.idle();
    const again = await h.call('POST', '/api/v1/app-conversations', {
      body: { conversation_id: dashed.replaceAll('-', '') },
    });
    expectError(again, 409, 'CONVERSATION_ID_TAKEN');
    expect(await ok(h, 'GET', '/api/v1/app-conversations/count')).toBe(1);
    expect(await ok(h, 'GET', '/api/v1/app-conversations/start-tasks/count')).toBe(1);
    // Another user may use the same id: ids are per user.
    const bobs = await startAppConversation(h, { conversation_id: dashed }, KEY_B);
    expect(bobs.app_conversation_id).toBe(dashed.replaceAll('-', ''));
  });

  it('system_message_suffix reaches the agent’s system prompt; public and trigger are kept', async () => {
    const h = await harness();
    h.ports.llm.push({ content: 'Done.' });
    const id = await started(h, {
      initial_message: message('hi'),
      system_message_suffix: 'Always answer in haiku.',
      public: true,
      trigger: 'automation',
    });
    expect(JSON.stringify(h.ports.llm.requests[0]?.messages[0])).toContain('Always answer in haiku.');
    const c = await ok(h, 'GET', `/api/v1/app-conversations/${id}`);
    expectOpenHandsShape('AppConversation', c);
    expect(c).toMatchObject({ public: true, trigger: 'automation' });
  });

  it('a suggested task becomes the first message, for the repository it names', async () => {
    const h = await harness();
    h.ports.llm.push({ content: 'On it.' });
    const id = await started(h, {
      suggested_task: {
        git_provider: 'github',
        task_type: 'FAILING_CHECKS',
        repo: 'acme/widgets',
        issue_number: 7,
        title: 'CI is red',
      },
    });
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}`)).toMatchObject({
      selected_repository: 'acme/widgets',
      git_provider: 'github',
      trigger: 'suggested_task',
    });
    const first = JSON.stringify(h.ports.llm.requests[0]?.messages);
    expect(first).toContain('pull request #7 of the repository acme/widgets');
    expect(first).toContain('checks fail');
  });

  it.each([
    ['plugins', { plugins: [{ source: 'github:acme/plugin' }] }],
    ['secrets', { secrets: { TOKEN: 'x' } }],
    ['agent_profile_id', { agent_profile_id: 'p1' }],
    ['conversation_id', { conversation_id: 'not-a-uuid' }],
    [
      'suggested_task',
      {
        suggested_task: { git_provider: 'github', task_type: 'OPEN_ISSUE', repo: 'a/b', issue_number: 1, title: 't' },
        initial_message: message('x'),
      },
    ],
    [
      'suggested_task.task_type',
      { suggested_task: { git_provider: 'github', task_type: 'WHATEVER', repo: 'a/b', issue_number: 1, title: 't' } },
    ],
  ])('what it cannot honour (%s) → 422, nothing stored', async (field, body) => {
    const h = await harness();
    const r = await h.call('POST', '/api/v1/app-conversations', { body });
    expectError(r, 422, 'VALIDATION_FAILED');
    expect(arr(obj(r.body).issues).map((i) => obj(i).path)).toContain(field);
    expect(await ok(h, 'GET', '/api/v1/app-conversations/count')).toBe(0);
  });
});

describe('PATCH and DELETE /api/v1/app-conversations/{id}', () => {
  it('PATCH changes only what the body names, null clears; the answer is an AppConversation', async () => {
    const h = await harness();
    const id = await started(h, {
      selected_repository: 'acme/widgets',
      selected_branch: 'dev',
      git_provider: 'github',
    });
    const body = { title: 'Renamed', public: true };
    expectOpenHandsShape('AppConversationUpdateRequest', body);
    const renamed = await ok(h, 'PATCH', `/api/v1/app-conversations/${id}`, body);
    expectOpenHandsShape('AppConversation', renamed);
    expect(renamed).toMatchObject({
      title: 'Renamed',
      public: true,
      selected_repository: 'acme/widgets',
      selected_branch: 'dev',
      git_provider: 'github',
    });
    expect(
      await ok(h, 'PATCH', `/api/v1/app-conversations/${id}`, {
        selected_repository: null,
        selected_branch: null,
        git_provider: null,
        title: null,
      }),
    ).toMatchObject({
      title: `Conversation ${id.slice(0, 5)}`,
      public: true,
      selected_repository: null,
      selected_branch: null,
      git_provider: null,
    });
    expect(
      await ok(h, 'PATCH', `/api/v1/app-conversations/${id}`, {
        selected_repository: 'acme/other',
        selected_branch: 'main',
      }),
    ).toMatchObject({ selected_repository: 'acme/other', selected_branch: 'main' });
    expect(await ok(h, 'PATCH', `/api/v1/app-conversations/${id}`, {})).toMatchObject({
      title: `Conversation ${id.slice(0, 5)}`,
      selected_repository: 'acme/other',
    });
  });

  it('PATCH refuses bad input with 422 and changes nothing; an unknown or another user’s conversation is 404', async () => {
    const h = await harness();
    const id = await started(h, { selected_repository: 'acme/widgets', selected_branch: 'dev' });
    const before = await ok(h, 'GET', `/api/v1/app-conversations/${id}`);
    for (const [body, field] of [
      [{ selected_repository: 'no-slash' }, 'selected_repository'],
      [{ selected_repository: 'a/b;rm -rf /' }, 'selected_repository'],
      [{ selected_repository: null, selected_branch: 'dev' }, 'selected_repository'],
      [{ selected_branch: 'bad..branch' }, 'selected_branch'],
      [{ git_provider: 'svn' }, 'git_provider'],
      [{ public: 'yes' }, 'public'],
      [{ title: 'x'.repeat(201) }, 'title'],
    ] as const) {
      const r = await h.call('PATCH', `/api/v1/app-conversations/${id}`, { body });
      expectError(r, 422, 'VALIDATION_FAILED');
      expect(
        arr(obj(r.body).issues).map((i) => obj(i).path),
        JSON.stringify(body),
      ).toContain(field);
    }
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}`)).toEqual(before);
    expectError(
      await h.call('PATCH', `/api/v1/app-conversations/${'f'.repeat(32)}`, { body: { title: 'x' } }),
      404,
      'CONVERSATION_NOT_FOUND',
    );
    expectError(
      await h.call('PATCH', `/api/v1/app-conversations/${id}`, { key: KEY_B, body: { title: 'mine now' } }),
      404,
      'CONVERSATION_NOT_FOUND',
    );
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}`)).toEqual(before);
  });

  it('DELETE answers Success and removes what V0’s delete removes; Bob cannot delete Alice’s', async () => {
    const h = await harness();
    const id = await started(h);
    const task = items(await ok(h, 'GET', '/api/v1/app-conversations/start-tasks/search'))[0]!;
    expectError(
      await h.call('DELETE', `/api/v1/app-conversations/${id}`, { key: KEY_B }),
      404,
      'CONVERSATION_NOT_FOUND',
    );
    const sandboxId = obj(await ok(h, 'GET', `/api/v1/app-conversations/${id}`)).sandbox_id as string;
    const r = await ok(h, 'DELETE', `/api/v1/app-conversations/${id}`);
    expect(r).toEqual({ success: true });
    expectOpenHandsShape('Success', r);
    expectError(await h.call('GET', `/api/v1/app-conversations/${id}`), 404, 'CONVERSATION_NOT_FOUND');
    expect(arr(await ok(h, 'GET', `/api/v1/app-conversations/start-tasks?ids=${task.id as string}`))).toEqual([null]);
    await h.idle();
    expect(arr(await ok(h, 'GET', `/api/v1/sandboxes?id=${sandboxId}`))).toEqual([null]);
    expectError(await h.call('DELETE', `/api/v1/app-conversations/${id}`), 404, 'CONVERSATION_NOT_FOUND');
  });
});

describe('POST /api/v1/conversations/{id}/pending-messages', () => {
  it('queues messages by task id before the conversation is ready (201 PendingMessageResponse); the agent takes them when it runs; 10 waiting at most', async () => {
    // The system clock: the start waits for a held sandbox, polling.
    const h = await harness({ clock: 'system' });
    h.ports.runtime.hold();
    const task = await startAppConversation(h, { initial_message: { ...message('first'), run: true } });
    const id = task.app_conversation_id as string;
    const byTask = await h.call('POST', `/api/v1/conversations/task-${task.id as string}/pending-messages`, {
      body: { content: [{ type: 'text', text: 'also this' }] },
    });
    expect(byTask.status, byTask.text).toBe(201);
    expectOpenHandsShape('PendingMessageResponse', byTask.body);
    // The first message waits too.
    expect(byTask.body).toMatchObject({ queued: true, position: 2 });
    const byId = await h.call('POST', `/api/v1/conversations/${id}/pending-messages`, {
      body: { role: 'user', content: [{ text: 'and this' }] },
    });
    expect(obj(byId.body)).toMatchObject({ queued: true, position: 3 });
    for (let position = 4; position <= 10; position++) {
      expect(
        obj(
          (
            await h.call('POST', `/api/v1/conversations/${id}/pending-messages`, {
              body: { content: [{ text: `m${position}` }] },
            })
          ).body,
        ).position,
      ).toBe(position);
    }
    expectError(
      await h.call('POST', `/api/v1/conversations/${id}/pending-messages`, {
        body: { content: [{ text: 'one too many' }] },
      }),
      429,
      'TOO_MANY_PENDING_MESSAGES',
    );

    h.ports.llm.push({ content: 'Read them all.' });
    h.ports.runtime.release();
    await h.idle();
    const seen = JSON.stringify(h.ports.llm.requests[0]?.messages);
    for (const text of ['first', 'also this', 'and this', 'm10']) expect(seen).toContain(text);
    expect(seen).not.toContain('one too many');
    // The agent answered: nothing waits any more.
    h.ports.llm.push({ content: 'Again.' });
    expect(
      obj(
        (
          await h.call('POST', `/api/v1/conversations/${id}/pending-messages`, {
            body: { content: [{ text: 'later' }] },
          })
        ).body,
      ).position,
    ).toBe(1);
    // The message is in the events, with the id the answer gave.
    const queuedId = obj(byTask.body).id as string;
    const [event] = arr(await ok(h, 'GET', `/api/v1/conversation/${id}/events?id=${queuedId}`));
    expect(event).toMatchObject({
      kind: 'MessageEvent',
      source: 'user',
      llm_message: { content: [{ type: 'text', text: 'also this' }] },
    });
  });

  it('bad bodies → 422; an unknown target, or Alice’s task or conversation for Bob → 404, and nothing is appended', async () => {
    const h = await harness();
    const task = await startAppConversation(h, { initial_message: message('first') });
    await h.idle();
    const id = task.app_conversation_id as string;
    const count = () => ok(h, 'GET', `/api/v1/conversation/${id}/events/count`);
    const before = await count();
    for (const body of [
      {},
      { content: [] },
      { content: 'hi' },
      { content: [{ type: 'video' }] },
      { role: 'assistant', content: [{ text: 'x' }] },
    ]) {
      expectError(
        await h.call('POST', `/api/v1/conversations/${id}/pending-messages`, { body }),
        422,
        'VALIDATION_FAILED',
      );
    }
    for (const target of [`task-${task.id as string}`, id]) {
      expectError(
        await h.call('POST', `/api/v1/conversations/${target}/pending-messages`, {
          key: KEY_B,
          body: { content: [{ text: 'hi' }] },
        }),
        404,
        'CONVERSATION_NOT_FOUND',
      );
    }
    for (const target of [`task-${'f'.repeat(32)}`, 'task-', 'nope']) {
      expectError(
        await h.call('POST', `/api/v1/conversations/${target}/pending-messages`, {
          body: { content: [{ text: 'hi' }] },
        }),
        404,
        'CONVERSATION_NOT_FOUND',
      );
    }
    expect(await count()).toBe(before);
  });
});

const THINK: ScriptedTurn = { tool_calls: [{ name: 'think', arguments: { thought: 'plan the work' } }] };

describe('GET /api/v1/conversation/{id}/events… (the SDK events of 1.11)', () => {
  async function conversationWithWork(h: Harness): Promise<string> {
    h.ports.llm.push(THINK, { content: 'All done.' });
    return started(h);
  }

  it('search pages through EventPage in either order, filters by kind and time; count and batch agree', async () => {
    const h = await harness();
    const id = await conversationWithWork(h);
    const all = await ok(h, 'GET', `/api/v1/conversation/${id}/events/search`);
    expectOpenHandsShape('EventPage', all);
    const frames = items(all);
    expect(frames.map((f) => f.kind)).toEqual([
      'MessageEvent',
      'ConversationStateUpdateEvent',
      'ActionEvent',
      'ObservationEvent',
      'MessageEvent',
      'ConversationStateUpdateEvent',
    ]);
    expect(obj(all).next_page_id).toBeNull();
    expect(await ok(h, 'GET', `/api/v1/conversation/${id}/events/count`)).toBe(frames.length);

    // Pages of 2, both ways.
    for (const [order, expected] of [
      ['TIMESTAMP', frames],
      ['TIMESTAMP_DESC', [...frames].reverse()],
    ] as const) {
      const seen: unknown[] = [];
      let pageId: string | null = null;
      do {
        const page: unknown = await ok(
          h,
          'GET',
          `/api/v1/conversation/${id}/events/search?limit=2&sort_order=${order}${pageId ? `&page_id=${pageId}` : ''}`,
        );
        expectOpenHandsShape('EventPage', page);
        seen.push(...items(page));
        pageId = obj(page).next_page_id as string | null;
      } while (pageId !== null);
      expect(seen, order).toEqual(expected);
    }

    const actions = items(await ok(h, 'GET', `/api/v1/conversation/${id}/events/search?kind__eq=ActionEvent`));
    expect(actions.map((f) => f.kind)).toEqual(['ActionEvent']);
    expect(await ok(h, 'GET', `/api/v1/conversation/${id}/events/count?kind__eq=MessageEvent`)).toBe(2);
    const middle = frames[3]!.timestamp as string;
    expect(
      items(
        await ok(h, 'GET', `/api/v1/conversation/${id}/events/search?timestamp__gte=${encodeURIComponent(middle)}`),
      ),
    ).toEqual(frames.slice(3));
    expect(
      items(await ok(h, 'GET', `/api/v1/conversation/${id}/events/search?timestamp__lt=${encodeURIComponent(middle)}`)),
    ).toEqual(frames.slice(0, 3));
    expect(
      await ok(h, 'GET', `/api/v1/conversation/${id}/events/count?timestamp__gte=${encodeURIComponent(middle)}`),
    ).toBe(3);

    const batch = arr(
      await ok(
        h,
        'GET',
        `/api/v1/conversation/${id}/events?id=${frames[2]!.id as string}&id=999&id=${frames[0]!.id as string}`,
      ),
    );
    expect(batch).toEqual([frames[2], null, frames[0]]);
    // The observation points at its action, as in the search.
    expect(frames[3]).toMatchObject({ action_id: frames[2]!.id });
  });

  it('bad input → 4xx: a kind 1.11 does not have, a bad time or page id (422); too many ids or one that is not an event id (400)', async () => {
    const h = await harness();
    const id = await conversationWithWork(h);
    for (const query of [
      'kind__eq=Bogus',
      'timestamp__gte=yesterday',
      'sort_order=NEWEST',
      'page_id=x',
      'limit=0',
      'limit=101',
    ]) {
      expectError(await h.call('GET', `/api/v1/conversation/${id}/events/search?${query}`), 422, 'VALIDATION_FAILED');
    }
    expectError(
      await h.call('GET', `/api/v1/conversation/${id}/events/count?kind__eq=Bogus`),
      422,
      'VALIDATION_FAILED',
    );
    const many = Array.from({ length: 101 }, (_, i) => `id=${i + 1}`).join('&');
    expectError(await h.call('GET', `/api/v1/conversation/${id}/events?${many}`), 400, 'INVALID_IDS');
    expectError(
      await h.call('GET', `/api/v1/conversation/${id}/events?id=3387d26a-07df-48e8-add9-d60b19695f1f`),
      400,
      'INVALID_IDS',
    );
    expectError(await h.call('GET', `/api/v1/conversation/${id}/events`), 422, 'VALIDATION_FAILED');
  });

  it('Bob gets 404 for Alice’s conversation on every event route', async () => {
    const h = await harness();
    const id = await conversationWithWork(h);
    for (const path of [
      `/api/v1/conversation/${id}/events/search`,
      `/api/v1/conversation/${id}/events/count`,
      `/api/v1/conversation/${id}/events?id=1`,
    ]) {
      expectError(await h.call('GET', path, { key: KEY_B }), 404, 'CONVERSATION_NOT_FOUND');
    }
  });
});

describe('a conversation’s workspace: file, git, skills and hooks', () => {
  /** A running conversation on `acme/widgets` whose clone holds guidance files and a plan. */
  async function withRepository(h: Harness): Promise<{ id: string; sandboxId: string }> {
    const git = fakeGit();
    h.ports.runtime.onExec(
      (argv) => argv[0] === 'git' && argv[1] === 'clone',
      async (request, ctx) => {
        const result = await git(request, ctx);
        const dir = request.command.at(-1)!;
        for (const [path, text] of Object.entries({
          'AGENTS.md': 'Run `make check` before you commit.',
          '.openhands/microagents/deploy.md':
            '---\nname: deploying\ntriggers:\n- deploy\n- release\n---\nDeploy with `make ship`.',
          'PLAN.md': '# Plan\n1. fix it\n',
        })) {
          ctx.files.set(`${dir}/${path}`, new TextEncoder().encode(text));
        }
        return result;
      },
    );
    h.ports.llm.push({ content: 'Looked.' });
    const task = await startAppConversation(h, {
      initial_message: message('look'),
      selected_repository: 'acme/widgets',
    });
    await h.idle();
    return { id: task.app_conversation_id as string, sandboxId: task.sandbox_id as string };
  }

  it('file: the text of a file under /workspace/project (1.11’s layout), and "" for every failure, as 1.11 answers', async () => {
    const h = await harness();
    const { id } = await withRepository(h);
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}/file`)).toBe('# Plan\n1. fix it\n');
    expect(
      await ok(
        h,
        'GET',
        `/api/v1/app-conversations/${id}/file?file_path=${encodeURIComponent('/workspace/project/widgets/AGENTS.md')}`,
      ),
    ).toBe('Run `make check` before you commit.');
    expect(
      await ok(
        h,
        'GET',
        `/api/v1/app-conversations/${id}/file?file_path=${encodeURIComponent('/workspace/widgets/PLAN.md')}`,
      ),
    ).toBe('# Plan\n1. fix it\n');
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}/file?file_path=missing.md`)).toBe('');
    expect(
      await ok(h, 'GET', `/api/v1/app-conversations/${id}/file?file_path=${encodeURIComponent('/workspace/project')}`),
    ).toBe('');
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${'f'.repeat(32)}/file`)).toBe('');
    // Bob learns nothing of Alice's files.
    expect(await ok(h, 'GET', `/api/v1/app-conversations/${id}/file`, undefined, KEY_B)).toBe('');
    expectError(
      await h.call('GET', `/api/v1/app-conversations/${id}/file?file_path=${'x'.repeat(4097)}`),
      422,
      'VALIDATION_FAILED',
    );
  });

  it('git/changes and git/diff in the agent-server’s form; only HEAD as ref; 409 once the sandbox is paused; Bob 404', async () => {
    const h = await harness();
    const { id, sandboxId } = await withRepository(h);
    const calls: string[][] = [];
    h.ports.runtime.onExec(
      (argv) => argv[0] === 'git' && argv.includes('status'),
      (request) => {
        calls.push([...request.command]);
        return { stdout: ' M src/app.ts\0?? src/new.ts\0 D gone.txt\0' };
      },
    );
    const changes = await ok(
      h,
      'GET',
      `/api/v1/app-conversations/${id}/git/changes?path=${encodeURIComponent('/workspace/project/widgets')}&ref=HEAD`,
    );
    expect(changes).toEqual([
      { status: 'UPDATED', path: 'src/app.ts' },
      { status: 'ADDED', path: 'src/new.ts' },
      { status: 'DELETED', path: 'gone.txt' },
    ]);
    expect(calls[0]?.slice(0, 3)).toEqual(['git', '-C', '/workspace/widgets']);
    expect(
      (
        await h.ports.runtime.writeFile(
          sandboxId,
          '/workspace/widgets/src/new.ts',
          new TextEncoder().encode('export {};\n'),
        )
      ).isOk(),
    ).toBe(true);
    h.ports.runtime.onExec('sh', () => ({ exit_code: 1, stderr: 'fatal: not in HEAD\n' }));
    expect(
      await ok(
        h,
        'GET',
        `/api/v1/app-conversations/${id}/git/diff?path=${encodeURIComponent('/workspace/project/widgets/src/new.ts')}`,
      ),
    ).toEqual({ original: '', modified: 'export {};\n' });
    expectError(await h.call('GET', `/api/v1/app-conversations/${id}/git/changes?ref=main`), 422, 'VALIDATION_FAILED');
    expectError(await h.call('GET', `/api/v1/app-conversations/${id}/git/diff`), 422, 'VALIDATION_FAILED');
    for (const path of [
      `/api/v1/app-conversations/${id}/git/changes`,
      `/api/v1/app-conversations/${id}/git/diff?path=a`,
    ]) {
      expectError(await h.call('GET', path, { key: KEY_B }), 404, 'CONVERSATION_NOT_FOUND');
    }
    await ok(h, 'POST', `/api/v1/sandboxes/${sandboxId}/pause`);
    expectError(await h.call('GET', `/api/v1/app-conversations/${id}/git/changes`), 409, 'CONVERSATION_NOT_RUNNING');
  });

  it('skills: the repository’s guidance as SkillResponse; skills/search: a SkillPage of every repository’s, paged; hooks: none', async () => {
    const h = await harness();
    const { id } = await withRepository(h);
    const skills = obj(await ok(h, 'GET', `/api/v1/app-conversations/${id}/skills`));
    for (const skill of arr(skills.skills)) expectOpenHandsShape('SkillResponse', skill);
    expect(skills.skills).toEqual([
      { name: 'AGENTS.md', type: 'repo', content: 'Run `make check` before you commit.', triggers: [] },
      { name: 'deploying', type: 'knowledge', content: 'Deploy with `make ship`.', triggers: ['deploy', 'release'] },
    ]);
    const search = await ok(h, 'GET', '/api/v1/skills/search');
    expectOpenHandsShape('SkillPage', search);
    expect(items(search)).toEqual([
      { name: 'AGENTS.md', type: 'repo', source: 'acme/widgets', triggers: null },
      { name: 'deploying', type: 'knowledge', source: 'acme/widgets', triggers: ['deploy', 'release'] },
    ]);
    const first = await ok(h, 'GET', '/api/v1/skills/search?limit=1');
    expect(items(first).map((s) => s.name)).toEqual(['AGENTS.md']);
    const second = await ok(h, 'GET', `/api/v1/skills/search?limit=1&page_id=${obj(first).next_page_id as string}`);
    expect(items(second).map((s) => s.name)).toEqual(['deploying']);
    expect(obj(second).next_page_id).toBeNull();
    expectError(await h.call('GET', '/api/v1/skills/search?page_id=not%20a%20page'), 422, 'VALIDATION_FAILED');

    const hooks = await ok(h, 'GET', `/api/v1/app-conversations/${id}/hooks`);
    expect(hooks).toEqual({ hooks: [] });
    expectOpenHandsShape('GetHooksResponse', hooks);

    // Bob: none of it.
    expect(items(await ok(h, 'GET', '/api/v1/skills/search', undefined, KEY_B))).toEqual([]);
    for (const path of [`/api/v1/app-conversations/${id}/skills`, `/api/v1/app-conversations/${id}/hooks`]) {
      expectError(await h.call('GET', path, { key: KEY_B }), 404, 'CONVERSATION_NOT_FOUND');
    }
  });
});

describe('the OpenAPI document', () => {
  it('lists every 1.11 route served here', async () => {
    const h = await harness();
    const doc = obj(await ok(h, 'GET', '/api/openapi.json'));
    const operations = Object.entries(obj(doc.paths)).flatMap(([path, item]) =>
      Object.keys(obj(item)).map((method) => `${method.toUpperCase()} ${path}`),
    );
    for (const operation of [
      'GET /api/v1/app-conversations/search',
      'GET /api/v1/app-conversations/count',
      'GET /api/v1/app-conversations',
      'POST /api/v1/app-conversations',
      'POST /api/v1/app-conversations/stream-start',
      'PATCH /api/v1/app-conversations/{conversation_id}',
      'DELETE /api/v1/app-conversations/{conversation_id}',
      'POST /api/v1/app-conversations/{conversation_id}/send-message',
      'GET /api/v1/app-conversations/start-tasks/search',
      'GET /api/v1/app-conversations/start-tasks/count',
      'GET /api/v1/app-conversations/start-tasks',
      'GET /api/v1/app-conversations/{conversation_id}/file',
      'GET /api/v1/app-conversations/{conversation_id}/git/changes',
      'GET /api/v1/app-conversations/{conversation_id}/git/diff',
      'GET /api/v1/app-conversations/{conversation_id}/skills',
      'GET /api/v1/app-conversations/{conversation_id}/hooks',
      'GET /api/v1/app-conversations/{conversation_id}/download',
      'POST /api/v1/conversations/{conversation_id}/pending-messages',
      'GET /api/v1/conversation/{conversation_id}/events/search',
      'GET /api/v1/conversation/{conversation_id}/events/count',
      'GET /api/v1/conversation/{conversation_id}/events',
      'GET /api/v1/skills/search',
    ]) {
      expect(operations, operation).toContain(operation);
    }
  });
});
