import { Writable, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { startSpawnedProcess, type SandboxProcess, type SpawnEnd, type SpawnSession } from '@acs/core/ports';
import { untilStreamEnds } from './stream-end.js';

/** What a spawned process needs from its runtime. */
export interface DockerProcessOptions {
  docker: Docker;
  container: Docker.Container;
  sandboxId: string;
  command: readonly string[];
  /** The resolved, absolute directory the process starts in. */
  cwd: string;
  env: Readonly<Record<string, string>>;
  /** On a terminal: one raw stream, stdout and stderr merged. */
  tty?: boolean;
}

/**
 * Starts `command` in the container over an interactive, hijacked `docker exec` (non-TTY:
 * stdout and stderr demultiplexed), under core's spawn protocol (startSpawnedProcess), which
 * reads the start and ends the process; this file speaks only to the engine.
 */
export function startDockerProcess(options: DockerProcessOptions): Promise<SandboxProcess> {
  const tty = options.tty ?? false;
  return startSpawnedProcess({
    sandboxId: options.sandboxId,
    command: options.command,
    open: async (argv, feed) => {
      const exec = await options.container.exec({
        Cmd: argv,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: tty,
        WorkingDir: options.cwd,
        Env: Object.entries(options.env).map(([k, v]) => `${k}=${v}`),
      });
      const stream = await exec.start({ hijack: true, stdin: true, Tty: tty });
      // A terminal's stream is raw (one stream, nothing to take apart).
      if (tty) stream.on('data', (chunk: Buffer) => feed.stdout(chunk));
      else options.docker.modem.demuxStream(stream, sink(feed.stdout), sink(feed.stderr));
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        feed.ended(exitCodeOf(exec));
      };
      stream.on('end', end);
      stream.on('close', end);
      stream.on('error', end);
      return session(options.container, stream);
    },
  });
}

function session(container: Docker.Container, stream: Duplex): SpawnSession {
  return {
    write: (data) =>
      new Promise((resolve, reject) => {
        stream.write(data, (error) => (error ? reject(error) : resolve()));
      }),
    destroy: () => stream.destroy(),
    runBeside: async (argv, deadlineMs) => {
      const exec = await container.exec({
        Cmd: argv,
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: false,
        Tty: false,
      });
      const beside = await exec.start({ hijack: true, stdin: false });
      beside.resume();
      await untilStreamEnds(beside, deadlineMs);
      beside.destroy();
    },
  };
}

const sink = (onChunk: (chunk: Buffer) => void) =>
  new Writable({
    write(chunk: Buffer, _encoding, callback) {
      onChunk(chunk);
      callback();
    },
  });

/** The exec's exit code; the engine may record it a moment after the stream ends. */
async function exitCodeOf(exec: Docker.Exec): Promise<SpawnEnd> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const info = await exec.inspect().catch(() => null);
    if (!info) return { exitCode: null };
    if (!info.Running) return { exitCode: info.ExitCode ?? null };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { exitCode: null };
}
