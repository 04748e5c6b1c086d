import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import {
  clippedOutputNote,
  DEFAULT_EXEC_MAX_OUTPUT_BYTES,
  DEFAULT_READ_FILE_MAX_BYTES,
  MAX_SYMLINK_HOPS,
  resolveSandboxPath,
  type DirectoryEntry,
  type ExecRequest,
  type FileContent,
  type ReadFileOptions,
  type ExecResult,
  type RuntimeCreateRequest,
  type RuntimeObservation,
  type RuntimeSandboxSummary,
  type SandboxProcess,
  type SandboxRuntime,
  type SandboxRuntimeError,
  type SpawnRequest,
} from '@acs/core/ports';
import type { ExposedPort } from '@acs/core/schemas';
import { fakeGit } from './fake-git.js';
import { FakeProcess, type FakeSpawnHandler } from './fake-process.js';
import { fakeBash, isInteractiveBash } from './fake-bash.js';
import type { FakeExecHandler } from './fake-exec.js';

export type { FakeExecContext, FakeExecHandler } from './fake-exec.js';

export type FakeRuntimeOperation =
  | 'create'
  | 'inspect'
  | 'pause'
  | 'resume'
  | 'delete'
  | 'resize'
  | 'exec'
  | 'readFile'
  | 'writeFile'
  | 'listDirectory'
  | 'spawn';

interface FakeSandbox {
  files: Map<string, Uint8Array>;
  /** Symbolic links (`ln -s`): the link's path → its target as written. */
  links: Map<string, string>;
  created_at: string;
  state: RuntimeObservation['state'];
  detail: string | null;
  request: RuntimeCreateRequest;
  /** Inspections left that still report `starting`. */
  startingInspections: number;
  /** Spawned processes still running; they end when the sandbox is deleted, vanishes or crashes. */
  processes: Set<FakeProcess>;
}

type ArgvMatcher = (argv: readonly string[]) => boolean;

export interface FakeSandboxRuntimeOptions {
  /**
   * How many `inspect` calls report `starting` after a create or resume before the
   * sandbox is `running`. 0 (default): it is running at once.
   */
  inspectionsUntilRunning?: number;
  /**
   * Answer `git`, `chmod`, `mkdir`, `rm -f` and `ln -s` with a minimal emulation (git: fake-git.ts)
   * so conversations with a repository start and tests can make symbolic links. Handlers
   * registered with onExec win over it. Default true.
   */
  fakeGit?: boolean;
  /**
   * Where each exposed port of a new sandbox (its spec's `exposed_ports`) is reached, e.g. a
   * test's own HTTP server standing in for the agent-server. Default: nowhere (no exposed URLs).
   */
  portUrl?: (request: RuntimeCreateRequest, port: ExposedPort) => string;
}

/**
 * A sandbox runtime that runs nothing: sandboxes are entries in a map that move
 * through the states a real runtime would report. Tests steer it: fail the next
 * call of an operation, make the runtime unavailable, crash or vanish a sandbox,
 * hold one in `starting`.
 */
export class FakeSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  /** The most recent calls (the last 10,000), oldest first, for tests to inspect. */
  readonly calls: { operation: FakeRuntimeOperation; sandboxId: string }[] = [];
  readonly #sandboxes = new Map<string, FakeSandbox>();
  readonly #failures = new Map<FakeRuntimeOperation, SandboxRuntimeError[]>();
  readonly #held = new Set<string>();
  #unavailable: string | null = null;
  #inspectionsUntilRunning: number;
  readonly #handlers: { matches: ArgvMatcher; handle: FakeExecHandler }[] = [];
  readonly #spawnHandlers: { matches: ArgvMatcher; handle: FakeSpawnHandler }[] = [];
  readonly #portUrl: FakeSandboxRuntimeOptions['portUrl'];

  constructor(options: FakeSandboxRuntimeOptions = {}) {
    this.#inspectionsUntilRunning = options.inspectionsUntilRunning ?? 0;
    this.#portUrl = options.portUrl;
    if (options.fakeGit ?? true) {
      // Pushed, not unshifted: the lowest priority, below anything a test registers.
      this.#handlers.push(
        { matches: (argv) => argv[0] === 'git', handle: fakeGit() },
        { matches: (argv) => argv[0] === 'chmod' || argv[0] === 'mkdir', handle: () => ({ exit_code: 0 }) },
        {
          matches: (argv) => argv[0] === 'rm' && argv[1] === '-f',
          handle: (request, { sandboxId, files }) => {
            for (const path of request.command.slice(2)) {
              files.delete(path);
              this.#sandboxes.get(sandboxId)?.links.delete(path);
            }
            return { exit_code: 0 };
          },
        },
        {
          matches: (argv) => argv[0] === 'ln',
          handle: (request, { sandboxId, cwd }) => this.#symlink(sandboxId, cwd, request.command.slice(1)),
        },
      );
    }
  }

  /** The next call of `operation` fails with this error (queued, one per call). */
  failNext(operation: FakeRuntimeOperation, error: Partial<SandboxRuntimeError> = {}): this {
    const queue = this.#failures.get(operation) ?? [];
    queue.push({ type: error.type ?? 'failed', message: error.message ?? `injected ${operation} failure` });
    this.#failures.set(operation, queue);
    return this;
  }

  /** Every call fails as if the engine were down, until called with null. */
  setUnavailable(reason: string | null): this {
    this.#unavailable = reason;
    return this;
  }

  /** The sandbox dies: it reports `error` with this detail from now on. */
  crash(sandboxId: string, detail = 'the sandbox process exited'): void {
    const box = this.#require(sandboxId);
    box.state = 'error';
    box.detail = detail;
    endProcesses(box);
  }

  /** The sandbox disappears behind the service's back: it reports `missing`. */
  vanish(sandboxId: string): void {
    const box = this.#sandboxes.get(sandboxId);
    if (box) endProcesses(box);
    this.#sandboxes.delete(sandboxId);
  }

  /** Keeps sandboxes created from now on (or this one) in `starting` until released. */
  hold(sandboxId = '*'): void {
    this.#held.add(sandboxId);
  }

  release(sandboxId = '*'): void {
    this.#held.delete(sandboxId);
  }

  /**
   * Answers commands whose argv matches: a program name (first word), a RegExp over the
   * argv joined by spaces, or a predicate. Later registrations win. Unmatched commands
   * exit 127 with a message on stderr.
   */
  onExec(match: string | RegExp | ArgvMatcher, handle: FakeExecHandler): this {
    this.#handlers.unshift({ matches: argvMatcher(match), handle });
    return this;
  }

  /**
   * Plays programs started with `spawn` whose argv matches (as for onExec; later
   * registrations win). The handler writes the process's output and reads its stdin through
   * its context (see FakeSpawnHandler). A command no handler matches fails to spawn as a
   * program that does not exist does on Docker: a `failed` error saying "program not found".
   */
  onSpawn(match: string | RegExp | ArgvMatcher, handle: FakeSpawnHandler): this {
    this.#spawnHandlers.unshift({ matches: argvMatcher(match), handle });
    return this;
  }

  /** What the runtime holds for a sandbox, or undefined. */
  peek(sandboxId: string): { state: RuntimeObservation['state']; request: RuntimeCreateRequest } | undefined {
    const box = this.#sandboxes.get(sandboxId);
    return box ? { state: box.state, request: structuredClone(box.request) } : undefined;
  }

  get size(): number {
    return this.#sandboxes.size;
  }

  ping(): ResultAsync<void, SandboxRuntimeError> {
    return this.#unavailable === null
      ? okAsync(undefined)
      : errAsync({ type: 'unavailable', message: this.#unavailable });
  }

  list(installationId: string): ResultAsync<RuntimeSandboxSummary[], SandboxRuntimeError> {
    if (this.#unavailable !== null) return errAsync({ type: 'unavailable', message: this.#unavailable });
    return okAsync(
      [...this.#sandboxes.values()]
        .filter((box) => box.request.installation_id === installationId)
        .map((box) => ({
          sandbox_id: box.request.sandbox_id,
          user_id: box.request.user_id,
          spec_id: box.request.spec.id,
          image: box.request.spec.image,
          working_dir: box.request.spec.working_dir,
          created_at: box.created_at,
        })),
    );
  }

  create(request: RuntimeCreateRequest): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#call('create', request.sandbox_id, () => {
      const box: FakeSandbox = {
        files: new Map(),
        links: new Map(),
        created_at: new Date().toISOString(),
        state: 'starting',
        detail: null,
        request: structuredClone(request),
        startingInspections: this.#inspectionsUntilRunning,
        processes: new Set(),
      };
      this.#sandboxes.set(request.sandbox_id, box);
      if (this.#inspectionsUntilRunning === 0 && !this.#isHeld(request.sandbox_id)) box.state = 'running';
      return this.#observe(box);
    });
  }

  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#call('inspect', sandboxId, () => {
      const box = this.#sandboxes.get(sandboxId);
      if (!box) return { state: 'missing', detail: 'the sandbox no longer exists in the runtime', exposed_urls: [] };
      if (box.state === 'starting' && !this.#isHeld(sandboxId)) {
        if (box.startingInspections > 0) box.startingInspections--;
        else box.state = 'running';
      }
      return this.#observe(box);
    });
  }

  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#call('pause', sandboxId, () => {
      const box = this.#sandboxes.get(sandboxId);
      if (!box) throw new FakeFailure(`sandbox ${sandboxId} does not exist`);
      if (box.state === 'running' || box.state === 'paused') box.state = 'paused';
      else throw new FakeFailure(`cannot pause a sandbox that is ${box.state}`);
      return this.#observe(box);
    });
  }

  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#call('resume', sandboxId, () => {
      const box = this.#sandboxes.get(sandboxId);
      if (!box) throw new FakeFailure(`sandbox ${sandboxId} does not exist`);
      if (box.state === 'paused' || box.state === 'running') {
        box.state = this.#inspectionsUntilRunning > 0 ? 'starting' : 'running';
        box.startingInspections = this.#inspectionsUntilRunning;
      } else if (box.state !== 'starting') {
        throw new FakeFailure(`cannot resume a sandbox that is ${box.state}`);
      }
      return this.#observe(box);
    });
  }

  /** Gives a running sandbox new limits: here, the factor is kept in its create request (`peek`). */
  resize(sandboxId: string, resourceFactor: number): ResultAsync<void, SandboxRuntimeError> {
    return this.#call('resize', sandboxId, () => {
      const box = this.#sandboxes.get(sandboxId);
      if (!box) throw new FakeFailure(`sandbox ${sandboxId} does not exist`);
      box.request.resource_factor = resourceFactor;
    });
  }

  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError> {
    return this.#call('delete', sandboxId, () => {
      const box = this.#sandboxes.get(sandboxId);
      if (box) endProcesses(box);
      this.#sandboxes.delete(sandboxId);
    });
  }

  exec(sandboxId: string, request: ExecRequest): ResultAsync<ExecResult, SandboxRuntimeError> {
    return this.#call('exec', sandboxId, () => {
      const box = this.#running(sandboxId);
      const cwd = resolveSandboxPath(box.request.spec.working_dir, request.cwd ?? '.') ?? box.request.spec.working_dir;
      const handler = this.#handlers.find((h) => h.matches(request.command));
      const started = Date.now();
      const abort = new AbortController();
      const timeoutMs = request.timeoutMs ?? 120_000;
      type Outcome = Partial<Omit<ExecResult, 'duration_ms' | 'timed_out'>>;
      const run: Promise<Outcome> = handler
        ? Promise.resolve(handler.handle(request, { sandboxId, cwd, files: box.files, signal: abort.signal }))
        : Promise.resolve({
            exit_code: 127,
            stderr: `fake runtime: no handler for "${request.command.join(' ')}" (register one with onExec)\n`,
          });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      return Promise.race([run, timeout]).then((outcome): ExecResult => {
        clearTimeout(timer);
        if (outcome === 'timeout') {
          abort.abort();
          return { exit_code: null, stdout: '', stderr: '', timed_out: true, duration_ms: Date.now() - started };
        }
        const keep = Math.max(0, Math.floor(request.maxOutputBytes ?? DEFAULT_EXEC_MAX_OUTPUT_BYTES));
        return {
          exit_code: outcome.exit_code ?? 0,
          stdout: clipOutput(outcome.stdout ?? '', keep),
          stderr: clipOutput(outcome.stderr ?? '', keep),
          timed_out: false,
          duration_ms: Date.now() - started,
        };
      });
    }).andThen((pending) => ResultAsync.fromSafePromise(pending));
  }

  /** Follows symbolic links made with `ln -s` (in any part of the path) as the port asks; a directory is a path some file or link lies under. */
  readFile(
    sandboxId: string,
    path: string,
    options: ReadFileOptions = {},
  ): ResultAsync<FileContent, SandboxRuntimeError> {
    return this.#call('readFile', sandboxId, () => {
      const box = this.#running(sandboxId);
      const asked = this.#path(box, path);
      const resolved = followLinks(box.links, asked);
      if (resolved === null)
        throw new FakeFailure(`${asked}: more than ${MAX_SYMLINK_HOPS} symbolic links in a row (a loop?)`, 'not_found');
      const content = box.files.get(resolved);
      if (!content) {
        if (this.#isDirectory(box, resolved)) throw new FakeFailure(`${asked} is a directory`, 'is_directory');
        throw new FakeFailure(
          resolved === asked
            ? `${asked}: no such file`
            : `${asked} is a symbolic link to ${resolved}, which does not exist`,
          'not_found',
        );
      }
      const bytes = content.slice(0, Math.max(0, Math.floor(options.maxBytes ?? DEFAULT_READ_FILE_MAX_BYTES)));
      return { bytes, size: content.length, truncated: content.length > bytes.length };
    });
  }

  /** A file written where a link was replaces the link (as unpacking an archive does). */
  writeFile(sandboxId: string, path: string, content: Uint8Array): ResultAsync<void, SandboxRuntimeError> {
    return this.#call('writeFile', sandboxId, () => {
      const box = this.#running(sandboxId);
      const resolved = this.#path(box, path);
      box.links.delete(resolved);
      box.files.set(resolved, new Uint8Array(content));
    });
  }

  listDirectory(sandboxId: string, path: string): ResultAsync<DirectoryEntry[], SandboxRuntimeError> {
    return this.#call('listDirectory', sandboxId, () => {
      const box = this.#running(sandboxId);
      const dir = this.#path(box, path);
      if (box.files.has(dir)) throw new FakeFailure(`${dir}: not a directory`);
      const prefix = dir === '/' ? '/' : `${dir}/`;
      const entries = new Map<string, DirectoryEntry>();
      for (const [file, content] of box.files) {
        if (!file.startsWith(prefix)) continue;
        const [name, ...rest] = file.slice(prefix.length).split('/');
        if (!name) continue;
        entries.set(name, {
          name,
          path: `${prefix}${name}`,
          type: rest.length > 0 ? 'directory' : 'file',
          size: rest.length > 0 ? 0 : content.length,
        });
      }
      for (const [link, target] of box.links) {
        if (!link.startsWith(prefix)) continue;
        const [name, ...rest] = link.slice(prefix.length).split('/');
        if (!name || entries.has(name)) continue;
        entries.set(name, {
          name,
          path: `${prefix}${name}`,
          type: rest.length > 0 ? 'directory' : 'symlink',
          size: rest.length > 0 ? 0 : Buffer.byteLength(target),
        });
      }
      if (entries.size === 0 && dir !== box.request.spec.working_dir && dir !== '/')
        throw new FakeFailure(`${dir}: no such directory`, 'not_found');
      return [...entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
    });
  }

  /**
   * Starts a process played by the handler registered with onSpawn. A missing sandbox is
   * `not_found`, one that is not running (paused, starting, crashed) `failed`; a command no
   * handler matches is `failed` with "program not found" in the message, and nothing runs.
   * The interactive bash of the persistent shell (`bash … -i` on a terminal) is played by a
   * fake bash over the exec handlers (fake-bash.ts) unless a test registers its own.
   * Output is held until the first listener is added.
   */
  spawn(sandboxId: string, request: SpawnRequest): ResultAsync<SandboxProcess, SandboxRuntimeError> {
    return this.#call('spawn', sandboxId, () => {
      const box = this.#running(sandboxId);
      const program = request.command[0];
      if (program === undefined || program === '')
        throw new FakeFailure('cannot start a process: the command is empty');
      const cwd = this.#path(box, request.cwd ?? '.');
      const handler =
        this.#spawnHandlers.find((h) => h.matches(request.command)) ??
        (request.tty && isInteractiveBash(request.command) ? { handle: this.#fakeBash(box) } : undefined);
      if (!handler) {
        throw new FakeFailure(
          `cannot start "${program}" in sandbox ${sandboxId}: program not found (fake runtime: no handler for "${request.command.join(' ')}"; register one with onSpawn)`,
        );
      }
      const spawned: FakeProcess = new FakeProcess(`"${program}" in sandbox ${sandboxId}`, () =>
        box.processes.delete(spawned),
      );
      box.processes.add(spawned);
      spawned.run(structuredClone({ ...request, command: [...request.command] }), handler.handle, {
        sandboxId,
        cwd,
        files: box.files,
      });
      return spawned;
    });
  }

  /** The bash the persistent shell spawns, played over the exec handlers (fake-bash.ts). */
  #fakeBash(box: FakeSandbox): FakeSpawnHandler {
    return fakeBash({
      workingDir: box.request.spec.working_dir,
      handlerFor: (argv) => this.#handlers.find((h) => h.matches(argv))?.handle ?? null,
    });
  }

  /** `ln -s [-f] TARGET LINK`: the one form the fake plays (the target is kept as written, as ln does). */
  #symlink(sandboxId: string, cwd: string, args: readonly string[]): { exit_code: number; stderr?: string } {
    const box = this.#sandboxes.get(sandboxId);
    const flags = args.filter((a) => a.startsWith('-')).join('');
    const [target, link, ...extra] = args.filter((a) => !a.startsWith('-'));
    if (!box || !flags.includes('s') || target === undefined || link === undefined || extra.length > 0) {
      return { exit_code: 1, stderr: 'fake runtime: ln plays only `ln -s [-f] TARGET LINK`\n' };
    }
    const path = resolveSandboxPath(cwd, link);
    if (!path) return { exit_code: 1, stderr: `ln: invalid path '${link}'\n` };
    if (!flags.includes('f') && (box.files.has(path) || box.links.has(path)))
      return { exit_code: 1, stderr: `ln: failed to create symbolic link '${link}': File exists\n` };
    box.files.delete(path);
    box.links.set(path, target);
    return { exit_code: 0 };
  }

  #isDirectory(box: FakeSandbox, path: string): boolean {
    if (path === '/' || path === box.request.spec.working_dir) return true;
    const under = `${path}/`;
    // Without copying the keys: the editor's create asks this of every new file, and a benchmark's sandbox holds hundreds.
    for (const p of box.files.keys()) if (p.startsWith(under)) return true;
    for (const p of box.links.keys()) if (p.startsWith(under)) return true;
    return false;
  }

  #running(sandboxId: string): FakeSandbox {
    const box = this.#sandboxes.get(sandboxId);
    if (!box) throw new FakeFailure(`sandbox ${sandboxId} does not exist`, 'not_found');
    if (box.state !== 'running') throw new FakeFailure(`sandbox ${sandboxId} is ${box.state}, not running`);
    return box;
  }

  #path(box: FakeSandbox, path: string): string {
    const resolved = resolveSandboxPath(box.request.spec.working_dir, path);
    if (!resolved) throw new FakeFailure(`"${path}" is not a valid path`);
    return resolved;
  }

  #isHeld(sandboxId: string): boolean {
    return this.#held.has('*') || this.#held.has(sandboxId);
  }

  #require(sandboxId: string): FakeSandbox {
    const box = this.#sandboxes.get(sandboxId);
    if (!box) throw new Error(`FakeSandboxRuntime has no sandbox ${sandboxId}`);
    return box;
  }

  #observe(box: FakeSandbox): RuntimeObservation {
    const portUrl = this.#portUrl;
    const urls = portUrl
      ? (box.request.spec.exposed_ports ?? []).map((p) => ({
          name: p.name,
          url: portUrl(box.request, p),
          port: p.port,
        }))
      : [];
    return {
      state: box.state,
      detail: box.detail,
      exposed_urls: box.state === 'running' || box.state === 'paused' ? urls : [],
    };
  }

  #call<T>(operation: FakeRuntimeOperation, sandboxId: string, run: () => T): ResultAsync<T, SandboxRuntimeError> {
    this.calls.push({ operation, sandboxId });
    // A long-running server on the fake runtime must not grow without bound.
    if (this.calls.length > 10_000) this.calls.splice(0, this.calls.length - 10_000);
    if (this.#unavailable !== null) return errAsync({ type: 'unavailable', message: this.#unavailable });
    const injected = this.#failures.get(operation)?.shift();
    if (injected) return errAsync(injected);
    try {
      return okAsync(run());
    } catch (error) {
      if (error instanceof FakeFailure) return errAsync({ type: error.type, message: error.message });
      throw error;
    }
  }
}

function argvMatcher(match: string | RegExp | ArgvMatcher): ArgvMatcher {
  if (typeof match === 'string') return (argv) => argv[0] === match;
  if (match instanceof RegExp) return (argv) => match.test(argv.join(' '));
  return match;
}

/** Keeps at most `keep` bytes of an output stream, ending a cut one with the port's note. */
function clipOutput(text: string, keep: number): string {
  const bytes = Buffer.from(text, 'utf8');
  return bytes.length <= keep
    ? text
    : `${bytes.subarray(0, keep).toString('utf8')}${clippedOutputNote(bytes.length - keep)}`;
}

/**
 * A path with the symbolic links in any of its parts followed (each target resolved against its
 * link's directory), or null after more than MAX_SYMLINK_HOPS links (a loop).
 */
function followLinks(links: ReadonlyMap<string, string>, path: string): string | null {
  let current = path;
  for (let hops = 0; ; hops++) {
    const parts = current.split('/').filter(Boolean);
    const at = parts.findIndex((_, i) => links.has(`/${parts.slice(0, i + 1).join('/')}`));
    if (at === -1) return current;
    if (hops === MAX_SYMLINK_HOPS) return null;
    const target = links.get(`/${parts.slice(0, at + 1).join('/')}`)!;
    const resolved = resolveSandboxPath(`/${parts.slice(0, at).join('/')}`, target) ?? '/';
    const rest = parts.slice(at + 1).join('/');
    current = rest === '' ? resolved : `${resolved === '/' ? '' : resolved}/${rest}`;
  }
}

function endProcesses(box: FakeSandbox): void {
  for (const running of [...box.processes]) running.end(null);
}

/**
 * A failure inside a fake call, caught at its end and answered as the port's error. It carries no
 * stack: it never leaves the fake, and capturing one was most of the fake's CPU in an agent step
 * (the editor asks whether a file exists before creating it), which the step benchmark counts as the server's.
 */
class FakeFailure extends Error {
  readonly type: SandboxRuntimeError['type'];
  constructor(message: string, type: SandboxRuntimeError['type'] = 'failed') {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = limit;
    }
    this.type = type;
  }
}
