import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { expectOk, fixtureId } from '@acs/core/testing';
import { commandImageProvider, LABELS } from '@acs/adapter-docker';
import { bookworm, dockerRuntime, SANDBOX_IMAGE } from './engine.js';

/** A tag no engine has: the provider "builds" it by tagging the test image, slowly, saying so. */
const PROVIDED = `acs-sandbox:provided-${randomBytes(4).toString('hex')}`;
const BROKEN = `acs-sandbox:broken-${randomBytes(4).toString('hex')}`;
const workDir = mkdtempSync(join(tmpdir(), 'acs-image-provider-'));
const buildsLog = join(workDir, 'builds');

const provider = commandImageProvider({
  images: [PROVIDED, BROKEN],
  linePrefix: 'build-image: ',
  command: (image) => [
    'bash',
    '-c',
    image === BROKEN
      ? 'echo "build-image: step 1/1: trying"; echo "no mirror reachable" >&2; exit 3'
      : `echo built >> "${buildsLog}"; echo "build-image: step 1/2: preparing"; sleep 1; docker tag ${SANDBOX_IMAGE} ${image}; echo "build-image: step 2/2: tagged"`,
  ],
});

afterAll(async () => {
  const runtime = await dockerRuntime();
  await runtime.connection.docker
    .getImage(PROVIDED)
    .remove()
    .catch(() => {});
});

describe('a sandbox whose image is missing, with an image provider', () => {
  it('waits for one build however many sandboxes need the image, reporting its progress, then starts', async () => {
    const runtime = await dockerRuntime({ images: provider });
    const ids = [fixtureId(), fixtureId()];
    const progress: string[][] = [[], []];
    try {
      const created = await Promise.all(
        ids.map((id, i) =>
          expectOk(
            runtime.create(
              {
                sandbox_id: id,
                user_id: 'alice',
                installation_id: 'acs-tests',
                spec: { ...bookworm, image: PROVIDED },
                env: {},
              },
              (detail) => progress[i]!.push(detail),
            ),
          ),
        ),
      );
      expect(created.map((c) => c.state).every((s) => s === 'starting' || s === 'running')).toBe(true);
      expect(readFileSync(buildsLog, 'utf8').trim().split('\n')).toEqual(['built']);
      for (const lines of progress) {
        expect(lines.length).toBeGreaterThan(0);
        expect(lines.every((l) => l.startsWith(`waiting for the sandbox image ${PROVIDED} to be built: step `))).toBe(
          true,
        );
      }
      expect(progress.flat()).toContain(`waiting for the sandbox image ${PROVIDED} to be built: step 2/2: tagged`);
      expect(await runtime.ensureImage(PROVIDED)).toBe('present');
    } finally {
      for (const id of ids) await runtime.delete(id);
    }
  });

  it('fails the sandbox with the build’s own words when the build fails, leaving nothing behind', async () => {
    const runtime = await dockerRuntime({ images: provider });
    const id = fixtureId();
    const created = await runtime.create({
      sandbox_id: id,
      user_id: 'alice',
      installation_id: 'acs-tests',
      spec: { ...bookworm, image: BROKEN },
      env: {},
    });
    expect(created.isErr() && created.error.message).toMatch(
      new RegExp(
        `the sandbox image ${BROKEN} is missing and could not be built: building ${BROKEN} failed \\(exit status 3\\): no mirror reachable`,
      ),
    );
    const { docker } = runtime.connection;
    expect(await docker.listContainers({ all: true, filters: { label: [`${LABELS.sandbox}=${id}`] } })).toEqual([]);
    expect((await docker.listVolumes({ filters: { label: [`${LABELS.sandbox}=${id}`] } })).Volumes ?? []).toEqual([]);
  });

  it('without a provider for the image, a missing image is an error that says how to build it', async () => {
    const runtime = await dockerRuntime({ images: provider });
    await expect(runtime.ensureImage('acs-sandbox:nobody-makes-this')).rejects.toThrow(
      /is not on this Docker engine; build or load it first/,
    );
  });
});
