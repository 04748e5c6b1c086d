import { describe, expect, it } from 'vitest';
import { engineMethods, type EngineRunOptions, type SandboxEngine } from '../src/sandbox/engine-methods.js';
import { attemptRuntime, unreachableCode } from '../src/sandbox/runtime-error.js';
import { createWorkingDirectories, missingFile } from '../src/sandbox/runtime-files.js';
import type { ExecResult } from '../src/sandbox/runtime.js';
import type { TarHead } from '../src/sandbox/tar.js';

/**
 * The methods every runtime shares, over an engine that is a table: what it runs, what the
 * archive of each path holds. What an engine's own adapter does is its own test's.
 */
function fakeEngine(files: Record<string, TarHead>, listing: ExecResult) {
  const runs: { argv: readonly string[]; options: EngineRunOptions }[] = [];
  const written: { path: string; content: string }[] = [];
  const engine: SandboxEngine = {
    run: (_sandboxId, argv, options) => {
      runs.push({ argv, options });
      return Promise.resolve(listing);
    },
    firstArchiveEntry: (_sandboxId, where) => {
      const entry = files[where.path];
      return entry ? Promise.resolve(entry) : Promise.reject(missingFile(where.asked, where.path));
    },
    writeFile: (_sandboxId, path, content) => {
      written.push({ path, content: Buffer.from(content).toString('utf8') });
      return Promise.resolve();
    },
  };
  const methods = engineMethods({
    engine,
    paths: createWorkingDirectories(() => Promise.resolve('/workspace')),
    attempt: (_operation, work) => attemptRuntime(work, (error) => ({ type: 'failed', message: String(error) })),
  });
  return { methods, runs, written };
}

const ok = (stdout: string): ExecResult => ({ exit_code: 0, stdout, stderr: '', timed_out: false, duration_ms: 1 });
const file = (path: string, text: string): TarHead => ({
  type: 'file',
  path,
  size: text.length,
  content: Buffer.from(text),
});

describe('engineMethods', () => {
  it('runs exec under `timeout` in the resolved directory, with the host waiting 10 s longer', async () => {
    const { methods, runs } = fakeEngine({}, ok('hi'));
    const result = await methods.exec('s', { command: ['echo', 'hi'], cwd: 'src', env: { A: '1' }, timeoutMs: 1_500 });
    expect(result._unsafeUnwrap().stdout).toBe('hi');
    expect(runs[0]).toEqual({
      argv: ['timeout', '-s', 'KILL', '2', 'echo', 'hi'],
      options: {
        context: { cwd: '/workspace/src', env: { A: '1' } },
        hostDeadlineMs: 11_500,
        timeoutMs: 1_500,
        maxOutputBytes: undefined,
      },
    });
  });

  it('follows symbolic links from the directory of each link, and says where a chain leads nowhere', async () => {
    const { methods } = fakeEngine(
      {
        '/workspace/link': { type: 'symlink', path: 'workspace/link', target: '../data/real' },
        '/data/real': file('data/real', 'content'),
        '/workspace/dangling': { type: 'symlink', path: 'workspace/dangling', target: 'gone' },
        '/workspace/dir': { type: 'directory', path: 'workspace/dir' },
      },
      ok(''),
    );
    const read = await methods.readFile('s', 'link');
    expect(Buffer.from(read._unsafeUnwrap().bytes).toString('utf8')).toBe('content');
    expect((await methods.readFile('s', 'dangling'))._unsafeUnwrapErr()).toEqual({
      type: 'not_found',
      message: '/workspace/dangling is a symbolic link to /workspace/gone, which does not exist',
    });
    expect((await methods.readFile('s', 'dir'))._unsafeUnwrapErr().type).toBe('is_directory');
  });

  it('takes a loop of links for what it is', async () => {
    const { methods } = fakeEngine({ '/workspace/a': { type: 'symlink', path: 'workspace/a', target: 'a' } }, ok(''));
    expect((await methods.readFile('s', 'a'))._unsafeUnwrapErr()).toEqual({
      type: 'not_found',
      message: '/workspace/a: more than 8 symbolic links in a row (a loop?)',
    });
  });

  it('writes at the resolved path, never at /', async () => {
    const { methods, written } = fakeEngine({}, ok(''));
    expect((await methods.writeFile('s', 'a/b.txt', Buffer.from('x'))).isOk()).toBe(true);
    expect(written).toEqual([{ path: '/workspace/a/b.txt', content: 'x' }]);
    expect((await methods.writeFile('s', '/', Buffer.from('x')))._unsafeUnwrapErr().message).toBe('cannot write to /');
  });

  it("lists a directory from find's records, sorted, names with tabs kept", async () => {
    const { methods, runs } = fakeEngine({}, ok('f\t3\tb.txt\0d\t4096\ta\tdir\0l\t4\tc\0'));
    expect((await methods.listDirectory('s', '.'))._unsafeUnwrap()).toEqual([
      { name: 'a\tdir', path: '/workspace/a\tdir', type: 'directory', size: 4096 },
      { name: 'b.txt', path: '/workspace/b.txt', type: 'file', size: 3 },
      { name: 'c', path: '/workspace/c', type: 'symlink', size: 4 },
    ]);
    expect(runs[0]?.options.context).toBeUndefined();
  });

  it('says why a directory cannot be listed, not_found when it is not there', async () => {
    const { methods } = fakeEngine({}, { ...ok(''), exit_code: 1, stderr: "find: '/x': No such file or directory\n" });
    expect((await methods.listDirectory('s', '/x'))._unsafeUnwrapErr()).toEqual({
      type: 'not_found',
      message: "cannot list /x: find: '/x': No such file or directory",
    });
  });
});

describe('unreachableCode', () => {
  it('finds a connection code along the cause chain, and nothing else', () => {
    expect(unreachableCode(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe('ECONNREFUSED');
    expect(unreachableCode(new Error('fetch failed', { cause: { code: 'UND_ERR_SOCKET' } }))).toBe('UND_ERR_SOCKET');
    expect(unreachableCode(Object.assign(new Error('x'), { code: 'ERR_INVALID_ARG_TYPE' }))).toBeUndefined();
    expect(unreachableCode(new Error('plain'))).toBeUndefined();
  });
});
