/**
 * What a sandbox's container does for core's engine-neutral methods (SandboxEngine): commands
 * through `docker exec`, stdout and stderr demultiplexed; files through the engine's archive API.
 */
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { readFirstTarEntry, tarOneFile, type TarHead } from '@acs/core';
import {
  execOutputs,
  execResult,
  missingFile,
  RuntimeFailure,
  type Clock,
  type EngineRunOptions,
  type ExecResult,
  type SandboxEngine,
} from '@acs/core/ports';
import type { DockerError } from './docker-errors.js';

/** `container(sandboxId)`: the sandbox's container (it may not exist). */
export function containerEngine(
  docker: Docker,
  container: (sandboxId: string) => Docker.Container,
  clock: Clock,
): SandboxEngine {
  return {
    run: (sandboxId, argv, options) => runInContainer(docker, container(sandboxId), argv, options),
    firstArchiveEntry: (sandboxId, where, maxBytes) => firstArchiveEntry(container(sandboxId), where, maxBytes),
    // Extracting at / with the full path creates the missing parent directories.
    writeFile: async (sandboxId, path, content) => {
      await container(sandboxId).putArchive(tarOneFile(path.slice(1), content, clock), { path: '/' });
    },
  };
}

/** Runs argv through `docker exec` to its end, stdout and stderr demultiplexed; bounded in time and size. */
async function runInContainer(
  docker: Docker,
  container: Docker.Container,
  argv: readonly string[],
  options: EngineRunOptions,
): Promise<ExecResult> {
  const started = Date.now();
  const exec = await container.exec({
    Cmd: [...argv],
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: false,
    Tty: false,
    WorkingDir: options.context?.cwd ?? '/',
    Env: Object.entries(options.context?.env ?? {}).map(([k, v]) => `${k}=${v}`),
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const { stdout, stderr } = execOutputs(options.maxOutputBytes);
  const out = new PassThrough().on('data', (c: Buffer) => stdout.push(c));
  const err = new PassThrough().on('data', (c: Buffer) => stderr.push(c));
  docker.modem.demuxStream(stream, out, err);
  let hostTimeout = false;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      hostTimeout = true;
      stream.destroy();
      resolve();
    }, options.hostDeadlineMs);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  const durationMs = Date.now() - started;
  const info = hostTimeout ? null : await exec.inspect();
  return execResult({
    exitCode: info?.ExitCode ?? null,
    hostTimeout,
    durationMs,
    timeoutMs: options.timeoutMs,
    stdout,
    stderr,
  });
}

/**
 * Streams the archive of the path and reads only its first header and, for a file, at most
 * `maxBytes` of its content; then the stream is destroyed, so the engine stops sending (the
 * archive of `/` is the whole filesystem). A symbolic link comes back from the engine as itself.
 */
async function firstArchiveEntry(
  container: Docker.Container,
  where: { path: string; asked: string },
  maxBytes: number,
): Promise<TarHead> {
  const { path, asked } = where;
  const archive = await container.getArchive({ path }).catch((error: DockerError) => {
    if (error.statusCode === 404) throw missingFile(asked, path);
    // The engine resolves links in the path itself, and refuses a loop (its message names host paths: not repeated).
    if (/too many links/i.test(error.json?.message ?? error.message ?? ''))
      throw new RuntimeFailure(`${asked}: too many symbolic links (a loop?)`, 'not_found');
    throw error;
  });
  const entry = await readFirstTarEntry(archive, maxBytes);
  if (!entry) throw missingFile(asked, path);
  return entry;
}
