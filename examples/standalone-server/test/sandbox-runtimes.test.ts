/**
 * The example server's sandbox runtimes are the entries of src/sandbox-runtimes.ts: ACS_SANDBOXES
 * takes exactly their names, each reads (and documents) its own variables, and only the runtime
 * named is loaded, when it is opened (the Docker client is not loaded by a server on the fake).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runWithModuleLog } from '@acs/testing';
import { CONFIG_VARIABLES, loadConfig } from '../src/config.js';
import { SANDBOX_RUNTIMES } from '../src/sandbox-runtimes.js';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));
const base = { ACS_STORAGE: 'memory', SESSION_API_KEY: 'sandbox-runtimes-test-key-0123' };

describe('the sandbox runtimes of the example server', () => {
  it('are named by ACS_SANDBOXES, the first by default; another name is refused with the names there are', () => {
    expect(SANDBOX_RUNTIMES.map((r) => r.name)).toEqual(['docker', 'fake', 'kubernetes']);
    expect(loadConfig(base).sandboxes.runtime.name).toBe('docker');
    for (const { name } of SANDBOX_RUNTIMES)
      expect(loadConfig({ ...base, ACS_SANDBOXES: name }).sandboxes.runtime.name).toBe(name);
    expect(() => loadConfig({ ...base, ACS_SANDBOXES: 'podman' })).toThrow(
      /ACS_SANDBOXES: .*"docker".*"fake".*"kubernetes"/,
    );
  });

  it('each read variables of their own, which are the server’s (and so in the table of docs/configuration.md); a mistake in any is refused', () => {
    for (const runtime of SANDBOX_RUNTIMES)
      for (const name of Object.keys(runtime.env.shape)) expect(CONFIG_VARIABLES).toContain(name);
    expect(() => loadConfig({ ...base, ACS_SANDBOXES: 'fake', ACS_SANDBOX_IMAGE_BUILD: 'sometimes' })).toThrow(
      /ACS_SANDBOX_IMAGE_BUILD/,
    );
    expect(() => loadConfig({ ...base, ACS_SANDBOXES: 'docker', ACS_DOCKER_HOSTS: 'ftp://nowhere' })).toThrow(
      /ACS_DOCKER_HOSTS/,
    );
    expect(() =>
      loadConfig({ ...base, ACS_SANDBOXES: 'kubernetes', ACS_KUBERNETES_IMAGE_PULL_POLICY: 'Sometimes' }),
    ).toThrow(/ACS_KUBERNETES_IMAGE_PULL_POLICY/);
    expect(() => loadConfig({ ...base, ACS_SANDBOXES: 'kubernetes', ACS_KUBERNETES_WORKSPACE_SIZE: 'large' })).toThrow(
      /ACS_KUBERNETES_WORKSPACE_SIZE/,
    );
  });

  it('load only the one named, when it is opened', () => {
    const loaded = runWithModuleLog<{ configured: string[]; opened: string[]; description: string }>(
      `
      const { loadConfig, commonSandboxSettings } = await import('./src/config.ts');
      const config = loadConfig({ ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' });
      const configured = loaded();
      const opened = await config.sandboxes.runtime.open(commonSandboxSettings(config.sandboxes));
      console.log(JSON.stringify({ configured, opened: loaded(), description: opened.description }));
      `,
      {
        cwd: exampleDir,
        // The configuration may read adapter-docker's light modules (its variables, hosts, image
        // provider and the errors that one names); dockerode and the runtime stay unloaded.
        match:
          /\/dockerode\/|\/adapter-docker\/src\/(?!config|hosts|image-provider|docker-errors|sandbox-network)|\/@kubernetes\/|\/adapter-kubernetes\/|\/packages\/testing\/src\/index/,
      },
    );
    expect(loaded.description).toMatch(/^fake/);
    expect(loaded.configured).toEqual([]);
    // The fake runtime's package, and nothing of Docker's or Kubernetes'.
    expect(loaded.opened.length).toBeGreaterThan(0);
    expect(loaded.opened.filter((url) => /dockerode|adapter-docker|kubernetes/.test(url))).toEqual([]);
  });
});
