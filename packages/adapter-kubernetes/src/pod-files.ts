/**
 * What a sandbox's pod does for core's engine-neutral methods (SandboxEngine): commands through
 * `pods/exec` (pod-exec.ts), files moved as tar through exec (what `kubectl cp` does): a path read
 * as the first entry of `tar -c`, a file written by piping a one-file archive to `tar -x`. The
 * archive format itself is core's (tar.ts).
 */
import { missingFile, RuntimeFailure, type Clock, type SandboxEngine } from '@acs/core/ports';
import { readFirstTarEntry, tarOneFile, type TarHead } from '@acs/core';
import { PassThrough } from 'node:stream';
import { commandPrefix, type PodExec } from './pod-exec.js';

/** Bytes of tar metadata (headers, PAX and long-name entries) read beyond a file's content, at most. */
const TAR_METADATA_ALLOWANCE = 2 * 1024 * 1024;
/** GNU tar reads archives in records of 20 blocks: an archive it is fed ends on a record boundary. */
const TAR_RECORD = 10_240;
/** How long an empty archive's session may take to end, so tar's words on stderr say why. */
const EMPTY_ARCHIVE_WAIT_MS = 10_000;
/** The stderr kept to explain a failure: its last characters. */
const STDERR_TAIL = 4_000;

export function podEngine(exec: PodExec, clock: Clock): SandboxEngine {
  return {
    run: (sandboxId, argv, options) =>
      exec.run(
        sandboxId,
        options.context ? [...commandPrefix(options.context.cwd, options.context.env), ...argv] : argv,
        options,
      ),
    firstArchiveEntry: (sandboxId, where, maxBytes) => firstPodArchiveEntry(exec, sandboxId, where, maxBytes),
    writeFile: (sandboxId, path, content) => writePodFile(exec, sandboxId, path, content, clock),
  };
}

/**
 * `tar -c` of the path in the pod (cut with `head -c` after the bytes asked for), read as far as
 * its first header and `maxBytes` of content; then the session is cut. `asked` is the path the
 * caller named, for messages.
 */
async function firstPodArchiveEntry(
  exec: PodExec,
  sandboxId: string,
  where: { path: string; asked: string },
  maxBytes: number,
): Promise<TarHead> {
  const { path, asked } = where;
  const script = 'tar -C / --no-recursion -cf - -- "$1" | head -c "$2"';
  const channel = await exec.open(
    sandboxId,
    ['sh', '-c', script, 'acs-read', path === '/' ? '.' : path.slice(1), String(maxBytes + TAR_METADATA_ALLOWANCE)],
    false,
    false,
  );
  const stdout = new PassThrough();
  let stderr = '';
  channel.onStdout((chunk) => stdout.write(chunk));
  channel.onStderr((chunk) => (stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL)));
  void channel.ended.then(() => stdout.end());
  let entry: TarHead | null = null;
  try {
    entry = await readFirstTarEntry(stdout, maxBytes);
  } finally {
    // What was asked for is read: the rest is not wanted. An empty archive: tar's words on
    // stderr say why, so the session is let end first.
    if (entry) channel.destroy();
    else {
      const timer = setTimeout(() => channel.destroy(), EMPTY_ARCHIVE_WAIT_MS);
      await channel.ended;
      clearTimeout(timer);
    }
  }
  if (entry) return entry;
  if (/No such file|Too many levels of symbolic links|Not a directory/i.test(stderr) || stderr.trim() === '')
    throw missingFile(asked, path);
  throw new RuntimeFailure(`cannot read ${asked}: ${stderr.trim().replace(/^tar: /, '')}`);
}

/** A one-file archive piped to `tar -x` at / in the pod: missing parent directories are made. */
async function writePodFile(
  exec: PodExec,
  sandboxId: string,
  resolved: string,
  content: Uint8Array,
  clock: Clock,
): Promise<void> {
  const archive = tarOneFile(resolved.slice(1), content, clock);
  const padded = Buffer.concat([archive, Buffer.alloc((TAR_RECORD - (archive.length % TAR_RECORD)) % TAR_RECORD)]);
  const channel = await exec.open(sandboxId, ['tar', '-x', '-C', '/', '-f', '-'], true, false);
  let stderr = '';
  channel.onStderr((chunk) => (stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL)));
  const timer = setTimeout(() => channel.destroy(), 120_000 + content.length / 1024);
  try {
    await channel.write(padded);
    channel.closeStdin();
    const end = await channel.ended;
    if (end.exitCode !== 0)
      throw new RuntimeFailure(
        `cannot write ${resolved}: ${stderr.trim().replace(/^tar: /, '') || end.message || `tar exited with ${end.exitCode}`}`,
      );
  } finally {
    clearTimeout(timer);
    channel.destroy();
  }
}
