/**
 * Paths and files in a sandbox, the same over every engine: a path resolved against the
 * sandbox's working directory, a file read by the first entry of an archive with its symbolic
 * links followed here, a directory listed by `find` in the sandbox. A runtime adapter brings how
 * its engine archives a path and runs a command.
 */
import { RuntimeFailure } from './runtime-error.js';
import {
  DEFAULT_READ_FILE_MAX_BYTES,
  MAX_SYMLINK_HOPS,
  resolveSandboxPath,
  type DirectoryEntry,
  type ExecResult,
  type FileContent,
  type ReadFileOptions,
} from './runtime.js';
import type { TarHead } from './tar.js';

/** Each sandbox's working directory, looked up once (`lookup`) and kept; paths are resolved against it. */
export interface WorkingDirectories {
  /** The absolute path `path` names in the sandbox; fails for what cannot be a path. */
  resolve(sandboxId: string, path: string): Promise<string>;
  remember(sandboxId: string, workingDir: string): void;
  forget(sandboxId: string): void;
}

/** `lookup` reads a sandbox's working directory from its engine (throwing RuntimeFailure `not_found` for none). */
export function createWorkingDirectories(lookup: (sandboxId: string) => Promise<string>): WorkingDirectories {
  const known = new Map<string, string>();
  return {
    async resolve(sandboxId, path) {
      let workingDir = known.get(sandboxId);
      if (!workingDir) {
        workingDir = await lookup(sandboxId);
        known.set(sandboxId, workingDir);
      }
      const resolved = resolveSandboxPath(workingDir, path);
      if (!resolved) throw new RuntimeFailure(`"${path}" is not a valid path`);
      return resolved;
    },
    remember: (sandboxId, workingDir) => void known.set(sandboxId, workingDir),
    forget: (sandboxId) => void known.delete(sandboxId),
  };
}

/** How many bytes of a file to read: the caller's limit, or the port's default. */
export const readLimit = (options: ReadFileOptions): number =>
  Math.max(0, Math.floor(options.maxBytes ?? DEFAULT_READ_FILE_MAX_BYTES));

/** `path` does not exist: `asked` itself, or the target its links led to. */
export const missingFile = (asked: string, path: string): RuntimeFailure =>
  new RuntimeFailure(
    path === asked ? `${asked}: no such file` : `${asked} is a symbolic link to ${path}, which does not exist`,
    'not_found',
  );

/**
 * The regular file at `asked` (absolute), read by the first entry of its archive (`firstEntry`,
 * which reads a file's content up to the caller's limit): a symbolic link comes back as itself,
 * and its target is read in turn, resolved against the link's directory, up to MAX_SYMLINK_HOPS
 * links in a row.
 */
export async function readFollowingLinks(
  asked: string,
  firstEntry: (path: string) => Promise<TarHead>,
): Promise<FileContent> {
  let target = asked;
  for (let links = 0; ; links++) {
    const entry = await firstEntry(target);
    if (entry.type === 'file')
      return { bytes: new Uint8Array(entry.content), size: entry.size, truncated: entry.size > entry.content.length };
    if (entry.type === 'directory') throw new RuntimeFailure(`${asked} is a directory`, 'is_directory');
    if (entry.type === 'other') throw new RuntimeFailure(`${asked} is not a regular file`);
    if (links === MAX_SYMLINK_HOPS)
      throw new RuntimeFailure(
        `${asked}: more than ${MAX_SYMLINK_HOPS} symbolic links in a row (a loop?)`,
        'not_found',
      );
    const next = resolveSandboxPath(parentOf(target), entry.target);
    if (!next)
      throw new RuntimeFailure(`${asked} is a symbolic link to "${entry.target}", which is not a path`, 'not_found');
    target = next;
  }
}

const parentOf = (path: string): string => path.slice(0, path.lastIndexOf('/')) || '/';

/** How long listing a directory may take. */
const LIST_TIMEOUT_MS = 30_000;

/**
 * The entries of directory `dir` (absolute), sorted by name, by GNU `find` in the sandbox:
 * `run` runs an argv from `/` with no extra environment, to its end within `timeoutMs`.
 */
export async function listDirectoryBy(
  dir: string,
  run: (argv: string[], timeoutMs: number) => Promise<ExecResult>,
): Promise<DirectoryEntry[]> {
  const result = await run(
    ['find', dir, '-mindepth', '1', '-maxdepth', '1', '-printf', '%y\\t%s\\t%f\\0'],
    LIST_TIMEOUT_MS,
  );
  if (result.exit_code !== 0) {
    const reason = result.stderr.trim() || `find exited with ${result.exit_code}`;
    throw new RuntimeFailure(`cannot list ${dir}: ${reason}`, /No such file/.test(reason) ? 'not_found' : 'failed');
  }
  const base = dir === '/' ? '' : dir;
  return result.stdout
    .split('\0')
    .filter(Boolean)
    .map((line): DirectoryEntry => {
      const [kind, size, ...name] = line.split('\t');
      const entryName = name.join('\t');
      const type = kind === 'd' ? 'directory' : kind === 'f' ? 'file' : kind === 'l' ? 'symlink' : 'other';
      return { name: entryName, path: `${base}/${entryName}`, type, size: Number(size) };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
