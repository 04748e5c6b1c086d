/**
 * Tokens as they come, on an agent-server sandbox: the real OpenHands agent-server (Docker,
 * host network, to reach the model on 127.0.0.1) runs an agent whose LLM streams
 * (`LLM(stream=True)`), and sends each piece of the answer on its event socket as a
 * `StreamingDeltaEvent`; the real SDK (test/openhands-sdk/token_callbacks.py) reaches that socket
 * through this service's proxy and gets every piece, unchanged, before the final message.
 *
 * Two SDKs, for the two ways their sockets pass the proxy: 1.58.2 (ACS_OPENHANDS_LATEST_PYTHON,
 * whose RemoteConversation hands deltas to `token_callbacks`) authenticates with its first
 * frame, so its socket is relayed message by message (sandbox-socket-relay.ts); the CLI's 1.21.0
 * (ACS_OPENHANDS_PYTHON) puts the key in the URL, so its socket is proxied as bytes
 * (sandbox-proxy.ts); it drops `token_callbacks`, but its event callbacks see the delta frames.
 *
 * Needs a Docker engine, the newest agent-server image (scripts/build-agent-server-image.sh; the
 * previous pin's, for the CLI's SDK, is built here when missing) and two venvs of scripts/python-venv.sh (`openhands-sdk`
 * and `openhands-sdk-latest`); .ci/run makes them.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedCompletion, startFakeOpenAi, tokenPieces, type FakeOpenAi } from '@acs/testing';
import { AGENT_SERVER_SPECS } from '../src/config.js';
import { ensureAgentServerImage, removeContainersOf } from './containers.js';
import { startServer, type Running } from './process.js';

const CLI_PYTHON = process.env.ACS_OPENHANDS_PYTHON ?? '/var/cache/acs/openhands-sdk-venv/bin/python';
const STREAMING_PYTHON =
  process.env.ACS_OPENHANDS_LATEST_PYTHON ?? '/var/cache/acs/openhands-sdk-latest-venv/bin/python';
/** The newest agent-server for the newest SDK; the previous pin for the CLI's SDK, which cannot read 1.58's events. */
const [NEWEST, PREVIOUS] = AGENT_SERVER_SPECS;
const SDK_DIR = fileURLToPath(new URL('./openhands-sdk/', import.meta.url));
const DEADLINE_MS = 120_000;
const ANSWER = 'Streamed from the sandbox, through the proxy, piece by piece as the model wrote it.';
const docker = new Docker();
const user = `sdk-deltas-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;

let llm: FakeOpenAi;
let server: Running;

/** Fails with what is missing before anything starts: the image and the venvs are made by .ci/run. */
async function needs(): Promise<void> {
  for (const [python, how] of [
    [CLI_PYTHON, 'bash scripts/python-venv.sh openhands-sdk (or set ACS_OPENHANDS_PYTHON)'],
    [STREAMING_PYTHON, 'bash scripts/python-venv.sh openhands-sdk-latest (or set ACS_OPENHANDS_LATEST_PYTHON)'],
  ] as const)
    if (!existsSync(python)) throw new Error(`This test needs the OpenHands SDK venv at ${python}: run ${how}`);
  // CI builds the newest image; the previous pin's is built here on its first use on a machine.
  for (const { image } of AGENT_SERVER_SPECS) await ensureAgentServerImage(docker, image);
}

const api = (path: string, method = 'GET') =>
  fetch(server.url + path, { method, headers: { Authorization: `Bearer ${KEY}` } });

interface AgentServer {
  id: string;
  url: string;
  key: string;
}

/** Starts a sandbox of the agent-server spec through the service and waits until it runs (its URL answers). */
async function startAgentServer(spec: string): Promise<AgentServer> {
  const started = await api(`/api/v1/sandboxes?sandbox_spec_id=${spec}`, 'POST');
  const startedText = await started.text();
  expect(started.status, startedText).toBe(200);
  const id = (JSON.parse(startedText) as { id: string }).id;
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const info = (await (await api(`/api/v1/sandboxes/${id}`)).json()) as {
      status: string;
      session_api_key: string | null;
      exposed_urls: { name: string; url: string }[] | null;
    };
    const url = info.exposed_urls?.find((u) => u.name === 'AGENT_SERVER')?.url;
    if (info.status === 'RUNNING' && url && info.session_api_key) return { id, url, key: info.session_api_key };
    if (Date.now() > deadline || info.status === 'ERROR')
      throw new Error(
        `sandbox ${id} is ${JSON.stringify(info)} after ${DEADLINE_MS / 1000} s.\n--- server stderr ---\n${server.stderr().slice(-6000)}`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Deletes the sandbox through the service (its container and volume go with it). */
async function deleteSandbox(id: string): Promise<void> {
  const deleted = await api(`/api/v1/sandboxes/${id}`, 'DELETE');
  expect(deleted.status, await deleted.text()).toBe(200);
}

interface Report {
  sdk: string;
  status: string;
  final: string | null;
  token_pieces: string[];
  delta_frames: { content: string | null; reasoning_content: string | null }[];
  stored_kinds: string[];
}

/** Runs token_callbacks.py with a venv's python; its report, or an error with its output (also after the deadline, when it is killed). */
async function runTokenCallbacks(python: string, agentServer: AgentServer, prompt: string): Promise<Report> {
  const child: ChildProcessWithoutNullStreams = spawn(python, ['token_callbacks.py'], {
    cwd: SDK_DIR,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PYTHONPATH: SDK_DIR,
      OPENHANDS_SUPPRESS_BANNER: '1',
      // LiteLLM would fetch its price list from the internet first.
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
      AGENT_SERVER_URL: agentServer.url,
      SESSION_API_KEY: agentServer.key,
      LLM_BASE_URL: llm.baseUrl,
      PROMPT: prompt,
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  const timer = setTimeout(() => child.kill('SIGKILL'), DEADLINE_MS);
  try {
    const code = await closed;
    const output = `--- stderr ---\n${stderr.slice(-6000)}\n--- stdout ---\n${stdout.slice(-3000)}`;
    if (code !== 0)
      throw new Error(`token_callbacks.py ended with ${code} (killed after ${DEADLINE_MS / 1000} s?)\n${output}`);
    return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Report;
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

beforeAll(async () => {
  await needs();
  // The model writes a piece every 20 ms when asked to stream (fake-openai-stream.ts).
  llm = await startFakeOpenAi({ streamPieceDelayMs: 20 });
  for (const name of ['deltas-relayed', 'deltas-proxied'])
    llm.script(name, (turn, request) => ({
      status: 200,
      // A call without tools (the agent-server names the conversation with one) gets a title.
      body: scriptedCompletion(turn, { content: request.body.tools?.length ? ANSWER : 'Streaming' }),
    }));
  server = await startServer(
    {
      ACS_API_KEYS: `${user}:${KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_NETWORK: 'host',
      ACS_SANDBOX_IMAGE_BUILD: 'off',
    },
    { lifetime: 'file' },
  );
}, 1_800_000);

afterAll(async () => {
  await llm?.close();
  await removeContainersOf(docker, user);
});

describe("the agent-server's streamed deltas reach the OpenHands SDK through the proxy", () => {
  it('SDK 1.58 (first-frame key, relayed socket): the token callbacks get every piece, which joined are the final message', async () => {
    const agentServer = await startAgentServer(NEWEST.id);
    try {
      const report = await runTokenCallbacks(STREAMING_PYTHON, agentServer, '[script:deltas-relayed] Say it.');
      // The SDK is pinned with the agent-server, at the same version.
      expect(report.sdk).toBe(NEWEST.image.split(':')[1]);
      expect(report.status).toBe('finished');
      expect(report.final).toBe(ANSWER);
      // Several callbacks, as the model wrote them (the agent-server forwards the role chunk's "" too).
      const written = report.token_pieces.filter((piece) => piece !== '');
      expect(written).toEqual(tokenPieces(ANSWER));
      expect(written.length).toBeGreaterThan(5);
      expect(report.token_pieces.join('')).toBe(report.final);
      // The same pieces came as StreamingDeltaEvent frames, and the agent-server stored none of them.
      expect(report.delta_frames.map((f) => f.content ?? '').join('')).toBe(ANSWER);
      expect(report.stored_kinds).toContain('MessageEvent');
      expect(report.stored_kinds).not.toContain('StreamingDeltaEvent');
      // The sandbox's model was asked to stream; the agent-server is given no webhook, so nothing
      // it streams is posted back to this service to be stored.
      expect(llm.requestsFor('deltas-relayed').some((r) => r.body.tools?.length && r.body['stream'] === true)).toBe(
        true,
      );
      const [container] = await docker.listContainers({
        filters: { label: [`io.acs.sandbox-id=${agentServer.id}`] },
      });
      const env = (await docker.getContainer(container!.Id).inspect()).Config.Env;
      expect(env.filter((e) => /^OH_WEBHOOK/i.test(e))).toEqual([]);
    } finally {
      await deleteSandbox(agentServer.id);
    }
  });

  it("the CLI's SDK 1.21 (key in the URL, proxied socket): its event callbacks get the StreamingDeltaEvent frames unchanged", async () => {
    const agentServer = await startAgentServer(PREVIOUS.id);
    try {
      const report = await runTokenCallbacks(CLI_PYTHON, agentServer, '[script:deltas-proxied] Say it.');
      expect(report.sdk).toBe('1.21.0');
      expect(report.status).toBe('finished');
      expect(report.final).toBe(ANSWER);
      const written = report.delta_frames.filter((f) => f.content !== '');
      expect(written).toEqual(tokenPieces(ANSWER).map((content) => ({ content, reasoning_content: null })));
      expect(report.stored_kinds).not.toContain('StreamingDeltaEvent');
    } finally {
      await deleteSandbox(agentServer.id);
    }
  });
});
