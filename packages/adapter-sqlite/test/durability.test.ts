import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { expectOk } from '@acs/core/testing';
import { freshPath, KEY_1, openStorage, testCipher } from './databases.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const DEADLINE_MS = 60_000;

describe('sqlite durability', () => {
  // `normal` skips the fsync of each commit: a power cut may take the last ones back, a SIGKILL may not.
  it.each(['full', 'normal'] as const)(
    'keeps every write whose promise resolved when the process is killed with SIGKILL (synchronous %s)',
    async (synchronous) => {
      const path = freshPath();
      const child = spawn(
        process.execPath,
        [
          '--conditions=@acs/source',
          '--import',
          'tsx',
          'test/durable-writer.ts',
          path,
          KEY_1.toString('hex'),
          synchronous,
        ],
        {
          cwd: packageDir,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      const exited = once(child, 'exit');
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const output = () => `--- stdout (last 2000 characters) ---\n${out.slice(-2000)}\n--- stderr ---\n${err}`;
      const lastAck = () => Number([...out.matchAll(/^ack (\d+)$/gm)].at(-1)?.[1] ?? 0);
      try {
        // Until it has acknowledged a few hundred rounds of writes (or it died, or the deadline passed).
        const deadline = Date.now() + DEADLINE_MS;
        while (lastAck() < 300) {
          if (child.exitCode !== null || child.signalCode !== null)
            throw new Error(
              `the writer ended (${child.exitCode ?? child.signalCode}) before it had written enough\n${output()}`,
            );
          if (Date.now() > deadline)
            throw new Error(
              `the writer acknowledged ${lastAck()} rounds in ${DEADLINE_MS / 1000} s, not 300\n${output()}`,
            );
          await new Promise((r) => setTimeout(r, 20));
        }
        child.kill('SIGKILL');
        const killed = await Promise.race([exited, new Promise((r) => setTimeout(() => r('deadline'), DEADLINE_MS))]);
        if (killed === 'deadline')
          throw new Error(`the writer did not end within ${DEADLINE_MS / 1000} s of SIGKILL\n${output()}`);
      } finally {
        child.kill('SIGKILL');
      }
      // Everything it acknowledged before it died (the output may hold acks the kill overtook: none are lost either).
      const acknowledged = lastAck();
      const storage = await openStorage(path, testCipher());
      const events = await expectOk(storage.events.readAfter('alice', 'c1', 0, 1_000_000));
      expect(events.length, output()).toBeGreaterThanOrEqual(acknowledged);
      expect(events.slice(0, acknowledged).map((e) => (e.payload as { n: number }).n)).toEqual(
        Array.from({ length: acknowledged }, (_, i) => i + 1),
      );
      expect(await expectOk(storage.conversations.count('alice', {}))).toBeGreaterThanOrEqual(acknowledged);
      expect(await expectOk(storage.conversations.get('alice', `conversation-${acknowledged}`))).toMatchObject({
        title: `n=${acknowledged}`,
      });
      const settings = await expectOk(storage.settings.get('alice'));
      expect(settings?.max_iterations).toBeGreaterThanOrEqual(acknowledged);
      expect(settings?.llm_api_key).toBe(`sk-${settings?.max_iterations}`);
    },
  );
});
