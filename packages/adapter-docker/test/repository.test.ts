import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import type { ConversationEvent, SettingsInput } from '@acs/core/schemas';
import { expectOk } from '@acs/core/testing';
import { createMemoryPorts, type ScriptedTurn } from '@acs/testing';
import { dockerRuntime } from './engine.js';
import { git, GitServer, makeRepository } from './git-server.js';
import { createAgent } from '@acs/agent';

const TOKEN = 'glpat-R3alT0ken-abcdef0123456789';
const specs = [{ id: 'bookworm', image: 'acs-sandbox:bookworm', working_dir: '/workspace' }];
const server = new GitServer(TOKEN);
let bare = '';
beforeAll(async () => {
  await server.start();
  bare = makeRepository(server.root);
});
afterAll(() => server.stop());

async function compose(user: string, settings: SettingsInput, turns: ScriptedTurn[] = []) {
  const runtime = await dockerRuntime({ networkMode: 'host' });
  const ports = createMemoryPorts({ specs });
  ports.llm.push(...turns);
  const service = createAgentConversationService({ agent: createAgent(), ...ports, runtime }, { pollIntervalMs: 20 });
  await expectOk(service.settings.store(user, { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-test', ...settings }));
  return { service, runtime, llm: ports.llm };
}

async function start(service: AgentConversationService, user: string, request: Record<string, unknown>) {
  const task = await expectOk(
    service.conversations.startApp(user, {
      initial_message: {
        role: 'user',
        content: [{ type: 'text', text: 'fetch and tell me the branch; then plan the release' }],
        run: true,
      },
      ...request,
    }),
  );
  await service.idle();
  const [done] = await expectOk(service.conversations.getStartTasks(user, [task.id]));
  const id = task.app_conversation_id!;
  const [conversation] = await expectOk(service.conversations.getMany(user, [id]));
  const events: ConversationEvent[] = (
    await expectOk(service.conversations.searchEvents(user, id, { after: 0, kinds: null, limit: 100 }))
  ).items;
  return { task: done!, conversation: conversation!, events };
}

const sh = async (runtime: Awaited<ReturnType<typeof dockerRuntime>>, sandboxId: string, script: string) => {
  const result = await expectOk(runtime.exec(sandboxId, { command: ['bash', '-c', script] }));
  return result.stdout.trim();
};

describe('repository preparation on Docker against a real git server', () => {
  it('clones at the branch with the identity, keeps the token out of .git/config and the events, runs setup.sh, and the agent fetches through the helper', async () => {
    const { service, runtime, llm } = await compose(
      'alice',
      {
        git_user_name: 'Alice Example',
        git_user_email: 'alice@example.com',
        secrets_store: { provider_tokens: { gitlab: { token: TOKEN, host: server.url } } },
      },
      [
        {
          tool_calls: [
            {
              name: 'execute_bash',
              arguments: { command: 'git fetch origin && git rev-parse --abbrev-ref HEAD && echo fetched-ok' },
            },
          ],
        },
        { tool_calls: [{ name: 'finish', arguments: { message: 'on feature' } }] },
      ],
    );
    try {
      const before = server.requests.length;
      const { task, conversation, events } = await start(service, 'alice', {
        selected_repository: 'acme/widgets',
        selected_branch: 'feature',
        git_provider: 'gitlab',
      });
      expect(task).toMatchObject({ status: 'READY', detail: null });
      // Clone and the agent's fetch: each asked without credentials first (401), then with the token from the helper.
      const seen = server.requests.slice(before);
      expect(seen.filter((r) => r.status === 401).length).toBeGreaterThanOrEqual(2);
      expect(
        seen.filter((r) => r.authorized && r.path.endsWith('/git-upload-pack') && r.status === 200).length,
      ).toBeGreaterThanOrEqual(2);
      const sandboxId = conversation.record.sandbox_id!;
      const repo = '/workspace/widgets';
      expect(await sh(runtime, sandboxId, `git -C ${repo} rev-parse --abbrev-ref HEAD`)).toBe('feature');
      expect(await sh(runtime, sandboxId, `git -C ${repo} config user.name; git -C ${repo} config user.email`)).toBe(
        'Alice Example\nalice@example.com',
      );
      expect(await sh(runtime, sandboxId, `cat ${repo}/feature.txt`)).toBe('feature work');
      // No token in the repository's config, in the global config, or in the remote URL.
      const configs = await sh(
        runtime,
        sandboxId,
        `cat ${repo}/.git/config ~/.gitconfig; git -C ${repo} remote get-url origin`,
      );
      expect(configs).toContain(`${server.url}/acme/widgets.git`);
      expect(configs).not.toContain(TOKEN);
      expect(await sh(runtime, sandboxId, `grep -rl '${TOKEN}' ${repo} || echo none`)).toBe('none');
      expect(
        await sh(
          runtime,
          sandboxId,
          'stat -c %a /opt/acs-git /opt/acs-git/credentials /opt/acs-git/credentials/127.0.0.1_*',
        ),
      ).toBe('700\n700\n600');
      // setup.sh ran in the repository root, and its output is an event.
      expect(await sh(runtime, sandboxId, `test -f ${repo}/.setup-done && echo yes`)).toBe('yes');
      expect(events.find((e) => e.kind === 'setup' && e.step === 'setup_script')).toMatchObject({
        output: 'setup: preparing widgets\n',
        exit_code: 0,
      });
      // The agent ran in the clone and fetched with the token through the credential helper.
      const observation = events.find((e) => e.kind === 'observation' && e.tool_name === 'execute_bash');
      expect(observation).toMatchObject({ is_error: false, exit_code: 0 });
      expect(observation?.kind === 'observation' && observation.content).toContain('feature\nfetched-ok');
      expect(JSON.stringify(events)).not.toContain(TOKEN);
      // Guidance reached the model: AGENTS.md in the system prompt, the release knowledge with the message.
      const [system, user] = llm.requests[0]!.messages;
      expect(system!.content).toContain('Always run `make lint` before committing.');
      expect(system!.content).toContain('The working directory is /workspace/widgets');
      expect(user!.content).toContain('Releases are cut with `make release`.');
      // The agent can also push through the helper.
      const pushed = await sh(
        runtime,
        sandboxId,
        `cd ${repo} && git commit -q --allow-empty -m agent-commit && git push -q origin feature 2>&1 && echo pushed`,
      );
      expect(pushed).toBe('pushed');
      expect(git(bare, 'log', '-1', '--format=%an %s', 'feature').trim()).toBe('Alice Example agent-commit');
    } finally {
      await service.close();
    }
  });

  it('a wrong token ends the start with a clear detail and a stopped conversation', async () => {
    const wrong = 'glpat-WRONG-token-999999';
    const { service } = await compose('bob', {
      secrets_store: { provider_tokens: { gitlab: { token: wrong, host: server.url } } },
    });
    try {
      const { task, conversation, events } = await start(service, 'bob', {
        selected_repository: 'acme/widgets',
        selected_branch: 'main',
        git_provider: 'gitlab',
      });
      expect(task.status).toBe('ERROR');
      expect(task.detail).toContain(`could not clone acme/widgets from ${server.url}`);
      expect(task.detail).toContain('the gitlab token was refused');
      expect(task.detail).not.toContain(wrong);
      expect(conversation).toMatchObject({ status: 'STOPPED', status_detail: task.detail });
      expect(events.some((e) => e.kind === 'error' && e.code === 'repository_setup_failed')).toBe(true);
      expect(JSON.stringify(events)).not.toContain(wrong);
    } finally {
      await service.close();
    }
  });

  it('a repository that does not exist and a host that does not answer end the start with git’s reason', async () => {
    const { service } = await compose('dave', {
      secrets_store: {
        provider_tokens: {
          gitlab: { token: TOKEN, host: server.url },
          github: { token: TOKEN, host: 'http://127.0.0.1:1' },
        },
      },
    });
    try {
      const missing = await start(service, 'dave', {
        selected_repository: 'acme/nothing-here',
        git_provider: 'gitlab',
      });
      expect(missing.task.status).toBe('ERROR');
      expect(missing.task.detail).toMatch(
        new RegExp(`^could not clone acme/nothing-here from ${server.url}: .*(not found|404)`, 'i'),
      );
      const unreachable = await start(service, 'dave', { selected_repository: 'acme/widgets', git_provider: 'github' });
      expect(unreachable.task.status).toBe('ERROR');
      expect(unreachable.task.detail).toMatch(
        /^could not clone acme\/widgets from http:\/\/127\.0\.0\.1:1: .*(connect|refused)/i,
      );
      expect(JSON.stringify([missing, unreachable])).not.toContain(TOKEN);
    } finally {
      await service.close();
    }
  });

  it('a missing branch is an error, not a silent default', async () => {
    const { service } = await compose('carol', {
      secrets_store: { provider_tokens: { gitlab: { token: TOKEN, host: server.url } } },
    });
    try {
      const { task, conversation } = await start(service, 'carol', {
        selected_repository: 'acme/widgets',
        selected_branch: 'no-such-branch',
        git_provider: 'gitlab',
      });
      expect(task).toMatchObject({ status: 'ERROR', detail: 'branch "no-such-branch" does not exist in acme/widgets' });
      expect(conversation.status).toBe('STOPPED');
    } finally {
      await service.close();
    }
  });
});
