import { describe, expect, it } from 'vitest';
import { RuntimeFailure } from '../src/sandbox/runtime-error.js';
import { checkSpawnCommand, startSpawnedProcess, type SpawnFeed } from '../src/sandbox/spawned-process.js';

/**
 * The spawn protocol's process without an engine: a session that records what it was asked and
 * lets the test say what the wrapper printed and how the session ended.
 */
function fakeSession() {
  const seen = { argv: [] as string[], written: [] as string[], beside: [] as string[][], destroyed: 0 };
  let feed: SpawnFeed | null = null;
  const open = (argv: string[], given: SpawnFeed) => {
    seen.argv = argv;
    feed = given;
    return Promise.resolve({
      write: (data: Uint8Array) => {
        seen.written.push(Buffer.from(data).toString('utf8'));
        return Promise.resolve();
      },
      destroy: () => void seen.destroyed++,
      runBeside: (argv: string[]) => {
        seen.beside.push(argv);
        feed?.ended({ exitCode: 143 });
        return Promise.resolve();
      },
    });
  };
  /** The nonce the wrapper was given (after `acs-spawn`). */
  const nonce = () => seen.argv[seen.argv.indexOf('acs-spawn') + 1] ?? '';
  const fed = () => feed as unknown as SpawnFeed;
  return { seen, open, nonce, fed };
}

/** Lets `open` run and the test feed the session before the start settles. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('startSpawnedProcess', () => {
  it('starts once the wrapper names the pid, and hands on only what the program wrote', async () => {
    const session = fakeSession();
    const starting = startSpawnedProcess({ sandboxId: 's1', command: ['cat'], open: session.open });
    await tick();
    session.fed().stdout(Buffer.from(`ACS-SPAWN ${session.nonce()} 42\nhel`));
    const process = await starting;
    const out: string[] = [];
    process.onStdout((chunk) => out.push(Buffer.from(chunk).toString('utf8')));
    session.fed().stdout(Buffer.from('lo'));
    await tick();
    expect(out.join('')).toBe('hello');
    expect(session.seen.argv.slice(-2)).toEqual([session.nonce(), 'cat']);
    await process.write('in');
    expect(session.seen.written).toEqual(['in']);
  });

  it("explains a program that is not there in the wrapper's words", async () => {
    const session = fakeSession();
    const starting = startSpawnedProcess({ sandboxId: 's1', command: ['nope'], open: session.open });
    await tick();
    session.fed().stderr(Buffer.from('nope: program not found\n'));
    session.fed().ended({ exitCode: 127 });
    await expect(starting).rejects.toThrow(new RuntimeFailure('cannot start "nope" in sandbox s1: program not found'));
  });

  it('says what the engine said of a session that ended before the program started', async () => {
    const session = fakeSession();
    const starting = startSpawnedProcess({ sandboxId: 's1', command: ['x'], open: session.open });
    await tick();
    session.fed().ended(Promise.resolve({ exitCode: null, message: 'container not found' }));
    await expect(starting).rejects.toThrow(/it ended before it started \(exit code unknown\); container not found/);
  });

  it('refuses output that is not the wrapper, and cuts the session', async () => {
    const session = fakeSession();
    const starting = startSpawnedProcess({ sandboxId: 's1', command: ['x'], open: session.open });
    await tick();
    session.fed().stdout(Buffer.from('ACS-SPAWN someone-else 7\n'));
    await expect(starting).rejects.toThrow(/cannot start "x" in sandbox s1: ACS-SPAWN someone-else 7/);
    expect(session.seen.destroyed).toBe(1);
  });

  it('kills by the killer beside it, then cuts the session; exited carries the code, and stdin is closed', async () => {
    const session = fakeSession();
    const starting = startSpawnedProcess({ sandboxId: 's1', command: ['sleep'], open: session.open });
    await tick();
    session.fed().stdout(Buffer.from(`ACS-SPAWN ${session.nonce()} 42\n`));
    const process = await starting;
    await Promise.all([process.kill(), process.kill()]);
    expect(session.seen.beside).toHaveLength(1);
    expect(session.seen.beside[0]?.slice(-3)).toEqual(['acs-kill', '42', '20']);
    expect(session.seen.destroyed).toBe(1);
    expect(await process.exited).toEqual({ exit_code: 143 });
    await expect(process.write('late')).rejects.toThrow(/has ended; its stdin is closed/);
  });
});

describe('checkSpawnCommand', () => {
  it('refuses an empty command', () => {
    expect(() => checkSpawnCommand([])).toThrow(/the command is empty/);
    expect(() => checkSpawnCommand([''])).toThrow(/the command is empty/);
    expect(() => checkSpawnCommand(['ls'])).not.toThrow();
  });
});
