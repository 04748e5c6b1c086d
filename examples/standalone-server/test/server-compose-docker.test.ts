/**
 * deploy/compose/compose.yaml for real: the server's image with PostgreSQL (built locally from
 * Debian's package) under Compose v2 (`docker compose`) or Debian's `docker-compose`; a
 * conversation runs in a Docker sandbox, and the data (settings, the conversation and its events,
 * the generated key) survives `down` and `up`. The project is unique to the run and always ends
 * with `down -v`.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from '@acs/testing';
import { body, call, waitFor } from './process.js';
import {
  SANDBOX_OUTPUT,
  commandOutputs,
  dockerSocketGroup,
  ensureServerImage,
  freePort,
  installationOf,
  removeSandboxesOf,
  scriptSandboxCommand,
  startScriptedConversation,
  untilFinished,
} from './server-image.js';
import { repositoryRoot, runCommand } from './containers.js';

const docker = new Docker();
const COMPOSE_FILE = join(repositoryRoot, 'deploy/compose/compose.yaml');
const project = `acs-compose-test-${randomBytes(4).toString('hex')}`;
let llm: FakeOpenAi;
let compose: string[] = [];
let env: NodeJS.ProcessEnv = {};
const installations = new Set<string>();

/** `docker compose` where the plugin answers, else Debian's `docker-compose`. */
async function composeCommand(): Promise<string[]> {
  if ((await runCommand('docker', ['compose', 'version'])).code === 0) return ['docker', 'compose'];
  if ((await runCommand('docker-compose', ['version'])).code === 0) return ['docker-compose'];
  throw new Error('neither `docker compose` nor `docker-compose` runs here: apt-get install docker-compose');
}

async function composeRun(args: string[], deadlineMs = 300_000): Promise<string> {
  const [command, ...rest] = compose;
  const { code, output } = await runCommand(command!, [...rest, '-p', project, '-f', COMPOSE_FILE, ...args], {
    env,
    deadlineMs,
  });
  if (code !== 0)
    throw new Error(`${compose.join(' ')} ${args.join(' ')} failed (exit ${code}):\n${output.slice(-6000)}`);
  return output;
}

const imageExists = (image: string) =>
  docker
    .getImage(image)
    .inspect()
    .then(
      () => true,
      () => false,
    );

/** Waits for the service's listening line in the project's logs; its URL, key and installation. */
async function untilServing(): Promise<{ url: string; key: string; logs: string }> {
  let logs = '';
  try {
    return await waitFor(
      'the service to listen',
      async () => {
        logs = await composeRun(['logs', '--no-color', 'acs']);
        const listening = logs.split('\n').find((l) => l.includes('"agent conversation service listening"'));
        const key = /\/console\/\?key=(\S+)/.exec(logs)?.[1];
        if (!listening || !key) return undefined;
        const installation = installationOf(listening);
        installations.add(installation);
        return { url: (JSON.parse(listening.slice(listening.indexOf('{'))) as { url: string }).url, key, logs };
      },
      120_000,
    );
  } catch (error) {
    throw new Error(`${String(error)}\n--- logs ---\n${await composeRun(['logs', '--no-color']).catch(String)}`, {
      cause: error,
    });
  }
}

beforeAll(async () => {
  await ensureServerImage(docker);
  compose = await composeCommand();
  llm = await startFakeOpenAi();
  scriptSandboxCommand(llm, 'compose');
  env = {
    ...process.env,
    ACS_DOCKER_GID: dockerSocketGroup(),
    PORT: String(await freePort()),
    // Where no registry answers, the Debian base npm run image made with debootstrap.
    ...((await imageExists('acs-debian:bookworm-slim')) ? { ACS_DEBIAN_IMAGE: 'acs-debian:bookworm-slim' } : {}),
  };
}, 1_600_000);

afterAll(async () => {
  if (compose.length > 0) await composeRun(['down', '-v', '--remove-orphans']).catch(() => {});
  for (const installation of installations) await removeSandboxesOf(docker, installation);
  await llm?.close();
});

describe('the compose file', () => {
  it('runs the service with PostgreSQL, and its data survives down and up', async () => {
    // Built here (PostgreSQL's image; a cached build when it is there); timed from `up` on.
    await composeRun(['build'], 900_000);
    const startedAt = Date.now();
    await composeRun(['up', '-d'], 300_000);
    const first = await untilServing();
    expect(first.logs).toContain('"storage":"postgres"');
    expect(first.logs).toContain('made now, kept in /data/api.key');

    const id = await startScriptedConversation(first.url, first.key, llm, 'compose');
    const events = await untilFinished(first.url, first.key, id);
    expect(commandOutputs(events).join('\n')).toContain(SANDBOX_OUTPUT);
    console.log(
      `compose: up -d to a finished conversation (one sandbox command): ${((Date.now() - startedAt) / 1000).toFixed(1)} s`,
    );

    await composeRun(['down']);
    expect(await composeRun(['ps', '-q'])).toBe('');
    await composeRun(['up', '-d']);
    const second = await untilServing();
    // The same key (the acs-data volume), the same installation and records (the postgres-data volume).
    expect(second.key).toBe(first.key);
    expect(second.logs).toContain('made at the first start, kept in /data/api.key');
    expect(installations.size).toBe(1);
    const settings = await body<{ llm_model: string; llm_base_url: string }>(
      call(second.url, '/api/settings', second.key),
    );
    expect(settings).toMatchObject({ llm_model: 'openai/scripted-model', llm_base_url: llm.baseUrl });
    const [conversation] = await body<({ execution_status: string } | null)[]>(
      call(second.url, `/api/v1/app-conversations?ids=${id}`, second.key),
    );
    expect(conversation?.execution_status).toBe('finished');
    const again = await untilFinished(second.url, second.key, id);
    expect(again.map((e) => e.id)).toEqual(events.map((e) => e.id));
    expect(commandOutputs(again).join('\n')).toContain(SANDBOX_OUTPUT);
  });
});
