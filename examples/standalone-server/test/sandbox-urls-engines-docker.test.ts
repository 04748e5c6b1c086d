/**
 * A sandbox's exposed URL is reached through the server whichever Docker engine runs it: two
 * engines (this machine's and a second dockerd the test starts), one sandbox on each (each
 * engine takes one), a spec whose image serves HTTP on its exposed port (the bookworm image's
 * python3 http.server standing in for the agent-server), and requests through the server's
 * proxy to each. Needs Docker, root (for the second engine) and the acs-sandbox:bookworm image.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDockerEngine, type DockerEngineProcess } from '@acs/testing';
import { body, call, startServer, waitFor } from './process.js';
import { removeContainersOf } from './containers.js';

const user = `engines-${randomBytes(3).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
let engine: DockerEngineProcess | undefined;

beforeAll(async () => {
  engine = await startDockerEngine({ images: ['acs-sandbox:bookworm'] });
}, 300_000);

afterAll(async () => {
  for (const docker of [new Docker(), ...(engine ? [new Docker({ socketPath: engine.socket })] : [])])
    await removeContainersOf(docker, user).catch(() => {});
  await engine?.stop();
}, 180_000);

/** GET a path of a sandbox's URL as the server gave it (a loopback port of the server's, which resolves as it is). */
function viaUrl(url: string, path: string, key: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers: { 'X-Session-API-Key': key } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('sandbox URLs on several engines', () => {
  it('proxies to a sandbox on either engine', async () => {
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
    const server = await startServer({
      ACS_API_KEYS: `${user}:${KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_SPECS: JSON.stringify([web]),
      ACS_DOCKER_HOSTS: `unix:///var/run/docker.sock?name=one&max=1,unix://${engine!.socket}?name=two&max=1`,
      ACS_SANDBOX_IMAGE_BUILD: 'off',
    });
    const ids: string[] = [];
    for (let i = 0; i < 2; i++)
      ids.push((await body<{ id: string }>(call(server.url, '/api/v1/sandboxes', KEY, { sandbox_spec_id: 'web' }))).id);
    const engines: string[] = [];
    for (const id of ids) {
      const info = await waitFor(`sandbox ${id} RUNNING`, async () => {
        const [found] = await body<
          ({ status: string; session_api_key: string; exposed_urls: { url: string }[] } | null)[]
        >(call(server.url, `/api/v1/sandboxes?id=${id}`, KEY));
        return found?.status === 'RUNNING' ? found : undefined;
      });
      const answer = await viaUrl(info.exposed_urls[0]?.url ?? '', '/ok/', info.session_api_key);
      expect(answer.status).toBe(200);
      expect(answer.text).toMatch(/^served-by-/);
      const onFirst = await new Docker().listContainers({ all: true, filters: { label: [`io.acs.sandbox-id=${id}`] } });
      engines.push(onFirst.length > 0 ? 'one' : 'two');
    }
    expect(engines.sort()).toEqual(['one', 'two']);
  }, 300_000);
});
