import { describe, expect, it } from 'vitest';
import { killArgv, spawnArgv, spawnedPid } from '../src/sandbox/spawn-protocol.js';

describe('the spawn protocol the runtime adapters share', () => {
  it("reads the program's pid off the wrapper's first line, also as a terminal ends it, and only with this start's nonce", () => {
    expect(spawnedPid('ACS-SPAWN abc123 4711', 'abc123')).toBe(4711);
    expect(spawnedPid('ACS-SPAWN abc123 4711\r', 'abc123')).toBe(4711);
    expect(spawnedPid('ACS-SPAWN other 4711', 'abc123')).toBeNull();
    expect(spawnedPid('ls: program not found', 'abc123')).toBeNull();
  });

  it('starts the command under the wrapper and kills with the grace in tenths of a second', () => {
    expect(spawnArgv('n1', ['echo', 'hi']).slice(-4)).toEqual(['acs-spawn', 'n1', 'echo', 'hi']);
    expect(spawnArgv('n1', ['echo'])[0]).toBe('sh');
    expect(killArgv(42, 2_000).slice(-3)).toEqual(['acs-kill', '42', '20']);
  });
});
