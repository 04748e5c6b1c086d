/** The server's image (Dockerfile, scripts/build-server-image.sh) for the tests that run it. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { statSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import { marker, scriptedCompletion, toolCall, type FakeOpenAi } from '@acs/testing';
import type { ConversationEvent } from '@acs/core/schemas';
import { ensureImage } from './containers.js';
import { allEvents, body, call, waitFor } from './process.js';

export const SERVER_IMAGE = 'acs-server:latest';
const BUILD_SCRIPT = fileURLToPath(new URL('../../../scripts/build-server-image.sh', import.meta.url));

/** The group of the engine's socket, for `--group-add` (the image's user is not root). */
export const dockerSocketGroup = () => String(statSync('/var/run/docker.sock').gid);

/** Builds the image with `npm run image`'s script when the engine lacks it, failing with the build's output. */
export const ensureServerImage = (docker: Docker): Promise<void> => ensureImage(docker, SERVER_IMAGE, [BUILD_SCRIPT]);

/** The image's size in MB (as `docker images` counts it). */
export async function imageMegabytes(docker: Docker, image = SERVER_IMAGE): Promise<number> {
  return Math.round((await docker.getImage(image).inspect()).Size / 1_000_000);
}

/** A port of 127.0.0.1 nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Attached {
  child: ChildProcessWithoutNullStreams;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** A process whose output is kept (e.g. `docker run` attached, or `docker-compose logs -f`). */
export function attach(command: string, args: readonly string[], env?: NodeJS.ProcessEnv): Attached {
  const child = spawn(command, args, { env: env ?? process.env });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, url: '', stdout: () => out, stderr: () => err, exited };
}

/** Ends an attached process (if it still runs) and waits for it. */
export async function detach(attached: Attached | undefined): Promise<void> {
  if (!attached) return;
  if (attached.child.exitCode === null && attached.child.signalCode === null) attached.child.kill('SIGKILL');
  await attached.exited;
}

/** The installation id from the server's listening line. */
export const installationOf = (listening: string): string =>
  (JSON.parse(listening.slice(listening.indexOf('{'))) as { installation: string }).installation;

/** Removes every container and workspace volume an installation made on the engine (warm ones too). */
export async function removeSandboxesOf(docker: Docker, installationId: string): Promise<void> {
  const label = `io.acs.installation-id=${installationId}`;
  const containers = await docker.listContainers({ all: true, filters: { label: [label] } });
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  const { Volumes } = await docker.listVolumes({ filters: { label: [label] } });
  await Promise.all(
    (Volumes ?? []).map((v) =>
      docker
        .getVolume(v.Name)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
}

/** What the scripted model has the agent run in its sandbox, and what that prints there. */
const SANDBOX_COMMAND = 'echo "sandbox says $((6 * 7)) from $(cat /etc/debian_version | cut -d. -f1)"';
export const SANDBOX_OUTPUT = 'sandbox says 42 from 12';

/** A conversation (by its marker) that runs SANDBOX_COMMAND in its sandbox, then finishes. */
export function scriptSandboxCommand(llm: FakeOpenAi, name: string): void {
  llm.script(name, (turn) => ({
    status: 200,
    body: scriptedCompletion(
      turn,
      turn === 0
        ? { content: null, tool_calls: [toolCall('call_run_1', 'execute_bash', { command: SANDBOX_COMMAND })] }
        : { content: null, tool_calls: [toolCall(`call_finish_${turn}`, 'finish', { message: 'Ran it.' })] },
    ),
  }));
}

/** Stores the scripted model in the user's settings and starts a conversation with the script's marker. */
export async function startScriptedConversation(
  url: string,
  key: string,
  llm: FakeOpenAi,
  name: string,
): Promise<string> {
  await body(
    call(url, '/api/settings', key, {
      llm_model: 'openai/scripted-model',
      llm_api_key: 'sk-scripted-image-test',
      llm_base_url: llm.baseUrl,
    }),
  );
  const created = await body<{ conversation_id: string }>(
    call(url, '/api/conversations', key, { initial_user_msg: `${marker(name)} Run the command.` }),
  );
  return created.conversation_id;
}

/** Waits (up to `deadlineMs`) for the conversation to finish; its events. Fails with the reason when it ends otherwise. */
export async function untilFinished(
  url: string,
  key: string,
  id: string,
  deadlineMs = 240_000,
): Promise<ConversationEvent[]> {
  await waitFor(
    `conversation ${id} to finish`,
    async () => {
      const [found] = await body<({ execution_status: string | null } | null)[]>(
        call(url, `/api/v1/app-conversations?ids=${id}`, key),
      );
      const status = found?.execution_status;
      if (status === 'error' || status === 'stuck')
        throw new Error(`conversation ${id} ended ${status}: ${JSON.stringify(await allEvents(url, key, id))}`);
      return status === 'finished' ? true : undefined;
    },
    deadlineMs,
  );
  return allEvents(url, key, id);
}

/** The output of the agent's execute_bash in the events. */
export const commandOutputs = (events: readonly ConversationEvent[]): string[] =>
  events.flatMap((e) => (e.kind === 'observation' && e.tool_name === 'execute_bash' ? [String(e.content)] : []));
