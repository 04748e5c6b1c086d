/**
 * The other fields of the V0 creation request end to end: conversation_instructions,
 * suggested_task, create_microagent, image_urls and conversation_id, on the example server
 * process with Docker sandboxes and the scripted model server. suggested_task and
 * create_microagent name a repository, which is cloned: a real git server on 127.0.0.1 serves
 * it (as in repository-docker.test.ts), so the sandboxes run in host network mode.
 * Needs a Docker engine and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import type { ConversationEvent, EventPage } from '@acs/core/schemas';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitServer, makeRepository } from '../../../packages/adapter-docker/test/git-server.js';
import {
  scriptedCompletion,
  marker,
  startFakeOpenAi,
  textOf,
  toolCall,
  type ChatMessage,
  type FakeOpenAi,
} from '@acs/testing';
import { call, startServer, type Running, body, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `fields-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const TOKEN = `glpat-${randomBytes(12).toString('hex')}`;
const env = (extra: Record<string, string> = {}) => ({
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  // Nothing here needs to outlive the process: memory storage starts faster than PGlite.
  ACS_STORAGE: 'memory',
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'host',
  // Seven conversations run at once, each in its own sandbox (the default cap is 5).
  ACS_MAX_RUNNING_SANDBOXES: '10',
  ...extra,
});

const SCRIPTS = [
  'instructions',
  'plain',
  'suggested',
  'microagent',
  'images',
  'clientid',
  'longid',
  'defaultid',
] as const;
const INSTRUCTIONS = `Answer in haiku only. Instruction tag ${randomBytes(6).toString('hex')}.`;
const HTTPS_IMAGE = 'https://images.example.com/cat.png?size=large';
const DATA_IMAGE =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

let llm: FakeOpenAi;
const git = new GitServer(TOKEN);

beforeAll(async () => {
  llm = await startFakeOpenAi();
  await git.start();
  makeRepository(git.root);
  // Every conversation here finishes on its first call: what matters is what that call was sent.
  for (const name of SCRIPTS) {
    llm.script(name, (turn) => ({
      status: 200,
      body: scriptedCompletion(turn, {
        content: null,
        tool_calls: [toolCall(`call_finish_${name}_${turn}`, 'finish', { message: `${name} done.` })],
      }),
    }));
  }
});

afterAll(async () => {
  await llm.close();
  await git.stop();
  await removeContainersOf(docker, user);
});

const conversation = async (server: Running, id: string) =>
  (await body<(AppConversation | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY)))[0];
const events = async (server: Running, id: string) =>
  (await body<EventPage>(call(server.url, `/api/v1/app-conversations/${id}/events?after=0&limit=100`, KEY))).items;
const count = (server: Running) => body<number>(call(server.url, '/api/v1/app-conversations/count', KEY));

/** Waits until the agent finished; on an error, fails with the conversation's events, which say why. */
const untilFinished = (server: Running, id: string) =>
  waitFor(
    `conversation ${id} to finish`,
    async () => {
      const c = await conversation(server, id);
      if (c?.execution_status === 'error' || c?.conversation_status === 'STOPPED') {
        throw new Error(
          `conversation ${id} ended ${c.execution_status}/${c.conversation_status}: ${JSON.stringify(await events(server, id))}`,
        );
      }
      return c?.execution_status === 'finished' ? c : undefined;
    },
    60_000,
  );

const create = (server: Running, request: Record<string, unknown>) =>
  call(server.url, '/api/conversations', KEY, request);
const created = async (server: Running, request: Record<string, unknown>) =>
  (await body<{ conversation_id: string }>(create(server, request))).conversation_id;

const storeSettings = (server: Running) =>
  body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/scripted-model',
      llm_api_key: 'sk-scripted-fields-test',
      llm_base_url: llm.baseUrl,
      secrets_store: { provider_tokens: { gitlab: { token: TOKEN, host: git.url } } },
    }),
  );

/** The first (and here only) request the model got for a script, and its system and user messages. */
function firstRequest(name: string): { system: string; users: ChatMessage[] } {
  const requests = llm.requestsFor(name);
  expect(requests, `requests for ${name}`).toHaveLength(1);
  const messages = requests[0]!.body.messages ?? [];
  expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
  return { system: textOf(messages[0]!.content), users: messages.filter((m) => m.role === 'user') };
}

interface ErrorBody {
  code: string;
  message: string;
  issues?: { path: string; message: string }[];
}

describe('the other request fields on the example server, in Docker, with a scripted model', () => {
  it('instructions, suggested tasks, microagent requests, images and client-chosen ids reach the model and the API as promised', async () => {
    const server = await startServer(env({ ACS_ALLOW_CLIENT_CONVERSATION_IDS: 'true' }));
    await storeSettings(server);
    const clientId = `Client-Chosen_${randomBytes(6).toString('hex')}`;
    /** The longest id allowed: 100 characters. */
    const longId = `L${randomBytes(4).toString('hex')}`.padEnd(100, '-x');

    // All at once: each gets its own container, and they start in parallel.
    const [instructions, plain, suggested, microagent, images, chosen, long] = await Promise.all([
      created(server, {
        initial_user_msg: `${marker('instructions')} Describe the weather.`,
        conversation_instructions: INSTRUCTIONS,
      }),
      created(server, { initial_user_msg: `${marker('plain')} Describe the weather.` }),
      // The marker rides in the title, so the first message is nothing but our template.
      created(server, {
        suggested_task: {
          repo: 'acme/widgets',
          issue_number: 42,
          title: `Crash on empty input ${marker('suggested')}`,
        },
      }),
      created(server, {
        create_microagent: { repo: 'acme/widgets', title: `Testing conventions ${marker('microagent')}` },
      }),
      created(server, {
        initial_user_msg: `${marker('images')} What is in these pictures?`,
        image_urls: [HTTPS_IMAGE, DATA_IMAGE],
      }),
      created(server, { initial_user_msg: `${marker('clientid')} Say hello.`, conversation_id: clientId }),
      created(server, { initial_user_msg: `${marker('longid')} Say hello.`, conversation_id: longId }),
    ]);
    expect(chosen).toBe(clientId);
    expect(long).toBe(longId);
    await Promise.all(
      [instructions, plain, suggested, microagent, images, chosen, long].map((id) => untilFinished(server, id)),
    );

    // (1) conversation_instructions: in this conversation's system prompt, and only there.
    const withInstructions = firstRequest('instructions');
    expect(withInstructions.system).toContain(
      `<CONVERSATION_INSTRUCTIONS>\n${INSTRUCTIONS}\n</CONVERSATION_INSTRUCTIONS>`,
    );
    expect(textOf(withInstructions.users[0]!.content)).toBe(`${marker('instructions')} Describe the weather.`);
    const without = firstRequest('plain');
    expect(without.system).not.toContain(INSTRUCTIONS);
    expect(without.system).not.toContain('CONVERSATION_INSTRUCTIONS');
    for (const name of SCRIPTS.filter((n) => n !== 'instructions' && n !== 'defaultid'))
      expect(firstRequest(name).system).not.toContain(INSTRUCTIONS);
    expect(await body(call(server.url, `/api/conversations/${plain}`, KEY))).toMatchObject({
      trigger: 'gui',
      selected_repository: null,
    });

    // (2) suggested_task: our template as the first message, the repository cloned, trigger suggested_task.
    const task = firstRequest('suggested');
    const taskText = textOf(task.users[0]!.content);
    expect(taskText).toMatch(
      new RegExp(
        `^Please resolve issue #42 of the repository acme/widgets: "Crash on empty input \\[script:suggested\\]"\\.\n`,
      ),
    );
    expect(taskText).toContain('Reproduce the problem');
    expect(taskText).toContain('references the issue');
    expect(taskText).not.toContain('Also, from the user');
    expect(task.system).toContain('The repository acme/widgets is cloned in the working directory');
    expect(await body(call(server.url, `/api/conversations/${suggested}`, KEY))).toMatchObject({
      conversation_id: suggested,
      trigger: 'suggested_task',
      selected_repository: 'acme/widgets',
    });
    expect(
      (await events(server, suggested)).filter((e) => e.kind === 'setup').map((e) => e.kind === 'setup' && e.step),
    ).toEqual(['repository', 'setup_script']);

    // (3) create_microagent: our template, naming the microagents directory; trigger microagent_management.
    const agentRequest = firstRequest('microagent');
    const agentText = textOf(agentRequest.users[0]!.content);
    expect(agentText).toMatch(
      /^Please write a microagent for the repository acme\/widgets, about: "Testing conventions \[script:microagent\]"\.\n/,
    );
    expect(agentText).toContain('.openhands/microagents/');
    expect(agentText).toContain('triggers:');
    expect(agentRequest.system).toContain('The repository acme/widgets is cloned in the working directory');
    expect(await body(call(server.url, `/api/conversations/${microagent}`, KEY))).toMatchObject({
      trigger: 'microagent_management',
      selected_repository: 'acme/widgets',
    });

    // (4) image_urls: image parts of the first user message, in the OpenAI format; the event keeps them.
    const withImages = firstRequest('images');
    expect(withImages.users[0]!.content as unknown).toEqual([
      { type: 'text', text: `${marker('images')} What is in these pictures?` },
      { type: 'image_url', image_url: { url: HTTPS_IMAGE } },
      { type: 'image_url', image_url: { url: DATA_IMAGE } },
    ]);
    const first = (await events(server, images)).find(
      (e): e is Extract<ConversationEvent, { kind: 'message' }> => e.kind === 'message',
    );
    expect(first).toMatchObject({ source: 'user', image_urls: [HTTPS_IMAGE, DATA_IMAGE] });

    // (5) conversation_id: used as given.
    expect(await body(call(server.url, `/api/conversations/${clientId}`, KEY))).toMatchObject({
      conversation_id: clientId,
      trigger: 'gui',
    });
    expect(await conversation(server, clientId)).toMatchObject({ id: clientId, execution_status: 'finished' });
    expect(textOf(firstRequest('clientid').users[0]!.content)).toBe(`${marker('clientid')} Say hello.`);
    expect(longId).toHaveLength(100);
    expect(await body(call(server.url, `/api/conversations/${longId}`, KEY))).toMatchObject({
      conversation_id: longId,
    });

    // Refusals create nothing.
    const before = await count(server);
    expect(before).toBe(7);
    const refused = async (request: Record<string, unknown>, status: number) =>
      body<ErrorBody>(create(server, request), status);

    for (const bad of ['file:///etc/passwd', 'ftp://images.example.com/cat.png', 'javascript:alert(1)']) {
      const error = await refused(
        { initial_user_msg: `${marker('images')} Look.`, image_urls: [HTTPS_IMAGE, bad] },
        422,
      );
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.issues?.map((i) => i.path)).toEqual(['image_urls.1']);
    }

    const taken = await refused({ initial_user_msg: `${marker('clientid')} Again.`, conversation_id: clientId }, 409);
    expect(taken.message).toContain(clientId);
    for (const bad of [
      'has spaces in it',
      'semi;colon',
      '../escape',
      '-leading-dash',
      'é-accent',
      'a'.repeat(101),
      '',
      'count',
      'Search',
      'start-tasks',
    ]) {
      const error = await refused({ initial_user_msg: `${marker('clientid')} Bad id.`, conversation_id: bad }, 422);
      expect(error.code, bad).toBe('VALIDATION_FAILED');
      // An empty id breaks two rules (length and characters): one issue each, both on the field.
      expect([...new Set(error.issues?.map((i) => i.path))], bad).toEqual(['conversation_id']);
    }
    expect(await count(server)).toBe(before);
    // The model was not called for any refused request.
    expect(llm.requestsFor('images')).toHaveLength(1);
    expect(llm.requestsFor('clientid')).toHaveLength(1);
  });

  it('refuses conversation_id with 422 on a server that does not allow client-chosen ids', async () => {
    // Only the validation is exercised: fake sandboxes start fastest.
    const server = await startServer(env({ ACS_SANDBOXES: 'fake' }));
    await storeSettings(server);
    const error = await body<ErrorBody>(
      create(server, {
        initial_user_msg: `${marker('defaultid')} Say hello.`,
        conversation_id: `my-own-id-${randomBytes(4).toString('hex')}`,
      }),
      422,
    );
    expect(error.code).toBe('VALIDATION_FAILED');
    expect(error.issues).toEqual([
      {
        path: 'conversation_id',
        message: expect.stringContaining('does not accept client-chosen conversation ids') as unknown,
      },
    ]);
    expect(await count(server)).toBe(0);
    // Without the field, the same request is fine and the server picks the id.
    const id = await created(server, { initial_user_msg: `${marker('defaultid')} Say hello.` });
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(await count(server)).toBe(1);
  });
});
