import { z } from 'zod';
import { defineSandboxRuntime } from './runtime-module.js';

/** `ACS_SANDBOXES=fake`: an in-memory runtime that runs nothing (demos, tests); one process's. */
export const fakeRuntime = defineSandboxRuntime({
  name: 'fake',
  env: z.object({}),
  options: () => null,
  async open() {
    const { FakeSandboxRuntime } = await import('@acs/testing');
    return { runtime: new FakeSandboxRuntime(), description: 'fake (in memory, runs nothing)', unavailable: null };
  },
  async openForCli() {
    // Its sandboxes live in the server's memory and end with it: there is never one to list or prune.
    const { FakeSandboxRuntime } = await import('@acs/testing');
    return { runtime: new FakeSandboxRuntime(), where: 'the fake runtime (its sandboxes end with the server process)' };
  },
});
