/**
 * Sandboxes' exposed URLs on loopback ports, as the example server gives them by default when it
 * listens on loopback: the URL is `http://127.0.0.1:<port>` (it resolves with any resolver, no
 * `*.localhost` needed), reached as it is, opened by the sandbox's key, and closed with the
 * sandbox. A spec whose image serves HTTP on its exposed port (the bookworm image's python3
 * http.server standing in for the agent-server). Needs Docker and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { body, call, startServer, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const user = `loopback-${randomBytes(3).toString('hex')}`;
const KEY = `${user}-key-0123456789`;

afterAll(async () => {
  await removeContainersOf(new Docker(), user).catch(() => {});
}, 180_000);

const web = {
  id: 'web',
  image: 'acs-sandbox:bookworm',
  command: [
    'bash',
    '-c',
    'mkdir -p /srv/ok && echo served-by-$(hostname) > /srv/ok/index.html && cd /srv && exec python3 -m http.server --bind "$ACS_BIND_HOST" "$ACS_PORT_WEB"',
  ],
  exposed_ports: [{ name: 'WEB', port: 8000, health_path: '/ok/' }],
  session_api_key_variable: 'WEB_KEY',
};

/** Whether a TCP connection to a URL's address and port is taken (false: refused). */
function connectable(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNREFUSED' ? resolve(false) : reject(error),
    );
  });
}

describe('ACS_SANDBOX_LOOPBACK_PORTS', () => {
  it('is on when HOST is a loopback address, unless turned off, and off elsewhere unless turned on', () => {
    const env = { SESSION_API_KEY: 'default-key-0123456789abcdef' };
    expect(loadConfig(env).sandboxLoopbackPorts).toBe(true);
    expect(loadConfig({ ...env, HOST: '::1' }).sandboxLoopbackPorts).toBe(true);
    expect(loadConfig({ ...env, HOST: 'localhost' }).sandboxLoopbackPorts).toBe(true);
    expect(loadConfig({ ...env, ACS_SANDBOX_LOOPBACK_PORTS: 'false' }).sandboxLoopbackPorts).toBe(false);
    expect(loadConfig({ ...env, HOST: '0.0.0.0' }).sandboxLoopbackPorts).toBe(false);
    expect(loadConfig({ ...env, HOST: '0.0.0.0', ACS_SANDBOX_LOOPBACK_PORTS: 'true' }).sandboxLoopbackPorts).toBe(true);
    expect(() => loadConfig({ ...env, ACS_SANDBOX_LOOPBACK_PORTS: 'maybe' })).toThrow(/ACS_SANDBOX_LOOPBACK_PORTS/);
  });
});

describe('a sandbox URL of the example server on loopback', () => {
  it('is a loopback port of its own, reached as given, opened by the sandbox key, and closed with the sandbox', async () => {
    const server = await startServer({
      ACS_API_KEYS: `${user}:${KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_SPECS: JSON.stringify([web]),
      ACS_SANDBOX_IMAGE_BUILD: 'off',
    });
    const { id } = await body<{ id: string }>(call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'web' }));
    const info = await waitFor(`sandbox ${id} RUNNING`, async () => {
      const [found] = await body<
        ({ status: string; session_api_key: string; exposed_urls: { url: string }[] } | null)[]
      >(call(server.url, `/api/v1/sandboxes?id=${id}`, KEY));
      return found?.status === 'RUNNING' ? found : undefined;
    });
    const url = info.exposed_urls[0]?.url ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(url).port).not.toBe(new URL(server.url).port);

    const served = await fetch(`${url}/ok/`, { headers: { 'X-Session-API-Key': info.session_api_key } });
    expect(served.status).toBe(200);
    expect(await served.text()).toMatch(/^served-by-/);
    expect((await fetch(`${url}/ok/`)).status).toBe(401);

    await body(call(server.url, `/api/v1/sandboxes/${id}`, KEY, undefined, 'DELETE'));
    expect(await connectable(url)).toBe(false);
  }, 300_000);
});
