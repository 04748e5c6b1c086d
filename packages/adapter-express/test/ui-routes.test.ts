import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  arr,
  createConversation,
  errorCode,
  KEY_B,
  LLM_SETTINGS,
  obj,
  startHarness,
  storeSettings,
  type Harness,
} from './harness.js';

/**
 * The routes the OpenHands web UI calls besides settings and conversations: options, custom
 * secrets, rename, the panels around the chat (answered from the sandbox through the runtime
 * port) and the agent-server routes that take a conversation's own key.
 */

let harnesses: Harness[] = [];

afterEach(async () => {
  await Promise.all(harnesses.map((h) => h.close()));
  harnesses = [];
});

async function harness(): Promise<Harness> {
  const h = await startHarness();
  harnesses.push(h);
  await storeSettings(h, LLM_SETTINGS);
  return h;
}

const bytes = (text: string) => new TextEncoder().encode(text);
const MIB = 1024 * 1024;

/** What `git cat-file` finds in HEAD: a small file, one of 3 MiB, and a binary one. */
const HEAD_FILES = new Map([
  ['HEAD:src/app.ts', 'export const answer = 41;\n'],
  ['HEAD:big.log', `${'committed line\n'.repeat(3 * 65_536)}`],
  ['HEAD:image.png', `\x89PNG\r\n\x1a\n\0\0\0\rIHDR`],
]);

/** A running conversation whose sandbox holds a small project under git. */
async function conversationWithFiles(h: Harness) {
  h.ports.llm.push({ content: 'Ready.' });
  const id = await createConversation(h, { initial_user_msg: 'look around' });
  await h.idle();
  const info = obj((await h.call('GET', `/api/conversations/${id}`)).body);
  const sandboxId = info.sandbox_id as string;
  for (const [path, text] of [
    ['/workspace/README.md', '# demo\n'],
    ['/workspace/src/app.ts', 'export const answer = 42;\n'],
    ['/workspace/src/new.ts', 'export {};\n'],
  ] as const) {
    const written = await h.ports.runtime.writeFile(sandboxId, path, bytes(text));
    expect(written.isOk()).toBe(true);
  }
  const gitCalls: string[][] = [];
  h.ports.runtime.onExec('git', (request) => {
    gitCalls.push([...request.command]);
    const args = request.command.slice(3); // git -C <dir> …
    if (args[0] === 'status')
      return { stdout: ' M src/app.ts\0?? src/new.ts\0R  docs/new-name.md\0docs/old-name.md\0 D gone.txt\0' };
    return { exit_code: 0 };
  });
  // The HEAD side of a diff: a fixed script with the directory, the object and a byte limit as arguments.
  h.ports.runtime.onExec('sh', (request) => {
    const [, , , , dir, object, limit] = request.command;
    gitCalls.push([...request.command]);
    if (object === 'HEAD:unbounded.log')
      return { stdout: `${Buffer.byteLength(HEAD_FILES.get('HEAD:big.log')!)}\n${HEAD_FILES.get('HEAD:big.log')!}` };
    const committed = dir === '/workspace' ? HEAD_FILES.get(object ?? '') : undefined;
    if (committed === undefined) return { exit_code: 1, stderr: `fatal: path '${object}' does not exist in 'HEAD'\n` };
    // As `head -c` cuts it: at most `limit` bytes (this text is ASCII).
    return { stdout: `${Buffer.byteLength(committed)}\n${committed.slice(0, Number(limit))}` };
  });
  return { id, info, sandboxId, gitCalls };
}

describe('options', () => {
  it('config is open and says OSS; models, agents and analyzers need a key', async () => {
    const h = await harness();
    const config = await h.call('GET', '/api/options/config', { key: null });
    expect(config.status).toBe(200);
    expect(obj(config.body)).toMatchObject({ APP_MODE: 'oss', POSTHOG_CLIENT_KEY: '', PROVIDERS_CONFIGURED: [] });
    expect(obj(obj(config.body).FEATURE_FLAGS)).toMatchObject({ ENABLE_BILLING: false, HIDE_LLM_SETTINGS: false });

    for (const path of ['/api/options/models', '/api/options/agents', '/api/options/security-analyzers']) {
      expect((await h.call('GET', path, { key: null })).status).toBe(401);
    }
    // Without a model list (no LLM adapter told the router its prices) the UI offers none and users type their own.
    expect((await h.call('GET', '/api/options/models')).body).toEqual([]);
    expect((await h.call('GET', '/api/options/agents')).body).toEqual(['CodeActAgent']);
    expect((await h.call('GET', '/api/options/security-analyzers')).body).toEqual(['llm', 'rules', 'ensemble']);
  });

  it('models: the host’s list, sorted, each once', async () => {
    const h = await startHarness({
      router: { models: () => ['openai/local-coder', 'anthropic/claude-sonnet-4', 'openai/local-coder'] },
    });
    harnesses.push(h);
    expect((await h.call('GET', '/api/options/models')).body).toEqual([
      'anthropic/claude-sonnet-4',
      'openai/local-coder',
    ]);
  });
});

describe('custom secrets', () => {
  it('create, list (names and descriptions only), rename, delete; values never come back', async () => {
    const h = await harness();
    const value = 'ghp_value-that-must-never-be-shown-0001';
    expect((await h.call('GET', '/api/secrets')).body).toEqual({ custom_secrets: [] });
    const created = await h.call('POST', '/api/secrets', {
      body: { name: 'DEPLOY_TOKEN', value, description: 'for the staging deploy' },
    });
    expect(created.status).toBe(200);
    expect((await h.call('GET', '/api/secrets')).body).toEqual({
      custom_secrets: [{ name: 'DEPLOY_TOKEN', description: 'for the staging deploy' }],
    });

    const taken = await h.call('POST', '/api/secrets', { body: { name: 'DEPLOY_TOKEN', value: 'other' } });
    expect(taken.status).toBe(409);
    expect(errorCode(taken.body)).toBe('SECRET_NAME_TAKEN');

    const renamed = await h.call('PUT', '/api/secrets/DEPLOY_TOKEN', {
      body: { name: 'STAGING_TOKEN', description: null },
    });
    expect(renamed.status).toBe(200);
    expect((await h.call('GET', '/api/secrets')).body).toEqual({
      custom_secrets: [{ name: 'STAGING_TOKEN', description: null }],
    });
    // The settings show it as set, by name, and the value survives the rename.
    const settings = obj((await h.call('GET', '/api/settings')).body);
    expect(obj(obj(settings.secrets_store).custom_secrets)).toEqual({ STAGING_TOKEN: { description: null } });

    // Bob sees none of it.
    await storeSettings(h, LLM_SETTINGS, KEY_B);
    expect((await h.call('GET', '/api/secrets', { key: KEY_B })).body).toEqual({ custom_secrets: [] });
    expect((await h.call('DELETE', '/api/secrets/STAGING_TOKEN', { key: KEY_B })).status).toBe(404);

    expect((await h.call('DELETE', '/api/secrets/STAGING_TOKEN')).status).toBe(200);
    expect((await h.call('GET', '/api/secrets')).body).toEqual({ custom_secrets: [] });
    const missing = await h.call('PUT', '/api/secrets/STAGING_TOKEN', { body: { name: 'X' } });
    expect(missing.status).toBe(404);
    expect(errorCode(missing.body)).toBe('SECRET_NOT_FOUND');

    expect(h.responses.some((text) => text.includes(value))).toBe(false);
    expect(h.logger.lines.some((line) => line.includes(value))).toBe(false);
  });

  it('refuses bad names and bodies with 422 and stores nothing', async () => {
    const h = await harness();
    for (const body of [
      { name: 'has space', value: 'v' },
      { name: 'OK', value: '' },
      { name: 'OK' },
      { name: 'OK', value: 'v', extra: 1 },
      { name: '1ABC', value: 'v' },
    ]) {
      const r = await h.call('POST', '/api/secrets', { body });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    expect((await h.call('GET', '/api/secrets')).body).toEqual({ custom_secrets: [] });
  });

  it('git provider tokens: stored write-only, shown as set, removed all at once', async () => {
    const h = await harness();
    const token = 'ghp_provider-token-never-shown-000000';
    expect(
      (
        await h.call('POST', '/api/add-git-providers', {
          body: { provider_tokens: { github: { token, host: 'github.com' } } },
        })
      ).status,
    ).toBe(200);
    const settings = obj((await h.call('GET', '/api/settings')).body);
    expect(obj(settings.provider_tokens_set)).toHaveProperty('github');
    expect((await h.call('POST', '/api/unset-provider-tokens')).status).toBe(200);
    expect(obj(obj((await h.call('GET', '/api/settings')).body).provider_tokens_set)).toEqual({});
    expect(h.responses.some((text) => text.includes(token))).toBe(false);
  });
});

describe('rename', () => {
  it('PATCH sets the title; empty titles, unknown fields and other users are refused', async () => {
    const h = await harness();
    h.ports.llm.push({ content: 'Hi.' });
    const id = await createConversation(h);
    const r = await h.call('PATCH', `/api/conversations/${id}`, { body: { title: '  Fix the login page  ' } });
    expect(r.status).toBe(200);
    expect(r.body).toBe(true);
    expect(obj((await h.call('GET', `/api/conversations/${id}`)).body).title).toBe('Fix the login page');

    for (const body of [{ title: '   ' }, { title: 'x'.repeat(201) }, { title: 'ok', other: 1 }, {}]) {
      expect((await h.call('PATCH', `/api/conversations/${id}`, { body })).status, JSON.stringify(body)).toBe(422);
    }
    await storeSettings(h, LLM_SETTINGS, KEY_B);
    expect(
      (await h.call('PATCH', `/api/conversations/${id}`, { key: KEY_B, body: { title: 'mine now' } })).status,
    ).toBe(404);
    expect(obj((await h.call('GET', `/api/conversations/${id}`)).body).title).toBe('Fix the login page');
  });
});

describe('panels', () => {
  it('config, list-files, select-file from the sandbox', async () => {
    const h = await harness();
    const { id, sandboxId } = await conversationWithFiles(h);
    expect((await h.call('GET', `/api/conversations/${id}/config`)).body).toEqual({
      runtime_id: sandboxId,
      session_id: id,
    });

    const root = arr((await h.call('GET', `/api/conversations/${id}/list-files`)).body);
    expect(root).toEqual(expect.arrayContaining(['README.md', 'src/']));
    const src = arr((await h.call('GET', `/api/conversations/${id}/list-files?path=src`)).body);
    expect([...src].sort()).toEqual(['src/app.ts', 'src/new.ts']);
    expect((await h.call('GET', `/api/conversations/${id}/list-files?path=nowhere`)).body).toEqual([]);

    expect((await h.call('GET', `/api/conversations/${id}/select-file?file=src/app.ts`)).body).toEqual({
      code: 'export const answer = 42;\n',
    });
    const missing = await h.call('GET', `/api/conversations/${id}/select-file?file=nope.txt`);
    expect(missing.status).toBe(404);
    expect(errorCode(missing.body)).toBe('FILE_NOT_FOUND');
    expect((await h.call('GET', `/api/conversations/${id}/select-file`)).status).toBe(422);
  });

  it('git/changes and git/diff run git in the sandbox as argv and map its statuses', async () => {
    const h = await harness();
    const { id, gitCalls } = await conversationWithFiles(h);
    const changes = await h.call('GET', `/api/conversations/${id}/git/changes`);
    expect(changes.status).toBe(200);
    expect(changes.body).toEqual([
      { status: 'M', path: 'src/app.ts' },
      { status: 'A', path: 'src/new.ts' },
      { status: 'R', path: 'docs/new-name.md' },
      { status: 'D', path: 'gone.txt' },
    ]);
    expect(gitCalls[0]).toEqual(['git', '-C', '/workspace', 'status', '--porcelain=v1', '-uall', '-z']);

    expect((await h.call('GET', `/api/conversations/${id}/git/diff?path=src/app.ts`)).body).toEqual({
      original: 'export const answer = 41;\n',
      modified: 'export const answer = 42;\n',
    });
    expect((await h.call('GET', `/api/conversations/${id}/git/diff?path=src/new.ts`)).body).toEqual({
      original: '',
      modified: 'export {};\n',
    });
    expect((await h.call('GET', `/api/conversations/${id}/git/diff?path=gone.txt`)).body).toEqual({
      original: '',
      modified: '',
    });
    expect(gitCalls.filter((c) => c.includes('HEAD:src/app.ts'))).toEqual([
      [
        'sh',
        '-c',
        expect.stringContaining('cat-file blob "$2" | head -c "$3"'),
        'sh',
        '/workspace',
        'HEAD:src/app.ts',
        String(MIB),
      ],
    ]);
  });

  it('git/diff shows the first MiB of each side of a large file, saying how large it is, and a note for binary content', async () => {
    const h = await harness();
    const { id, sandboxId } = await conversationWithFiles(h);
    const committedSize = Buffer.byteLength(HEAD_FILES.get('HEAD:big.log')!);
    const current = 'current line\n'.repeat(3 * 65_536);
    expect((await h.ports.runtime.writeFile(sandboxId, '/workspace/big.log', bytes(current))).isOk()).toBe(true);
    const diff = obj((await h.call('GET', `/api/conversations/${id}/git/diff?path=big.log`)).body);
    expect(diff.original).toBe(
      `${'committed line\n'.repeat(3 * 65_536).slice(0, MIB)}\n[… clipped: the first ${MIB} of ${committedSize} bytes are shown]`,
    );
    expect(diff.modified).toBe(
      `${current.slice(0, MIB)}\n[… clipped: the first ${MIB} of ${current.length} bytes are shown]`,
    );
    // A sandbox whose `head` does not cut: the runtime keeps what the service asked for, and the note is the service's.
    const unbounded = obj((await h.call('GET', `/api/conversations/${id}/git/diff?path=unbounded.log`)).body);
    expect(unbounded.original).toBe(
      `${'committed line\n'.repeat(3 * 65_536).slice(0, MIB + 32 - `${committedSize}\n`.length)}\n[… clipped: the first ${MIB} of ${committedSize} bytes are shown]`,
    );

    const png = new Uint8Array([
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 1, 2, 3,
    ]);
    expect((await h.ports.runtime.writeFile(sandboxId, '/workspace/image.png', png)).isOk()).toBe(true);
    expect((await h.call('GET', `/api/conversations/${id}/git/diff?path=image.png`)).body).toEqual({
      original: `[binary file, ${Buffer.byteLength(HEAD_FILES.get('HEAD:image.png')!)} bytes: not shown]`,
      modified: '[binary file, 19 bytes: not shown]',
    });
    // A directory has no diff of its own: both sides are empty, as for a file that is not there.
    expect((await h.call('GET', `/api/conversations/${id}/git/diff?path=src`)).body).toEqual({
      original: '',
      modified: '',
    });
  });

  it('select-file: a directory is a 400 pointing to list-files, a large file is clipped with its size, binary content is a note', async () => {
    const h = await harness();
    const { id, sandboxId } = await conversationWithFiles(h);
    const readFile = vi.spyOn(h.ports.runtime, 'readFile');
    for (const file of ['src', '/workspace', '/']) {
      const r = await h.call('GET', `/api/conversations/${id}/select-file?file=${encodeURIComponent(file)}`);
      expect(r.status, file).toBe(400);
      expect(errorCode(r.body)).toBe('PATH_IS_DIRECTORY');
      expect(obj(r.body).message).toContain(`${file} in the workspace of conversation ${id} is a directory`);
      expect(obj(r.body).message).toContain('/list-files');
    }

    // 2 MiB and a bit, with a 3-byte character across the 1 MiB cut: it is left out, not shown as U+FFFD.
    const large = `${'x'.repeat(MIB - 1)}€${'y'.repeat(MIB)}`;
    expect((await h.ports.runtime.writeFile(sandboxId, '/workspace/large.txt', bytes(large))).isOk()).toBe(true);
    const clipped = obj((await h.call('GET', `/api/conversations/${id}/select-file?file=large.txt`)).body).code;
    expect(clipped).toBe(`${'x'.repeat(MIB - 1)}\n[… clipped: the first ${MIB} of ${MIB + 2 + MIB} bytes are shown]`);

    expect(
      (await h.ports.runtime.writeFile(sandboxId, '/workspace/data.bin', new Uint8Array([1, 2, 0, 3]))).isOk(),
    ).toBe(true);
    expect((await h.call('GET', `/api/conversations/${id}/select-file?file=data.bin`)).body).toEqual({
      code: '[binary file, 4 bytes: not shown]',
    });
    // The runtime was asked for no more than the panel shows.
    expect(readFile.mock.calls.map(([, path, options]) => [path, options])).toEqual([
      ...['/workspace/src', '/workspace', '/'].map((path) => [path, { maxBytes: MIB }]),
      ['/workspace/large.txt', { maxBytes: MIB }],
      ['/workspace/data.bin', { maxBytes: MIB }],
    ]);
  });

  it('select-file follows symbolic links in the sandbox; a dangling link or a loop is a 404', async () => {
    const h = await harness();
    const { id, sandboxId } = await conversationWithFiles(h);
    const ln = async (target: string, link: string) =>
      expect(
        (await h.ports.runtime.exec(sandboxId, { command: ['ln', '-s', target, link] }))._unsafeUnwrap().exit_code,
      ).toBe(0);
    await ln('app.ts', 'src/current.ts');
    await ln('/workspace/src', 'source');
    await ln('nowhere', 'dangling');
    await ln('loop-b', 'loop-a');
    await ln('loop-a', 'loop-b');
    for (const file of ['src/current.ts', 'source/app.ts', 'source/current.ts']) {
      expect((await h.call('GET', `/api/conversations/${id}/select-file?file=${file}`)).body, file).toEqual({
        code: 'export const answer = 42;\n',
      });
    }
    for (const file of ['dangling', 'loop-a']) {
      const r = await h.call('GET', `/api/conversations/${id}/select-file?file=${file}`);
      expect(r.status, file).toBe(404);
      expect(errorCode(r.body)).toBe('FILE_NOT_FOUND');
    }
    expect((await h.call('GET', `/api/conversations/${id}/select-file?file=source`)).status).toBe(400);
  });

  it('list-files names entries outside the working directory absolutely, with one slash: / gives /workspace/, not //workspace/', async () => {
    const h = await harness();
    const { id } = await conversationWithFiles(h);
    expect((await h.call('GET', `/api/conversations/${id}/list-files?path=/`)).body).toEqual(['/workspace/']);
    expect(
      [...arr((await h.call('GET', `/api/conversations/${id}/list-files?path=/workspace/src`)).body)].sort(),
    ).toEqual(['src/app.ts', 'src/new.ts']);
    expect((await h.call('GET', `/api/conversations/${id}/list-files?path=/workspace`)).body).toEqual(
      expect.arrayContaining(['README.md', 'src/']),
    );
  });

  it('trajectory is the V0 form of the whole log; microagents, web-hosts and vscode-url answer cleanly', async () => {
    const h = await harness();
    const { id } = await conversationWithFiles(h);
    const trajectory = arr(obj((await h.call('GET', `/api/conversations/${id}/trajectory`)).body).trajectory).map(obj);
    expect(trajectory.map((e) => e.id)).toEqual([...trajectory.map((e) => e.id)].sort((a, b) => Number(a) - Number(b)));
    expect(trajectory.find((e) => e.source === 'user' && e.action === 'message')).toMatchObject({
      message: 'look around',
    });
    expect(trajectory.find((e) => e.source === 'agent' && e.action === 'message')).toMatchObject({ message: 'Ready.' });

    expect((await h.call('GET', `/api/conversations/${id}/microagents`)).body).toEqual({ microagents: [] });
    expect((await h.call('GET', `/api/conversations/${id}/web-hosts`)).body).toEqual({ hosts: {} });
    expect((await h.call('GET', `/api/conversations/${id}/vscode-url`)).body).toEqual({ vscode_url: null });
  });

  it('a stopped conversation answers 409 CONVERSATION_NOT_RUNNING; another user 404; the sandbox is never asked', async () => {
    const h = await harness();
    const { id } = await conversationWithFiles(h);
    await storeSettings(h, LLM_SETTINGS, KEY_B);
    for (const path of [
      'list-files',
      'select-file?file=README.md',
      'git/changes',
      'git/diff?path=README.md',
      'config',
      'trajectory',
      'microagents',
    ]) {
      const r = await h.call('GET', `/api/conversations/${id}/${path}`, { key: KEY_B });
      expect(r.status, path).toBe(404);
      expect(errorCode(r.body)).toBe('CONVERSATION_NOT_FOUND');
    }

    expect((await h.call('POST', `/api/conversations/${id}/stop`)).status).toBe(200);
    await h.idle();
    const looks = () =>
      h.ports.runtime.calls.filter((c) => ['exec', 'readFile', 'listDirectory'].includes(c.operation)).length;
    const before = looks();
    for (const path of ['list-files', 'select-file?file=README.md', 'git/changes', 'git/diff?path=README.md']) {
      const r = await h.call('GET', `/api/conversations/${id}/${path}`);
      expect(r.status, path).toBe(409);
      expect(errorCode(r.body)).toBe('CONVERSATION_NOT_RUNNING');
    }
    expect(looks()).toBe(before);
  });
});

describe("a conversation's own key", () => {
  it('opens that conversation’s panels and agent routes, and nothing else', async () => {
    const h = await harness();
    const { id, info } = await conversationWithFiles(h);
    const conversationKey = info.session_api_key as string;
    expect(conversationKey).toMatch(/^acsc_/);
    expect(info.url).toBe(`/api/conversations/${id}`);

    h.ports.llm.push({ content: 'Another.' });
    const other = await createConversation(h);
    await h.idle();

    expect((await h.call('GET', `/api/conversations/${id}/git/changes`, { key: conversationKey })).status).toBe(200);
    expect(
      (await h.call('GET', `/api/v1/events/count?conversation_id__eq=${id}`, { key: conversationKey })).status,
    ).toBe(200);
    // The agent-server form of the git routes names no conversation: the key says which.
    const v1Changes = await h.call('GET', `/api/git/changes/${encodeURIComponent('/workspace/project')}`, {
      key: conversationKey,
    });
    expect(v1Changes.body).toEqual([
      { status: 'UPDATED', path: 'src/app.ts' },
      { status: 'ADDED', path: 'src/new.ts' },
      { status: 'MOVED', path: 'docs/new-name.md' },
      { status: 'DELETED', path: 'gone.txt' },
    ]);
    const v1Diff = await h.call('GET', `/api/git/diff/${encodeURIComponent('/workspace/project/src/app.ts')}`, {
      key: conversationKey,
    });
    expect(obj(v1Diff.body).modified).toBe('export const answer = 42;\n');
    // With the user's key those two cannot know the conversation: only its own key opens them (401, as the document says).
    for (const path of [
      `/api/git/changes/${encodeURIComponent('/workspace/project')}`,
      `/api/git/diff/${encodeURIComponent('/workspace/project/src/app.ts')}`,
    ]) {
      const ambiguous = await h.call('GET', path);
      expect(ambiguous.status, path).toBe(401);
      expect(errorCode(ambiguous.body)).toBe('UNAUTHENTICATED');
      expect(ambiguous.text).toContain('session_api_key');
    }

    for (const [method, path] of [
      ['GET', `/api/conversations/${other}/git/changes`],
      ['GET', `/api/conversations/${other}/list-files`],
      ['GET', `/api/v1/events/count?conversation_id__eq=${other}`],
      ['POST', `/api/conversations/${other}/pause`],
      ['GET', '/api/settings'],
      ['GET', '/api/secrets'],
      ['GET', '/api/conversations'],
      ['GET', '/api/v1/sandboxes/search'],
    ] as const) {
      const r = await h.call(method, path, { key: conversationKey });
      expect([401, 403], `${method} ${path}`).toContain(r.status);
    }
    // A forged key for the same conversation with a changed signature is refused.
    expect(
      (await h.call('GET', `/api/conversations/${id}/config`, { key: `${conversationKey.slice(0, -2)}xx` })).status,
    ).toBe(401);
    // As a Bearer token (OpenHands 1.x) it opens the same, and no more.
    const bearer = { key: null, headers: { Authorization: `Bearer ${conversationKey}` } };
    expect((await h.call('GET', `/api/git/changes/${encodeURIComponent('/workspace/project')}`, bearer)).status).toBe(
      200,
    );
    expect((await h.call('GET', `/api/conversations/${id}/config`, bearer)).status).toBe(200);
    expect((await h.call('GET', `/api/conversations/${other}/config`, bearer)).status).toBe(401);
  });

  it('pause and run: the agent stops where it is and goes on', async () => {
    const h = await harness();
    // The first model call never answers by itself: pausing aborts it.
    h.ports.llm.push({ content: 'never delivered', delayMs: 600_000 }, { content: 'Went on after the pause.' });
    const id = await createConversation(h, { initial_user_msg: 'take your time' });
    const info = obj((await h.call('GET', `/api/conversations/${id}`)).body);
    const key = info.session_api_key as string;
    const execution = async () =>
      obj(arr((await h.call('GET', `/api/v1/app-conversations?ids=${id}`)).body)[0]).execution_status;
    const deadline = Date.now() + 60_000;
    while (h.ports.llm.calls === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(h.ports.llm.calls, 'the model was never called').toBe(1);

    expect((await h.call('POST', `/api/conversations/${id}/pause`, { key })).body).toEqual({ success: true });
    await h.idle();
    expect(await execution()).toBe('paused');
    expect(h.ports.llm.calls).toBe(1);

    expect((await h.call('POST', `/api/conversations/${id}/run`, { key })).body).toEqual({ success: true });
    await h.idle();
    expect(await execution()).toBe('finished');
    const replies = arr(obj((await h.call('GET', `/api/conversations/${id}/trajectory`)).body).trajectory)
      .map(obj)
      .filter((e) => e.source === 'agent' && e.action === 'message')
      .map((e) => e.message);
    expect(replies).toEqual(['Went on after the pause.']);
    const count = await h.call('GET', `/api/v1/events/count?conversation_id__eq=${id}`, { key });
    expect(count.body as number).toBeGreaterThan(0);
  });
});
