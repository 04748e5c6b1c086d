/** The web console in a real browser against the example server with the fake runtime (see console-scenario.ts). */
import { describe, it } from 'vitest';
import { consoleFixtures, driveConsole, SCREENSHOTS } from './console-scenario.js';
import { startServer } from './process.js';

const KEY = 'console-test-key-0123456789abcdef';
const { llm, browser } = consoleFixtures();

describe('the web console, fake runtime', () => {
  it('signs in, stores settings, runs a conversation with a confirmation, survives a network drop, stops and resumes, deletes the sandbox', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' });
    // The fake runtime runs nothing: the command "fails" with the fake's own message.
    await driveConsole({
      server,
      browser: browser(),
      llm: llm(),
      key: KEY,
      echoOutput: /fake runtime: no handler/,
      runtime: 'fake',
    });
    console.info(`console screenshots: ${SCREENSHOTS}`);
  });
});
