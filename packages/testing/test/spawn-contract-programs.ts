import { SPAWN_CONTRACT_PROGRAMS } from '@acs/core/testing';
import type { FakeSandboxRuntime } from '@acs/testing';

const argv = (expected: readonly string[]) => (command: readonly string[]) =>
  command.length === expected.length && command.every((word, i) => word === expected[i]);

/** Plays the programs the runtime contract spawns, as a POSIX system would run them. */
export function playSpawnContractPrograms(runtime: FakeSandboxRuntime): FakeSandboxRuntime {
  return runtime
    .onSpawn(argv(SPAWN_CONTRACT_PROGRAMS.echo), async (_request, { stdin, stdout }) => {
      for await (const text of stdin) stdout.write(text);
    })
    .onSpawn(argv(SPAWN_CONTRACT_PROGRAMS.split), (_request, { stdout, stderr }) => {
      stdout.write('to-out');
      stderr.write('to-err');
      return 3;
    })
    .onSpawn(argv(SPAWN_CONTRACT_PROGRAMS.deaf), (_request, { stdout }) => {
      stdout.write('ready\n');
      return new Promise<never>(() => {});
    })
    .onSpawn(argv(SPAWN_CONTRACT_PROGRAMS.terminal), async (request, { stdin, stdout }) => {
      if (!request.tty) throw new Error('the terminal program expects tty: true');
      stdout.write('ready\r\n');
      let typed = '';
      let answered = false;
      for await (const text of stdin) {
        if (text.includes('\x03') && answered) {
          stdout.write('interrupted\r\n');
          return 7;
        }
        typed += text;
        const newline = typed.indexOf('\n');
        if (!answered && newline >= 0) {
          answered = true;
          stdout.write(`got ${typed.slice(0, newline)}\r\nto-err\r\n`);
        }
      }
      return 0;
    });
}
