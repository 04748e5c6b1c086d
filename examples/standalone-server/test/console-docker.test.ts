/** The web console in a real browser against the example server running sandboxes on Docker (see console-scenario.ts). */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, describe, it } from 'vitest';
import { removeContainersOf } from './containers.js';
import { consoleFixtures, driveConsole, SCREENSHOTS } from './console-scenario.js';
import { startServer } from './process.js';

const docker = new Docker();
const user = `console-docker-test-${randomBytes(4).toString('hex')}`;
const KEY = `${user}-key-0123456789`;
const { llm, browser } = consoleFixtures();

afterAll(() => removeContainersOf(docker, user));

describe('the web console, Docker runtime', () => {
  it('runs the whole console scenario with real containers: the command output is the real one', async () => {
    const server = await startServer({
      ACS_API_KEYS: `${user}:${KEY}`,
      SESSION_API_KEY: 'unused-default-key-0123456789',
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'docker',
      ACS_SANDBOX_NETWORK: 'none',
    });
    await driveConsole({
      server,
      browser: browser(),
      llm: llm(),
      key: KEY,
      echoOutput: /hello-from-console/,
      runtime: 'docker',
    });
    console.info(`console screenshots: ${SCREENSHOTS}`);
  });
});
