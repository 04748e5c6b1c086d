import { spawn } from 'node:child_process';
import type Docker from 'dockerode';
import { RuntimeFailure } from '@acs/core/ports';
import { missingImage, type DockerError } from './docker-errors.js';

/**
 * Makes sandbox images that are not on the engine yet (builds them, loads them). The runtime
 * asks it when a sandbox needs an image the engine lacks, instead of failing the sandbox.
 */
export interface SandboxImageProvider {
  /** Whether this provider knows how to make the image. */
  provides(image: string): boolean;
  /** Makes the image, saying what it is doing line by line; rejects with a message that explains the failure. */
  provide(image: string, onProgress: (line: string) => void): Promise<void>;
}

/**
 * Builds images by running a command (a build script), one build per image at a time. Each
 * line the command prints on stdout is a progress line (a prefix like `build-sandbox-image: `
 * is stripped); when it fails, the error names its exit status and its last stderr lines.
 */
export function commandImageProvider(options: {
  /** The images it builds, e.g. `['acs-sandbox:bookworm']`. */
  images: readonly string[];
  /** The argv that builds one image. */
  command: (image: string) => readonly string[];
  env?: Readonly<Record<string, string | undefined>>;
  cwd?: string;
  /** Stripped from the start of each progress line. */
  linePrefix?: string;
}): SandboxImageProvider {
  return {
    provides: (image) => options.images.includes(image),
    provide: (image, onProgress) =>
      new Promise<void>((resolve, reject) => {
        const [program, ...args] = options.command(image);
        if (!program) {
          reject(new Error('the image build command is empty'));
          return;
        }
        const child = spawn(program, args, {
          cwd: options.cwd,
          env: { ...process.env, ...options.env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const errTail: string[] = [];
        const lines = (stream: NodeJS.ReadableStream, each: (line: string) => void) => {
          let pending = '';
          stream.setEncoding('utf8');
          stream.on('data', (chunk: string) => {
            pending += chunk;
            const parts = pending.split('\n');
            pending = parts.pop() ?? '';
            for (const line of parts) if (line.trim() !== '') each(line);
          });
          stream.on('end', () => {
            if (pending.trim() !== '') each(pending);
          });
        };
        const strip = (line: string) =>
          (options.linePrefix && line.startsWith(options.linePrefix)
            ? line.slice(options.linePrefix.length)
            : line
          ).trim();
        lines(child.stdout, (line) => onProgress(strip(line)));
        lines(child.stderr, (line) => {
          errTail.push(strip(line));
          if (errTail.length > 8) errTail.shift();
        });
        child.on('error', (error) => reject(new Error(`could not run ${program}: ${error.message}`)));
        child.on('close', (code, signal) => {
          if (code === 0) resolve();
          else
            reject(
              new Error(
                `building ${image} failed (${signal ? `killed by ${signal}` : `exit status ${code}`})${errTail.length > 0 ? `: ${errTail.join(' / ')}` : ''}`,
              ),
            );
        });
      }),
  };
}

/** A build in progress, with everyone waiting for it and the last line it said (for who comes late). */
interface Build {
  done: Promise<void>;
  listeners: Set<(line: string) => void>;
  last: string | null;
}

/**
 * Makes sure the engine has the image, making it through the provider when it is missing.
 * Resolves to what it found or did; rejects, saying why, when the image is missing and cannot be made.
 */
export type EnsureImage = (image: string, onProgress?: (line: string) => void) => Promise<'present' | 'provided'>;

/** Ensures images on `docker` through `images` (none: a missing image fails), one build per image however many callers wait. */
export function imageEnsurer(docker: Docker, images: SandboxImageProvider | undefined): EnsureImage {
  const building = new Map<string, Build>();
  const start = (provider: SandboxImageProvider, image: string): Build => {
    const entry: Build = { done: Promise.resolve(), listeners: new Set(), last: null };
    entry.done = provider
      .provide(image, (line) => {
        entry.last = line;
        for (const listener of entry.listeners) listener(line);
      })
      .finally(() => building.delete(image));
    building.set(image, entry);
    return entry;
  };
  return async (image, onProgress) => {
    const present = await docker
      .getImage(image)
      .inspect()
      .then(
        () => true,
        (error: DockerError) => {
          if (error.statusCode === 404) return false;
          throw error;
        },
      );
    if (present) return 'present';
    if (!images?.provides(image)) throw missingImage(image);
    const build = building.get(image) ?? start(images, image);
    if (onProgress) {
      build.listeners.add(onProgress);
      if (build.last) onProgress(build.last);
    }
    try {
      await build.done;
    } catch (error) {
      throw new RuntimeFailure(
        `the sandbox image ${image} is missing and could not be built: ${(error as Error).message}`,
      );
    } finally {
      if (onProgress) build.listeners.delete(onProgress);
    }
    return 'provided';
  };
}
