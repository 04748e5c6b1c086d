/**
 * Repository preparation end to end: the example server process, Docker sandboxes in host
 * network mode, a real git server on 127.0.0.1 (git-http-backend checking the token), and the
 * scripted model server. Needs a Docker engine and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import type { EventPage, StartTask } from '@acs/core/schemas';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitServer, makeRepository } from '../../../packages/adapter-docker/test/git-server.js';
import { scriptedCompletion, marker, startFakeOpenAi, textOf, toolCall, type FakeOpenAi } from '@acs/testing';
import { call, startServer, type Running, body, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `repo-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const TOKEN = `glpat-${randomBytes(12).toString('hex')}`;
const env = {
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'host',
};

let llm: FakeOpenAi;
const git = new GitServer(TOKEN);

beforeAll(async () => {
  llm = await startFakeOpenAi();
  await git.start();
  makeRepository(git.root);
  llm.script('repo', (turn) =>
    turn === 0
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [
              toolCall('call_fetch', 'execute_bash', {
                command:
                  'git fetch origin && git rev-parse --abbrev-ref HEAD && git config user.name && cat .git/config',
              }),
            ],
          }),
        }
      : {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'On feature, fetched.' })],
          }),
        },
  );
});

afterAll(async () => {
  await llm.close();
  await git.stop();
  await removeContainersOf(docker, user);
});

const conversation = async (server: Running, id: string) =>
  (await body<(AppConversation | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY)))[0]!;
const events = async (server: Running, id: string) =>
  (await body<EventPage>(call(server.url, `/api/v1/app-conversations/${id}/events?after=0&limit=100`, KEY))).items;

const storeSettings = (server: Running, token: string) =>
  body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/scripted-model',
      llm_api_key: 'sk-scripted-repo-test',
      llm_base_url: llm.baseUrl,
      git_user_name: 'Rita Repo',
      git_user_email: 'rita@example.com',
      secrets_store: { provider_tokens: { gitlab: { token, host: git.url } } },
    }),
  );

describe('a conversation with a repository on the example server, in Docker, against a real git server', () => {
  it('clones at the branch, runs setup.sh, puts guidance in the prompt, lets the agent fetch, and shows the token nowhere', async () => {
    const server = await startServer(env);
    await storeSettings(server, TOKEN);
    const created = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, {
        repository: 'acme/widgets',
        git_provider: 'gitlab',
        selected_branch: 'feature',
        initial_user_msg: `${marker('repo')} Fetch, tell me the branch, and plan the release.`,
      }),
    );
    const id = created.conversation_id;
    await waitFor('the agent to finish', async () =>
      (await conversation(server, id)).execution_status === 'finished' ? true : undefined,
    );

    const log = await events(server, id);
    expect(log.filter((e) => e.kind === 'setup').map((e) => e.kind === 'setup' && e.step)).toEqual([
      'repository',
      'setup_script',
    ]);
    expect(log.find((e) => e.kind === 'setup' && e.step === 'setup_script')).toMatchObject({
      output: 'setup: preparing widgets\n',
      exit_code: 0,
    });
    const observation = log.find((e) => e.kind === 'observation' && e.tool_name === 'execute_bash');
    expect(observation).toMatchObject({ is_error: false, exit_code: 0 });
    const output = observation?.kind === 'observation' ? observation.content : '';
    expect(output).toContain('feature\nRita Repo');
    expect(output).toContain(`url = ${git.url}/acme/widgets.git`);

    const [first] = llm.requestsFor('repo');
    const system = textOf(first!.body.messages!.find((m) => m.role === 'system')!.content);
    expect(system).toContain('The working directory is /workspace/widgets');
    expect(system).toContain('Always run `make lint` before committing.');
    expect(textOf(first!.body.messages!.find((m) => m.role === 'user')!.content)).toContain(
      'Releases are cut with `make release`.',
    );

    // The token: not in the events, the conversation, the settings, or the server's logs.
    expect(JSON.stringify(log)).not.toContain(TOKEN);
    expect(JSON.stringify(await conversation(server, id))).not.toContain(TOKEN);
    expect(JSON.stringify(await body(call(server.url, '/api/settings', KEY)))).not.toContain(TOKEN);
    expect(server.stdout() + server.stderr()).not.toContain(TOKEN);
  });

  it('a refused token ends the V1 start task in ERROR with the reason in detail', async () => {
    const server = await startServer(env);
    const wrong = `glpat-wrong-${randomBytes(8).toString('hex')}`;
    await storeSettings(server, wrong);
    const task = await body<StartTask>(
      call(server.url, '/api/v1/app-conversations', KEY, {
        selected_repository: 'acme/widgets',
        selected_branch: 'main',
        git_provider: 'gitlab',
      }),
    );
    const done = await waitFor(
      'the start task to end',
      async () => {
        const [t] = await body<(StartTask | null)[]>(
          call(server.url, `/api/v1/app-conversations/start-tasks?ids=${task.id}`, KEY),
        );
        return t && (t.status === 'ERROR' || t.status === 'READY') ? t : undefined;
      },
      60_000,
    );
    expect(done.status).toBe('ERROR');
    expect(done.detail).toContain(`could not clone acme/widgets from ${git.url}`);
    expect(done.detail).toContain('the gitlab token was refused');
    const stopped = await conversation(server, done.app_conversation_id!);
    expect(stopped).toMatchObject({ conversation_status: 'STOPPED', status_detail: done.detail });
    expect(server.stdout() + server.stderr() + JSON.stringify(done)).not.toContain(wrong);
  });
});
