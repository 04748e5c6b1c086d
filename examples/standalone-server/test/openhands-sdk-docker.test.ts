/**
 * The OpenHands SDK runs its agents on this service's sandboxes: the real SDK (Python,
 * test/openhands-sdk/acceptance.py) against the example server process, with Docker sandboxes of
 * the agent-server specs (the real agent-server, on the host network to reach the scripted model
 * on 127.0.0.1). Twice: the SDK pinned with the newest agent-server (1.58.2: the model from the
 * user's settings, streamed tokens, secrets, the session socket) on it, and the SDK the CLI pins
 * (openhands-sdk 1.21, openhands-workspace 1.11.1) on the previous pin, 1.34.0, as the CLI's
 * `acp --cloud` (also here) gets it. Python resolves the sandbox's URL as the machine does: no
 * patch of its resolver.
 *
 * Needs a Docker engine, the newest agent-server image (scripts/build-agent-server-image.sh; the
 * previous pin's is built here when missing; both named in src/config.ts's AGENT_SERVER_SPECS) and the venvs of scripts/python-venv.sh openhands-sdk
 * and openhands-sdk-latest, whose pythons are ACS_OPENHANDS_PYTHON and ACS_OPENHANDS_LATEST_PYTHON
 * (defaults under /var/cache/acs); .ci/run makes them.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  scriptedCompletion,
  errorBody,
  startFakeOpenAi,
  toolCall,
  type FakeOpenAi,
  type FakeOpenAiRequest,
} from '@acs/testing';
import { expectOpenHandsShape } from '../../../packages/adapter-express/test/openhands-shapes.js';
import { AGENT_SERVER_SPECS } from '../src/config.js';
import { startServer, type Running } from './process.js';
import { ensureAgentServerImage, removeContainersOf } from './containers.js';

const OPENHANDS_PYTHON = process.env.ACS_OPENHANDS_PYTHON ?? '/var/cache/acs/openhands-sdk-venv/bin/python';
const LATEST_PYTHON = process.env.ACS_OPENHANDS_LATEST_PYTHON ?? '/var/cache/acs/openhands-sdk-latest-venv/bin/python';
/**
 * The SDKs the acceptance runs with, each on the agent-server it works with: the one pinned with
 * the newest agent-server, on the spec `openhands-agent-server`; the CLI's own, on the previous
 * pin (its models forbid a field of agent-server 1.58's events), which is also what a sandbox
 * started with no spec named gets, as the CLI starts them.
 */
const CLIENTS = [
  {
    name: `the SDK pinned with the newest agent-server, on ${AGENT_SERVER_SPECS[0].image}`,
    python: LATEST_PYTHON,
    venv: 'openhands-sdk-latest',
    variable: 'ACS_OPENHANDS_LATEST_PYTHON',
    ...AGENT_SERVER_SPECS[0],
  },
  {
    name: `the CLI's SDK (1.21), on ${AGENT_SERVER_SPECS[1].image}`,
    python: OPENHANDS_PYTHON,
    venv: 'openhands-sdk',
    variable: 'ACS_OPENHANDS_PYTHON',
    ...AGENT_SERVER_SPECS[1],
  },
] as const;
const SCRIPTED_KEY = 'sk-scripted-not-a-real-key';
const SECRET = 'deploy-token-value-0123456789';
const MARKER_WORDS = 'I will write the marker file in the project directory now.';
const SDK_DIR = fileURLToPath(new URL('./openhands-sdk/', import.meta.url));
const docker = new Docker();
const tag = randomBytes(4).toString('hex');
const alice = `sdk-alice-${tag}`;
const bob = `sdk-bob-${tag}`;
const ALICE_KEY = `${alice}-key-0123456789`;
const BOB_KEY = `${bob}-key-0123456789`;

let llm: FakeOpenAi;
let server: Running;

/** The name of the offered tool that runs commands (terminal in this SDK; named otherwise in others). */
const toolNamed = (request: FakeOpenAiRequest, pattern: RegExp): string => {
  const names = (request.body.tools ?? []).map((t) => t.function.name);
  const found = names.find((n) => pattern.test(n));
  if (!found) throw new Error(`no tool like ${pattern} among ${names.join(', ')}`);
  return found;
};

/** Fails with what is missing before anything starts: the image and the venv are made by .ci/run. */
async function needs(): Promise<void> {
  for (const client of CLIENTS)
    if (!existsSync(client.python))
      throw new Error(
        `This test needs the OpenHands SDK venv at ${client.python}: run scripts/python-venv.sh ${client.venv} (or set ${client.variable})`,
      );
  // CI builds the newest image; the previous pin's is built here on its first use on a machine.
  for (const { image } of CLIENTS) await ensureAgentServerImage(docker, image);
}

/** Runs a Python script of test/openhands-sdk with the SDK venv; resolves with its output, whatever its exit. */
function runPython(
  script: string,
  python: string,
  env: Record<string, string>,
  deadlineMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(python, [script], {
      cwd: SDK_DIR,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        PYTHONPATH: SDK_DIR,
        OPENHANDS_SUPPRESS_BANNER: '1',
        // LiteLLM would fetch its price list from the internet first.
        LITELLM_LOCAL_MODEL_COST_MAP: 'True',
        ...env,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  await needs();
  llm = await startFakeOpenAi();
  // Run a command in the sandbox, then finish; a later message is answered by finishing again.
  llm.script('sdk', (turn, request) => {
    // A call without tools (the agent-server names the conversation with one) gets words.
    if (!request.body.tools?.length)
      return { status: 200, body: scriptedCompletion(turn, { content: 'The marker file' }) };
    const call =
      turn === 0
        ? toolCall('call_marker', toolNamed(request, /terminal|bash/), {
            command: 'echo sdk-marker > /workspace/project/marker.txt && cat /workspace/project/marker.txt',
            security_risk: 'LOW',
          })
        : toolCall(`call_finish_${turn}`, toolNamed(request, /^finish$/), {
            message: turn === 1 ? 'The marker file is written.' : 'Done again.',
          });
    // The first answer has words besides its call: a model streaming them is seen word by word.
    return turn <= 2
      ? {
          status: 200,
          body: scriptedCompletion(turn, { content: turn === 0 ? MARKER_WORDS : null, tool_calls: [call] }),
        }
      : { status: 400, body: errorBody(`sdk has no turn ${turn}`, 'invalid_request_error') };
  });
  // The CLI's prompt: finish at once.
  llm.script('acp', (turn, request) =>
    request.body.tools?.length
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: null,
            tool_calls: [
              toolCall(`call_acp_${turn}`, toolNamed(request, /^finish$/), { message: 'Hello from the sandbox.' }),
            ],
          }),
        }
      : { status: 200, body: scriptedCompletion(turn, { content: 'Greeting' }) },
  );
  server = await startServer(
    {
      ACS_API_KEYS: `${alice}:${ALICE_KEY},${bob}:${BOB_KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_NETWORK: 'host',
      ACS_SANDBOX_IMAGE_BUILD: 'off',
    },
    { lifetime: 'file' },
  );
  // The newest SDK reads the model from the user's settings (get_llm), and the secret names.
  const headers = { Authorization: `Bearer ${ALICE_KEY}`, 'Content-Type': 'application/json' };
  for (const [path, body] of [
    ['/api/settings', { llm_model: 'openai/scripted-model', llm_api_key: SCRIPTED_KEY, llm_base_url: llm.baseUrl }],
    ['/api/v1/secrets', { name: 'DEPLOY_TOKEN', value: SECRET }],
  ] as const) {
    const stored = await fetch(server.url + path, { method: 'POST', headers, body: JSON.stringify(body) });
    expect(stored.status, await stored.text()).toBeLessThan(300);
  }
}, 1_800_000);

afterAll(async () => {
  await llm?.close();
  await removeContainersOf(docker, alice);
  await removeContainersOf(docker, bob);
});

describe('the OpenHands SDK on our sandboxes (the agent-server specs)', () => {
  it.each(CLIENTS)(
    '$name: becomes ready, runs a conversation in the sandbox, keeps it over pause and resume, keeps bob out, and cleans up',
    async (client) => {
      const newest = client.python === LATEST_PYTHON;
      const earlierCalls = llm.requestsFor('sdk').length;
      const run = await runPython(
        'acceptance.py',
        client.python,
        { ACS_URL: server.url, ALICE_KEY, BOB_KEY, LLM_BASE_URL: llm.baseUrl, SPEC_ID: client.id },
        540_000,
      );
      const last = run.stdout.trim().split('\n').at(-1) ?? '';
      expect(
        run.code,
        `acceptance.py failed:\n--- stderr ---\n${run.stderr.slice(-6000)}\n--- stdout ---\n${run.stdout.slice(-3000)}`,
      ).toBe(0);
      const report = JSON.parse(last) as Record<string, unknown> & {
        sandbox: { session_api_key: string; exposed_urls: { name: string; url: string; port: number }[] };
        bob: Record<string, unknown>;
        sandbox_id: string;
      };

      // The sandbox as 1.11 shapes it, its agent-server on a loopback port of its own of this
      // server (the service is reached on loopback), which Python resolves as the machine does.
      expectOpenHandsShape('SandboxInfo', report.sandbox);
      expect(report.host).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(report.host).not.toBe(server.url);
      expect(report.sandbox.exposed_urls).toEqual([{ name: 'AGENT_SERVER', url: report.host, port: 8000 }]);
      expect(report.sandbox.session_api_key).toMatch(/^acss_[A-Za-z0-9_-]{43}$/);

      // The agent ran the command in the sandbox and finished; its events came over the proxied WebSocket.
      expect(report.status_after_run).toBe('finished');
      expect(report.marker).toBe('sdk-marker');
      expect(report.streamed_kinds).toEqual(
        expect.arrayContaining(['ActionEvent', 'MessageEvent', 'ConversationStateUpdateEvent']),
      );
      expect(report.stored_kinds).toEqual(expect.arrayContaining(['ActionEvent', 'ObservationEvent']));
      // Files both ways through the workspace.
      expect(report).toMatchObject({ upload_ok: true, uploaded_seen: 'uploaded by the SDK', download_ok: true });
      expect(report.downloaded).toBe('sdk-marker');
      if (newest) {
        // The model, its URL and its key from alice's settings (secret values shown to her sandbox's key).
        expect(report.llm).toEqual({ model: 'openai/scripted-model', base_url: llm.baseUrl, key_shown: true });
        expect(report.secrets).toEqual(['DEPLOY_TOKEN']);
        expect(report.secrets_of_profile).toEqual(['DEPLOY_TOKEN']);
        expect(report.mcp_config).toEqual({});
        // The first answer's words reached the token callbacks in pieces, through our proxy.
        expect(report.token_pieces as number).toBeGreaterThan(1);
        expect(report.streamed_text).toContain(MARKER_WORDS);
        // The agent-server's session socket through the proxy: the whole history (key in a header,
        // bytes proxied), then a resume after all but the last two (key in the first frame, relayed).
        const { whole, resumed } = report.session_socket as Record<
          'whole' | 'resumed',
          { sync: { type: string; from_seq: number; through_seq: number }; seqs: number[] }
        >;
        const last = whole.sync.through_seq;
        expect(whole.sync).toEqual({ type: 'sync', from_seq: -1, through_seq: last });
        expect(whole.seqs).toEqual([...Array(last + 1).keys()]);
        expect(last).toBeGreaterThan(3);
        expect(resumed.sync).toMatchObject({ from_seq: last - 2, through_seq: last });
        expect(resumed.seqs).toEqual([last - 1, last]);
      }
      expect(String(report.observations)).toContain('sdk-marker');
      // The model was called from the sandbox with the key the SDK sent: none of ours.
      const calls = llm.requestsFor('sdk').slice(earlierCalls);
      expect(calls.filter((c) => c.body.tools?.length).length).toBe(3);
      expect(new Set(calls.map((c) => c.headers.authorization))).toEqual(new Set([`Bearer ${SCRIPTED_KEY}`]));

      // Paused: no key, no URL, and the agent-server's URL answers 503 at once; resumed: the same conversation goes on.
      expect(report.paused_health_status).toBe(503);
      expect(report.paused_info).toMatchObject({ status: 'PAUSED', session_api_key: null, exposed_urls: null });
      expect(report.same_events).toBe(true);
      expect(report.events_after_resume as number).toBeGreaterThanOrEqual(report.events_before_pause as number);
      expect(report.status_after_second_run).toBe('finished');

      // Bob reaches nothing of alice's.
      expect(report.bob).toMatchObject({
        bob_api_key_bearer: 404,
        bob_api_key_header: 404,
        no_key: 401,
        bob_sandbox_listing: [null],
        bob_delete: 404,
      });
      expect(String(report.bob.bob_websocket)).not.toBe('opened');

      // cleanup() deleted the sandbox, and its container is gone.
      expect(report.after_cleanup).toBeNull();
      const left = await docker.listContainers({
        all: true,
        filters: { label: [`io.acs.sandbox-id=${report.sandbox_id}`] },
      });
      expect(left).toEqual([]);
    },
    600_000,
  );

  it("starts the OpenHands CLI's cloud session (acp --cloud, no spec named) and answers a prompt", async () => {
    const home = mkdtempSync(join(tmpdir(), 'acs-openhands-cli-'));
    mkdirSync(join(home, '.openhands', 'cloud'), { recursive: true });
    writeFileSync(join(home, '.openhands', 'cloud', 'api_key.txt'), ALICE_KEY, { mode: 0o600 });
    const agent = {
      llm: {
        model: 'openai/scripted-model',
        api_key: 'sk-acp-not-a-real-key',
        base_url: llm.baseUrl,
        usage_id: 'agent',
        native_tool_calling: true,
        num_retries: 0,
      },
    };
    writeFileSync(join(home, '.openhands', 'agent_settings.json'), JSON.stringify(agent));
    // Straight at the example server: its first request, GET /api/v1/users/me, is ours too.
    const run = await runPython(
      'acp_session.py',
      OPENHANDS_PYTHON,
      {
        HOME: home,
        ACS_URL: server.url,
        OPENHANDS_BIN: join(dirname(OPENHANDS_PYTHON), 'openhands'),
        PROMPT: '[script:acp] Say hello.',
      },
      540_000,
    );
    const last = run.stdout.trim().split('\n').at(-1) ?? '';
    expect(run.code, `acp_session.py failed:\n${run.stderr.slice(-6000)}`).toBe(0);
    const report = JSON.parse(last) as {
      session_new: { result?: { sessionId: string } };
      prompt?: { result?: { stopReason: string } };
      updates: string[];
    };
    expect(report.session_new.result?.sessionId, `${last}\n--- stderr ---\n${run.stderr.slice(-4000)}`).toMatch(
      /^[0-9a-f-]{36}$/,
    );
    expect(report.prompt?.result, last).toEqual({ stopReason: 'end_turn' });
    // The CLI names no spec: its sandbox is of the deployment's standalone spec, the agent-server's.
    const sandboxes = (await (
      await fetch(`${server.url}/api/v1/sandboxes/search`, { headers: { Authorization: `Bearer ${ALICE_KEY}` } })
    ).json()) as { items: { sandbox_spec_id: string; status: string }[] };
    expect(sandboxes.items.filter((s) => s.status === 'RUNNING').map((s) => s.sandbox_spec_id)).toEqual([
      AGENT_SERVER_SPECS[1].id,
    ]);
  }, 600_000);
});
