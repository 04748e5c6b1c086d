/**
 * The panels' reads cost the server little memory whatever the sandbox holds (issue 24): the
 * example server process with Docker sandboxes, a sandbox holding a 2 GiB sparse file and a
 * 256 MiB file committed to git and then changed, and `select-file` of `/usr`, `/` and the
 * sparse file, and `git/diff` of the big file. For each, the server's peak RSS (VmHWM of
 * /proc/<pid>/status, reset before the request through /proc/<pid>/clear_refs) may grow by less
 * than 64 MiB over its RSS just before. Needs a Docker engine and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import type { AppConversation } from '@acs/adapter-express';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { marker, scriptedCompletion, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { body, call, startServer, waitFor, type Running } from './process.js';
import { removeContainersOf } from './containers.js';

const docker = new Docker();
const user = `panels-memory-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const env = {
  ACS_API_KEYS: `${user}:${KEY}`,
  SESSION_API_KEY: 'unused-default-key-0123456789',
  ACS_STORAGE: 'memory',
  ACS_SANDBOXES: 'docker',
  ACS_SANDBOX_NETWORK: 'none',
};
/** What any one read may add to the server's peak memory. */
const BOUND_MIB = 64;
/** How long one panel request may take before the test gives up (with the server's output). */
const REQUEST_DEADLINE_MS = 180_000;

let llm: FakeOpenAi;
let server: Running;
let conversationId: string;
const measured: { request: string; status: number; rssBeforeMiB: number; peakMiB: number; growthMiB: number }[] = [];

/** Runs a shell script in the conversation's container (as root), failing with its output unless it exits 0. */
async function inSandbox(container: Docker.Container, script: string): Promise<void> {
  const exec = await container.exec({
    Cmd: ['bash', '-c', script],
    AttachStdout: true,
    AttachStderr: true,
    User: 'root',
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  let output = '';
  const sink = new PassThrough().on('data', (chunk: Buffer) => (output += chunk.toString()));
  docker.modem.demuxStream(stream, sink, sink);
  await new Promise((resolve, reject) => stream.on('end', resolve).on('close', resolve).on('error', reject));
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) throw new Error(`the setup script exited with ${ExitCode}:\n${output}`);
}

const kib = (status: string, field: string) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? Number.NaN);
const mib = (kibibytes: number) => Math.round((kibibytes / 1024) * 10) / 10;

/** One panel request, with the server's RSS just before it and its peak RSS during it. */
async function measure(path: string): Promise<{ status: number; json: unknown }> {
  const pid = server.child.pid!;
  // "5" resets the peak (VmHWM) to the current RSS (Linux ≥ 4.0; the process is ours).
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  const before = kib(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmRSS');
  const started = Date.now();
  const response = await fetch(`${server.url}/api/conversations/${conversationId}/${path}`, {
    headers: { 'X-Session-API-Key': KEY },
    signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
  }).catch((error: unknown) => {
    throw new Error(
      `GET ${path} got no answer within ${REQUEST_DEADLINE_MS / 1000} s (${String(error)}).\n--- server stderr ---\n${server.stderr().slice(-4000)}`,
    );
  });
  const text = await response.text();
  const peak = kib(readFileSync(`/proc/${pid}/status`, 'utf8'), 'VmHWM');
  const row = {
    request: path,
    status: response.status,
    rssBeforeMiB: mib(before),
    peakMiB: mib(peak),
    growthMiB: mib(peak - before),
  };
  measured.push(row);
  console.log(
    `${path}: ${response.status} in ${Date.now() - started} ms, RSS ${row.rssBeforeMiB} MiB before, peak ${row.peakMiB} MiB (+${row.growthMiB} MiB), ${text.length} characters`,
  );
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // Left as text: the assertions say what was expected.
  }
  return { status: response.status, json };
}

beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('panels', (turn) => ({
    status: 200,
    body: scriptedCompletion(turn, {
      content: null,
      tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'Nothing to do.' })],
    }),
  }));
  server = await startServer(env, { lifetime: 'file' });
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/scripted-model',
      llm_api_key: 'sk-scripted-panels',
      llm_base_url: llm.baseUrl,
    }),
  );
  conversationId = (
    await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { initial_user_msg: `${marker('panels')} Wait.` }),
    )
  ).conversation_id;
  await waitFor(
    'the agent to finish',
    async () => {
      const [found] = await body<(AppConversation | null)[]>(
        call(server.url, `/api/v1/app-conversations?ids=${conversationId}`, KEY),
      );
      return found?.execution_status === 'finished' && found.sandbox_status === 'RUNNING' ? found : undefined;
    },
    120_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}\n--- server stderr ---\n${server.stderr().slice(-4000)}`);
  });
  const [container] = await docker.listContainers({ filters: { label: [`io.acs.user-id=${user}`] } });
  if (!container) throw new Error('the conversation has no container');
  await inSandbox(
    docker.getContainer(container.Id),
    [
      // No pipefail: `yes` ends on SIGPIPE when `head` has enough.
      'set -eu',
      'cd /workspace',
      'git init -q .',
      // 256 MiB of text (no NUL byte), committed, then changed at its start.
      'yes "a line of the big file, the same again and again" | head -c 256M > big.txt',
      'git add big.txt && git -c user.name=t -c user.email=t@example.com commit -qm big',
      'sed -i "1s/.*/the first line, changed/" big.txt',
      'printf "small\\n" > small.txt',
      // 2 GiB that take no room: every byte a NUL.
      'truncate -s 2G sparse.bin',
      'ln -s big.txt link-to-big',
      'ln -s nowhere dangling-link',
    ].join('\n'),
  );
  // The first requests load code and warm caches: they are not what is measured.
  await measure('select-file?file=small.txt');
  await measure('git/diff?path=small.txt');
  measured.length = 0;
}, 300_000);

afterAll(async () => {
  console.log(
    `server RSS per request (bound: +${BOUND_MIB} MiB):\n${measured.map((m) => `  ${m.request.padEnd(36)} ${String(m.status).padEnd(4)} ${String(m.rssBeforeMiB).padStart(8)} → ${String(m.peakMiB).padStart(8)} MiB (+${m.growthMiB})`).join('\n')}`,
  );
  await llm?.close();
  await removeContainersOf(docker, user);
});

describe(
  'the panels read a sandbox within bounded server memory (example server, Docker)',
  { timeout: 300_000 },
  () => {
    it('select-file of /usr is a 400 PATH_IS_DIRECTORY pointing to list-files', async () => {
      const { status, json } = await measure('select-file?file=/usr');
      expect(status).toBe(400);
      expect(json).toMatchObject({ code: 'PATH_IS_DIRECTORY' });
      expect((json as { message: string }).message).toContain('/list-files');
      expect(measured.at(-1)!.growthMiB).toBeLessThan(BOUND_MIB);
    });

    it('select-file of / is a 400 PATH_IS_DIRECTORY', async () => {
      const { status, json } = await measure('select-file?file=/');
      expect(status).toBe(400);
      expect(json).toMatchObject({ code: 'PATH_IS_DIRECTORY' });
      expect(measured.at(-1)!.growthMiB).toBeLessThan(BOUND_MIB);
    });

    it('select-file of a 2 GiB sparse file says it is binary and how large, without reading it all', async () => {
      const { status, json } = await measure('select-file?file=/workspace/sparse.bin');
      expect(status).toBe(200);
      const code = (json as { code: string }).code;
      expect(code).toMatch(/binary/);
      expect(code).toContain('2147483648 bytes');
      expect(code.length).toBeLessThan(1000);
      expect(measured.at(-1)!.growthMiB).toBeLessThan(BOUND_MIB);
    });

    it('git/diff of a 256 MiB file shows the first MiB of each side and says both were clipped', async () => {
      const { status, json } = await measure('git/diff?path=big.txt');
      expect(status).toBe(200);
      const { original, modified } = json as { original: string; modified: string };
      expect(original.startsWith('a line of the big file')).toBe(true);
      expect(modified.startsWith('the first line, changed\na line of the big file')).toBe(true);
      // sed made the first line 25 bytes shorter.
      for (const [side, size] of [
        [original, 256 * 1024 ** 2],
        [modified, 256 * 1024 ** 2 - 25],
      ] as const) {
        expect(side.length).toBeLessThan(1024 * 1024 + 1000);
        expect(side).toMatch(new RegExp(`\\n\\[… clipped: the first 1048576 of ${size} bytes are shown\\]$`));
      }
      expect(measured.at(-1)!.growthMiB).toBeLessThan(BOUND_MIB);
    });

    it('select-file follows a symbolic link in the sandbox (clipped like any file); a dangling one is a 404', async () => {
      const linked = await measure('select-file?file=link-to-big');
      expect(linked.status).toBe(200);
      expect((linked.json as { code: string }).code).toMatch(/^the first line, changed\n[\s\S]*clipped/);
      expect(measured.at(-1)!.growthMiB).toBeLessThan(BOUND_MIB);
      const dangling = await measure('select-file?file=dangling-link');
      expect(dangling.status).toBe(404);
      expect(dangling.json).toMatchObject({ code: 'FILE_NOT_FOUND' });
    });

    it('list-files of / names entries from the root, without a double slash', async () => {
      const { status, json } = await measure('list-files?path=/');
      expect(status).toBe(200);
      expect(json).toEqual(expect.arrayContaining(['/usr/', '/workspace/']));
      expect((json as string[]).filter((entry) => entry.startsWith('//'))).toEqual([]);
    });
  },
);
