import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../clock.js';
import type { IdGenerator } from '../ids.js';
import {
  clippedOutputNote,
  DEFAULT_READ_FILE_MAX_BYTES,
  splitClippedOutput,
  type RuntimeObservation,
  type SandboxProcess,
  type SandboxRuntime,
} from '../sandbox/runtime.js';
import type { SandboxSpec } from '../sandbox/schema.js';
import { specFixture } from './fixtures.js';
import { expectOk, type StoreFactory } from './stores.js';

export interface SandboxRuntimeContractOptions {
  /** The spec sandboxes are created from (a real runtime needs an image it has). */
  spec?: SandboxSpec;
  /** How long a sandbox may take to become running (default 120 s). */
  startTimeoutMs?: number;
  /** Per-test timeout for vitest (default 180 s). */
  testTimeoutMs?: number;
  /** Ids for the sandboxes the suite creates; they are deleted at the end of each test. */
  ids?: IdGenerator;
  /**
   * What a pause keeps (exec and shell contracts): `processes` (default) for a runtime that freezes the
   * sandbox (Docker's pause: memory, processes and files as they were); `workspace` for one that
   * stops it and keeps only its working directory (Kubernetes' scale to zero: a new pod on the
   * same claim, so processes and files outside the working directory are gone after a resume).
   */
  pauseKeeps?: 'processes' | 'workspace';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function untilNot(
  runtime: SandboxRuntime,
  id: string,
  state: RuntimeObservation['state'],
  timeoutMs: number,
): Promise<RuntimeObservation> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const observation = await expectOk(runtime.inspect(id));
    if (observation.state !== state || Date.now() > deadline) return observation;
    await sleep(50);
  }
}

/**
 * The programs the spawn cases of the runtime contract start. A runtime that runs real
 * programs needs `sh`, `cat` and `sleep` in the spec's image; a fake must play these argvs
 * as described (the memory adapter's tests show how).
 */
export const SPAWN_CONTRACT_PROGRAMS = {
  /** Copies stdin to stdout until killed. */
  echo: ['cat'],
  /** Writes `to-out` to stdout and `to-err` to stderr, then exits with code 3. */
  split: ['sh', '-c', 'printf to-out; printf to-err >&2; exit 3'],
  /** Prints `ready` and a newline, then ignores stdin and SIGTERM until killed. */
  deaf: ['sh', '-c', 'trap "" TERM INT HUP; echo ready; exec sleep 600'],
  /** A program that does not exist. */
  missing: ['acs-contract-no-such-program'],
  /**
   * Run on a terminal (`tty: true`): turns echo off, prints `ready`, reads a line and prints
   * `got <line>`, then `to-err` on stderr; on SIGINT (Ctrl-C at the terminal) prints
   * `interrupted` and exits with code 7.
   */
  terminal: [
    'sh',
    '-c',
    'stty -echo; echo ready; read line; echo "got $line"; trap "echo interrupted; exit 7" INT; echo to-err >&2; while :; do sleep 1; done',
  ],
} as const satisfies Record<string, readonly string[]>;

/** Collects a process's output from the moment it is called (right after spawn resolves). */
export function collectProcessOutput(child: SandboxProcess) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.onStdout((chunk) => out.push(Buffer.from(chunk)));
  child.onStderr((chunk) => err.push(Buffer.from(chunk)));
  return { stdout: () => Buffer.concat(out).toString('utf8'), stderr: () => Buffer.concat(err).toString('utf8') };
}

/** Polls every 10 ms until the condition holds or the time is up (the caller then asserts). */
export async function waitUntil(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await sleep(10);
}

/**
 * Contract every SandboxRuntime must meet: lifecycle, idempotence, unknown ids, files (a read
 * limit, directories, symbolic links), and spawned processes. The file cases make symbolic links
 * with the argv `ln -s TARGET LINK` through exec: a fake must play it (FakeSandboxRuntime does).
 */
export function describeSandboxRuntimeContract(
  name: string,
  make: StoreFactory<SandboxRuntime>,
  options: SandboxRuntimeContractOptions = {},
): void {
  const spec = options.spec ?? specFixture();
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  let n = 0;
  const nextId = () =>
    options.ids?.next() ??
    `contract${process.pid.toString(16)}${Date.now().toString(16)}${(n++).toString(16)}`.padEnd(32, '0').slice(0, 32);

  /** A new runtime with one sandbox of the spec, running. */
  const runningSandbox = async (): Promise<{ runtime: SandboxRuntime; id: string }> => {
    const runtime = await make();
    const id = nextId();
    await expectOk(
      runtime.create({
        sandbox_id: id,
        user_id: 'alice',
        installation_id: 'acs-tests',
        spec,
        env: { ...spec.initial_env },
      }),
    );
    expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
    return { runtime, id };
  };

  describe(`SandboxRuntime contract: ${name}`, { timeout: options.testTimeoutMs ?? 180_000 }, () => {
    it('declares the port version it implements', async () => {
      const runtime = await make();
      expect(runtime.specificationVersion).toBe('v1');
    });

    it('creates a sandbox that becomes running, pauses and resumes idempotently, and deletes it', async () => {
      const runtime = await make();
      const id = nextId();
      try {
        const created = await expectOk(
          runtime.create({
            sandbox_id: id,
            user_id: 'alice',
            installation_id: 'acs-tests',
            spec,
            env: { ...spec.initial_env, ACS_CONTRACT: '1' },
          }),
        );
        expect(['starting', 'running']).toContain(created.state);
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');

        expect((await expectOk(runtime.pause(id))).state).toBe('paused');
        expect((await expectOk(runtime.inspect(id))).state).toBe('paused');
        expect((await expectOk(runtime.pause(id))).state).toBe('paused');

        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);

        await expectOk(runtime.delete(id));
        expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
      } finally {
        await runtime.delete(id);
      }
    });

    it('lists only the sandboxes of the installation asked about, with their owner and spec', async () => {
      const runtime = await make();
      const mine = nextId();
      const theirs = nextId();
      try {
        await expectOk(
          runtime.create({
            sandbox_id: mine,
            user_id: 'default',
            installation_id: 'acs-contract-a',
            spec,
            env: { ...spec.initial_env },
          }),
        );
        await expectOk(
          runtime.create({
            sandbox_id: theirs,
            user_id: 'default',
            installation_id: 'acs-contract-b',
            spec,
            env: { ...spec.initial_env },
          }),
        );
        const listedA = (await expectOk(runtime.list('acs-contract-a'))).filter(
          (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
        );
        expect(listedA).toEqual([
          expect.objectContaining({
            sandbox_id: mine,
            user_id: 'default',
            spec_id: spec.id,
            image: spec.image,
            working_dir: spec.working_dir,
          }),
        ]);
        const listedB = (await expectOk(runtime.list('acs-contract-b'))).filter(
          (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
        );
        expect(listedB.map((s) => s.sandbox_id)).toEqual([theirs]);
        expect(
          (await expectOk(runtime.list('acs-contract-none'))).filter(
            (s) => s.sandbox_id === mine || s.sandbox_id === theirs,
          ),
        ).toEqual([]);
      } finally {
        await runtime.delete(mine);
        await runtime.delete(theirs);
      }
    });

    it('reports an unknown sandbox as missing and deletes it without complaint', async () => {
      const runtime = await make();
      const id = nextId();
      expect((await expectOk(runtime.inspect(id))).state).toBe('missing');
      await expectOk(runtime.delete(id));
    });

    it('round-trips files byte for byte, creating parent directories, and lists directories', async () => {
      const runtime = await make();
      const id = nextId();
      try {
        await expectOk(
          runtime.create({
            sandbox_id: id,
            user_id: 'alice',
            installation_id: 'acs-tests',
            spec,
            env: { ...spec.initial_env },
          }),
        );
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        const bytes = new Uint8Array(256 * 4).map((_, i) => i % 256);
        await expectOk(runtime.writeFile(id, 'nested/deeper/all-bytes.bin', bytes));
        const read = await expectOk(runtime.readFile(id, `${spec.working_dir}/nested/deeper/all-bytes.bin`));
        expect(Buffer.from(read.bytes).equals(Buffer.from(bytes))).toBe(true);
        expect(read).toMatchObject({ size: bytes.length, truncated: false });
        await expectOk(
          runtime.writeFile(id, `${spec.working_dir}/nested/notes ü.txt`, new TextEncoder().encode('héllo\n')),
        );
        await expectOk(runtime.writeFile(id, 'nested/notes ü.txt', new TextEncoder().encode('second')));
        expect(
          new TextDecoder().decode((await expectOk(runtime.readFile(id, 'nested/./deeper/../notes ü.txt'))).bytes),
        ).toBe('second');
        const listed = await expectOk(runtime.listDirectory(id, 'nested'));
        expect(listed.map((e) => [e.name, e.type])).toEqual([
          ['deeper', 'directory'],
          ['notes ü.txt', 'file'],
        ]);
        expect(listed[1]).toMatchObject({ path: `${spec.working_dir}/nested/notes ü.txt`, size: 6 });
        const missing = await runtime.readFile(id, 'nested/nope.txt');
        expect(missing.isErr() && missing.error.type).toBe('not_found');
        const missingDir = await runtime.listDirectory(id, 'no/such/dir');
        expect(missingDir.isErr() && missingDir.error.type).toBe('not_found');
      } finally {
        await runtime.delete(id);
      }
    });

    describe('reading files: a limit, directories, symbolic links (made with `ln -s TARGET LINK` through exec)', () => {
      let runtime: SandboxRuntime;
      let id: string;
      const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
      const link = async (target: string, path: string) =>
        expect(await expectOk(runtime.exec(id, { command: ['ln', '-s', target, path] }))).toMatchObject({
          exit_code: 0,
        });
      const failure = async (path: string) => {
        const result = await runtime.readFile(id, path);
        return result.isErr() ? result.error : `read ${result.isOk() ? result.value.size : 0} bytes`;
      };

      beforeAll(async () => {
        ({ runtime, id } = await runningSandbox());
      });
      afterAll(async () => {
        await runtime.delete(id);
      });

      it('reads at most maxBytes of a file and says how large it is whole; 16 MiB when not told', async () => {
        const bytes = new Uint8Array(100_000).map((_, i) => 32 + (i % 90));
        await expectOk(runtime.writeFile(id, 'limit/hundred-k.txt', bytes));
        const head = await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 1000 }));
        expect(head).toMatchObject({ size: 100_000, truncated: true });
        expect(Buffer.from(head.bytes).equals(Buffer.from(bytes.subarray(0, 1000)))).toBe(true);
        expect(await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 0 }))).toMatchObject({
          bytes: new Uint8Array(0),
          size: 100_000,
          truncated: true,
        });
        const whole = await expectOk(runtime.readFile(id, 'limit/hundred-k.txt', { maxBytes: 100_000 }));
        expect(whole).toMatchObject({ size: 100_000, truncated: false });
        expect(whole.bytes.length).toBe(100_000);

        const large = new Uint8Array(DEFAULT_READ_FILE_MAX_BYTES + 4096).fill(120);
        await expectOk(runtime.writeFile(id, 'limit/large.bin', large));
        const unasked = await expectOk(runtime.readFile(id, 'limit/large.bin'));
        expect(unasked).toMatchObject({ size: large.length, truncated: true });
        expect(unasked.bytes.length).toBe(DEFAULT_READ_FILE_MAX_BYTES);
      });

      it('refuses a directory as is_directory, saying so', async () => {
        await expectOk(runtime.writeFile(id, 'a-dir/inner.txt', new TextEncoder().encode('inside')));
        for (const path of ['a-dir', `${spec.working_dir}/a-dir/`, spec.working_dir, '/']) {
          const error = await failure(path);
          expect(error, path).toMatchObject({ type: 'is_directory' });
          expect(typeof error === 'object' && error.message, path).toMatch(/directory/);
        }
      });

      it('follows symbolic links inside the sandbox: relative to the link, absolute, chained, through a linked directory', async () => {
        await expectOk(runtime.writeFile(id, 'links/target.txt', new TextEncoder().encode('linked')));
        await link('target.txt', 'links/relative');
        await link(`${spec.working_dir}/links/target.txt`, 'links/absolute');
        await link('relative', 'links/chain');
        await link('links', 'linked-dir');
        for (const path of [
          'links/relative',
          'links/absolute',
          'links/chain',
          'linked-dir/target.txt',
          'linked-dir/chain',
        ]) {
          const read = await expectOk(runtime.readFile(id, path));
          expect({ path, text: text(read.bytes), size: read.size }).toEqual({ path, text: 'linked', size: 6 });
        }
        expect(await expectOk(runtime.readFile(id, 'links/chain', { maxBytes: 2 }))).toMatchObject({
          size: 6,
          truncated: true,
          bytes: new TextEncoder().encode('li'),
        });
        expect(await failure('linked-dir')).toMatchObject({ type: 'is_directory' });
      });

      it('answers not_found for a dangling link and for a loop of links', async () => {
        await link('nowhere', 'links/dangling');
        await link('loop-b', 'links/loop-a');
        await link('loop-a', 'links/loop-b');
        for (const path of ['links/dangling', 'links/loop-a'])
          expect(await failure(path), path).toMatchObject({ type: 'not_found' });
      });
    });

    it('refuses to pause or resume a sandbox it does not have, with a message', async () => {
      const runtime = await make();
      const id = nextId();
      const paused = await runtime.pause(id);
      const resumed = await runtime.resume(id);
      expect(paused.isErr() && paused.error.message.length > 0).toBe(true);
      expect(resumed.isErr() && resumed.error.message.length > 0).toBe(true);
    });

    describe('spawn (programs: SPAWN_CONTRACT_PROGRAMS)', () => {
      let runtime: SandboxRuntime;
      let id: string;
      const started: SandboxProcess[] = [];
      const spawn = async (command: readonly string[], tty = false) => {
        const child = await expectOk(runtime.spawn(id, { command, ...(tty ? { tty } : {}) }));
        started.push(child);
        return child;
      };

      beforeAll(async () => {
        ({ runtime, id } = await runningSandbox());
      });
      afterAll(async () => {
        await Promise.all(started.map((child) => child.kill()));
        await runtime.delete(id);
      });

      it('echoes what is written to stdin on stdout, in order', async () => {
        const child = await spawn(SPAWN_CONTRACT_PROGRAMS.echo);
        const output = collectProcessOutput(child);
        await child.write('hello\n');
        await child.write(new TextEncoder().encode('ünïcode wörld\n'));
        for (let i = 0; i < 20; i++) await child.write(`line ${i}\n`);
        const expected = `hello\nünïcode wörld\n${Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join('')}`;
        await waitUntil(() => output.stdout() === expected);
        expect(output.stdout()).toBe(expected);
        expect(output.stderr()).toBe('');
        await child.kill();
        expect(await child.exited).toHaveProperty('exit_code');
      });

      it('keeps stderr apart from stdout and reports the exit code; a process that has ended takes no input', async () => {
        const child = await spawn(SPAWN_CONTRACT_PROGRAMS.split);
        const output = collectProcessOutput(child);
        expect(await child.exited).toEqual({ exit_code: 3 });
        expect(output.stdout()).toBe('to-out');
        expect(output.stderr()).toBe('to-err');
        await expect(child.write('too late\n')).rejects.toThrow();
        await child.kill();
      });

      it('kill() ends a process that ignores stdin and SIGTERM; kill is idempotent', async () => {
        const child = await spawn(SPAWN_CONTRACT_PROGRAMS.deaf);
        const output = collectProcessOutput(child);
        await waitUntil(() => output.stdout() === 'ready\n');
        expect(output.stdout()).toBe('ready\n');
        // It would sleep 10 minutes: ending within 60 s means kill() ended it.
        await Promise.all([child.kill(), child.kill()]);
        const ended = await Promise.race([
          child.exited.then(() => 'exited'),
          new Promise((r) => setTimeout(() => r('still running after 60 s'), 60_000).unref()),
        ]);
        expect(ended).toBe('exited');
        await child.kill();
        await expect(child.write('anyone?\n')).rejects.toThrow();
      });

      it('runs a process on a terminal: one merged stream, input through the line discipline, Ctrl-C as SIGINT', async () => {
        const child = await spawn(SPAWN_CONTRACT_PROGRAMS.terminal, true);
        const output = collectProcessOutput(child);
        // A terminal ends lines with \r\n; what matters here is what was said, and where.
        const said = () => output.stdout().replace(/\r/g, '');
        await waitUntil(() => said() === 'ready\n');
        expect(said()).toBe('ready\n');
        await child.write('hello\n');
        await waitUntil(() => said().endsWith('to-err\n'));
        expect(said()).toBe('ready\ngot hello\nto-err\n');
        await child.write('\x03');
        expect(await child.exited).toEqual({ exit_code: 7 });
        expect(said()).toBe('ready\ngot hello\nto-err\ninterrupted\n');
        expect(output.stderr()).toBe('');
      });

      it('refuses to start a program that does not exist, saying so', async () => {
        const result = await runtime.spawn(id, { command: SPAWN_CONTRACT_PROGRAMS.missing });
        expect(result.isErr() && result.error.type).toBe('failed');
        expect(result.isErr() && result.error.message).toMatch(/not found/i);
      });

      it('refuses to spawn in a paused sandbox or one it does not have', async () => {
        await expectOk(runtime.pause(id));
        try {
          const paused = await runtime.spawn(id, { command: SPAWN_CONTRACT_PROGRAMS.echo });
          expect(paused.isErr() && paused.error.type).toBe('failed');
          expect(paused.isErr() && paused.error.message).toMatch(/paused/);
        } finally {
          await expectOk(runtime.resume(id));
          expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        }
        const missing = await runtime.spawn(nextId(), { command: SPAWN_CONTRACT_PROGRAMS.echo });
        expect(missing.isErr() && missing.error.type).toBe('not_found');
      });
    });
  });
}

/** Contract for Clock implementations. */
export function describeClockContract(name: string, make: StoreFactory<Clock>): void {
  describe(`Clock contract: ${name}`, () => {
    it('tells time as ISO-8601 UTC with milliseconds, never going back', async () => {
      const clock = await make();
      let previous = '';
      for (let i = 0; i < 50; i++) {
        const now = clock.now();
        expect(now).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(now >= previous).toBe(true);
        previous = now;
      }
    });

    it('sleeps and can be woken by an abort signal', async () => {
      const clock = await make();
      await clock.sleep(1);
      const abort = new AbortController();
      const sleeping = clock.sleep(60_000, abort.signal);
      abort.abort();
      await expect(sleeping).resolves.toBeUndefined();
    });
  });
}

/** Contract for IdGenerator implementations. */
export function describeIdGeneratorContract(name: string, make: StoreFactory<IdGenerator>): void {
  describe(`IdGenerator contract: ${name}`, () => {
    it('produces distinct 32-character lowercase hex ids', async () => {
      const ids = await make();
      const seen = new Set<string>();
      for (let i = 0; i < 2000; i++) {
        const id = ids.next();
        expect(id).toMatch(/^[0-9a-f]{32}$/);
        seen.add(id);
      }
      expect(seen.size).toBe(2000);
    });
  });
}

/**
 * Contract for runtimes that run real commands (Docker and the like; the memory fake
 * answers from registered handlers instead). `spec` must name an image with bash and coreutils.
 */
export function describeSandboxExecContract(
  name: string,
  make: StoreFactory<SandboxRuntime>,
  options: SandboxRuntimeContractOptions = {},
): void {
  const spec = options.spec ?? specFixture();
  const startTimeoutMs = options.startTimeoutMs ?? 120_000;
  let n = 0;
  const nextId = () =>
    `exec${process.pid.toString(16)}${Date.now().toString(16)}${(n++).toString(16)}`.padEnd(32, '0').slice(0, 32);

  describe(`SandboxRuntime exec contract: ${name}`, { timeout: options.testTimeoutMs ?? 180_000 }, () => {
    let runtime: SandboxRuntime;
    let id: string;
    const bash = (script: string, extra: Partial<Parameters<SandboxRuntime['exec']>[1]> = {}) =>
      expectOk(runtime.exec(id, { command: ['bash', '-c', script], ...extra }));

    beforeAll(async () => {
      runtime = await make();
      id = nextId();
      await expectOk(
        runtime.create({
          sandbox_id: id,
          user_id: 'alice',
          installation_id: 'acs-tests',
          spec,
          env: { ...spec.initial_env, FROM_SPEC: 'spec-value' },
        }),
      );
      expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
    });
    afterAll(async () => {
      await runtime.delete(id);
    });

    it('returns the exit code and keeps stdout and stderr apart', async () => {
      const result = await bash('echo to-out; echo to-err >&2; printf "ünïcode"; exit 3');
      expect(result).toMatchObject({ exit_code: 3, stdout: 'to-out\nünïcode', stderr: 'to-err\n', timed_out: false });
      expect((await expectOk(runtime.exec(id, { command: ['true'] }))).exit_code).toBe(0);
    });

    it('runs in the working directory by default, or in cwd, with the sandbox and request environment', async () => {
      expect((await bash('pwd')).stdout.trim()).toBe(spec.working_dir);
      await bash('mkdir -p sub/dir');
      expect((await bash('pwd', { cwd: 'sub/dir' })).stdout.trim()).toBe(`${spec.working_dir}/sub/dir`);
      expect(
        (await bash('echo "$FROM_SPEC $FROM_REQUEST"', { env: { FROM_REQUEST: 'request-value' } })).stdout.trim(),
      ).toBe('spec-value request-value');
    });

    it('kills the whole process group on timeout and says so', async () => {
      const result = await bash('(sleep 300; echo late > /tmp/child-survived) & echo started; sleep 300', {
        timeoutMs: 1_500,
      });
      expect(result.timed_out).toBe(true);
      expect(result.exit_code).toBeNull();
      expect(result.stdout).toBe('started\n');
      const survivors = await bash('ps -eo pid,args | grep "[s]leep 300" || true');
      expect(survivors.stdout).toBe('');
    });

    it('reports a command that does not exist', async () => {
      const result = await expectOk(runtime.exec(id, { command: ['definitely-not-a-command-xyz'] }));
      expect(result.exit_code).not.toBe(0);
      expect(result.exit_code).not.toBeNull();
    });

    it('sees files written through the file API, and the file API sees files made by commands', async () => {
      await expectOk(runtime.writeFile(id, 'from-api.txt', new TextEncoder().encode('api')));
      expect((await bash('cat from-api.txt')).stdout).toBe('api');
      await bash('printf "\\x00\\x01\\xff" > from-cmd.bin');
      expect([...(await expectOk(runtime.readFile(id, 'from-cmd.bin'))).bytes]).toEqual([0, 1, 255]);
    });

    it("keeps at most maxOutputBytes of stdout and of stderr, ending a cut stream with the port's note", async () => {
      const result = await bash('head -c 5000 /dev/zero | tr "\\0" a; head -c 30 /dev/zero | tr "\\0" e >&2', {
        maxOutputBytes: 1000,
      });
      expect(result).toMatchObject({
        exit_code: 0,
        stdout: `${'a'.repeat(1000)}${clippedOutputNote(4000)}`,
        stderr: 'e'.repeat(30),
      });
      expect(splitClippedOutput(result.stdout)).toEqual({ text: 'a'.repeat(1000), droppedBytes: 4000 });
    });

    if ((options.pauseKeeps ?? 'processes') === 'processes') {
      it('freezes a paused sandbox and carries on after resume', async () => {
        await bash(
          "nohup bash -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 &",
        );
        await new Promise((r) => setTimeout(r, 500));
        await expectOk(runtime.pause(id));
        const frozen = new TextDecoder().decode(await readWhenRunning(runtime, id, '/tmp/counter'));
        await new Promise((r) => setTimeout(r, 1_000));
        await expectOk(runtime.resume(id));
        const afterResume = Number((await bash('cat /tmp/counter')).stdout);
        expect(afterResume - Number(frozen)).toBeLessThanOrEqual(3);
        await new Promise((r) => setTimeout(r, 600));
        expect(Number((await bash('cat /tmp/counter')).stdout)).toBeGreaterThan(afterResume);
      });
    } else {
      it('keeps the working directory over a pause and resume; the processes end with the pause', async () => {
        await bash('printf kept > kept-over-pause.txt; nohup sleep 600 >/dev/null 2>&1 &');
        expect((await bash('ps -eo args | grep -c "[s]leep 600"')).stdout.trim()).toBe('1');
        expect((await expectOk(runtime.pause(id))).state).toBe('paused');
        expect((await expectOk(runtime.inspect(id))).state).toBe('paused');
        expect(['starting', 'running']).toContain((await expectOk(runtime.resume(id))).state);
        expect((await untilNot(runtime, id, 'starting', startTimeoutMs)).state).toBe('running');
        expect((await bash('cat kept-over-pause.txt')).stdout).toBe('kept');
        expect((await expectOk(runtime.readFile(id, 'kept-over-pause.txt'))).bytes).toEqual(
          new TextEncoder().encode('kept'),
        );
        expect((await bash('ps -eo args | grep "[s]leep 600" || true')).stdout).toBe('');
      });
    }
  });
}

/** Reads a file right after resuming (a paused sandbox cannot be read), then pauses again. */
async function readWhenRunning(runtime: SandboxRuntime, id: string, path: string): Promise<Uint8Array> {
  await expectOk(runtime.resume(id));
  const content = await expectOk(runtime.readFile(id, path));
  await expectOk(runtime.pause(id));
  return content.bytes;
}
