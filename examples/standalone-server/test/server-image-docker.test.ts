/**
 * The server's image run as its README says: `docker run` on the host's network with the
 * engine's socket mounted, sandboxes as sibling containers on the same engine, a scripted model
 * server on the host's loopback. The image is built by scripts/build-server-image.sh (`npm run
 * image`) when the engine lacks it; the sandbox image acs-sandbox:bookworm is built on the host
 * (the image does not build sandbox images: ACS_SANDBOX_IMAGE_BUILD=off).
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from '@acs/testing';
import { body, call, waitFor, waitForOutput } from './process.js';
import {
  SANDBOX_OUTPUT,
  SERVER_IMAGE,
  attach,
  commandOutputs,
  detach,
  dockerSocketGroup,
  ensureServerImage,
  freePort,
  imageMegabytes,
  installationOf,
  removeSandboxesOf,
  scriptSandboxCommand,
  startScriptedConversation,
  untilFinished,
  type Attached,
} from './server-image.js';
import { runCommand } from './containers.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
let llm: FakeOpenAi;

/** What each test started: its container (attached `docker run`) and the installation it made. */
const started: { name: string; attached: Attached; installation: string | null }[] = [];

beforeAll(async () => {
  await ensureServerImage(docker);
  llm = await startFakeOpenAi();
  scriptSandboxCommand(llm, 'image');
}, 1_600_000);

afterEach(async () => {
  for (const s of started.splice(0)) {
    await runCommand('docker', ['rm', '-f', '-v', s.name]);
    await detach(s.attached);
    if (s.installation) await removeSandboxesOf(docker, s.installation);
  }
});

afterAll(async () => {
  await llm?.close();
});

/** `docker run` of the image as the README shows it (attached, so its output is the test's), with `env`. */
async function dockerRun(env: Record<string, string>, extra: string[] = []) {
  const name = `acs-image-test-${run}-${started.length}`;
  const args = [
    'run',
    '--name',
    name,
    '--network',
    'host',
    '-v',
    '/var/run/docker.sock:/var/run/docker.sock',
    '--group-add',
    dockerSocketGroup(),
    ...extra,
    ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    SERVER_IMAGE,
  ];
  const entry = { name, attached: attach('docker', args), installation: null as string | null };
  started.push(entry);
  const listening = await waitForOutput(entry.attached, '"agent conversation service listening"', 'its listening line');
  entry.installation = installationOf(listening);
  return { ...entry, url: (JSON.parse(listening) as { url: string }).url };
}

describe('the server image with docker run', () => {
  it('serves on the host network with Docker sandboxes as sibling containers, prints its key and console link, and runs a conversation', async () => {
    const port = await freePort();
    const startedAt = Date.now();
    const server = await dockerRun({ PORT: String(port) }, ['--health-interval', '2s']);
    expect(server.url).toBe(`http://127.0.0.1:${port}`);

    // The key and the links, on stderr as `npm start` prints them, with the key made in the volume.
    const printed = server.attached.stderr();
    const key = /^ {4}(\S{16,})$/m.exec(printed)?.[1];
    expect(key, printed).toBeDefined();
    expect(printed).toContain(`API key of user "default" (made now, kept in /data/api.key;`);
    expect(printed).toContain(`  Console (signs in as user "default"): ${server.url}/console/?key=${key}`);
    expect(printed).toContain(`curl -H "X-Session-API-Key: ${key}" ${server.url}/api/v1/sandbox-specs/search`);
    expect(server.attached.stdout()).toContain('"sandboxes":"docker (engine ');

    const id = await startScriptedConversation(server.url, key!, llm, 'image');
    const events = await untilFinished(server.url, key!, id).catch((error: unknown) => {
      throw new Error(
        `${String(error)}\n--- container output ---\n${server.attached.stderr()}${server.attached.stdout()}`,
        { cause: error },
      );
    });
    const seconds = (Date.now() - startedAt) / 1000;
    expect(commandOutputs(events).join('\n')).toContain(SANDBOX_OUTPUT);

    // The sandbox is a sibling container on the host's engine, of this installation.
    const [conversation] = await body<{ sandbox_id: string }[]>(
      call(server.url, `/api/v1/app-conversations?ids=${id}`, key!),
    );
    const sandboxes = await docker.listContainers({
      all: true,
      filters: { label: [`io.acs.sandbox-id=${conversation!.sandbox_id}`] },
    });
    expect(sandboxes.map((c) => c.Labels['io.acs.installation-id'])).toEqual([server.installation]);
    expect(sandboxes[0]!.Image).toBe('acs-sandbox:bookworm');

    // The server: tini as PID 1, the user acs in the socket's group, healthy by the image's HEALTHCHECK.
    const inside = await runCommand('docker', ['exec', server.name, 'sh', '-c', 'cat /proc/1/comm; id -un; id -G']);
    expect(inside.output.split('\n').slice(0, 2)).toEqual(['tini', 'acs']);
    expect(inside.output.split('\n')[2]!.split(' ')).toContain(dockerSocketGroup());
    await waitFor(
      'the container to be healthy',
      async () =>
        (await docker.getContainer(server.name).inspect()).State.Health?.Status === 'healthy' ? true : undefined,
      60_000,
    );
    console.log(
      `server image: ${await imageMegabytes(docker)} MB; docker run to a finished conversation (one sandbox command): ${seconds.toFixed(1)} s`,
    );
  });

  it('names the missing sandbox image and how to build it (the image does not build sandbox images)', async () => {
    const missing = `acs-sandbox:missing-${run}`;
    const server = await dockerRun({
      PORT: String(await freePort()),
      SESSION_API_KEY: `image-test-key-${run}-0123456789`,
      ACS_SANDBOX_SPECS: JSON.stringify([{ id: 'missing', image: missing }]),
    });
    const key = `image-test-key-${run}-0123456789`;
    // The warm pool's sandbox fails at start, saying why, in the log.
    const warning = await waitForOutput(server.attached, 'is not on this Docker engine', 'the missing image warning');
    expect(warning).toContain(`image ${missing} is not on this Docker engine; build or load it first`);
    expect(warning).toContain('scripts/build-sandbox-image.sh');

    await startScriptedConversation(server.url, key, llm, 'image');
    const task = await waitFor('the start task to fail', async () => {
      const { items } = await body<{ items: { status: string; detail: string | null }[] }>(
        call(server.url, '/api/v1/app-conversations/start-tasks/search', key),
      );
      return items[0]?.status === 'ERROR' ? items[0] : undefined;
    });
    expect(task.detail).toContain(`image ${missing} is not on this Docker engine; build or load it first`);
  });
});
