import { RuntimeFailure, unreachableCode, type SandboxRuntimeError } from '@acs/core/ports';
import { SandboxNetworkFailure } from './sandbox-network.js';

/** What dockerode rejects with: the engine's HTTP status and message, or the socket's code. */
export interface DockerError {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

/** Rethrows what is not the engine's 404: for removals, where "not there" is done. */
export const unlessNotFound = (error: unknown): void => {
  if ((error as DockerError).statusCode !== 404) throw error;
};

export const missingImage = (image: string): RuntimeFailure =>
  new RuntimeFailure(
    `image ${image} is not on this Docker engine; build or load it first (for acs-sandbox:bookworm: scripts/build-sandbox-image.sh)`,
  );

/** What the engine's client threw during `operation`, as the port's error. */
export function toRuntimeError(operation: string, error: unknown): SandboxRuntimeError {
  if (error instanceof SandboxNetworkFailure) return { type: 'failed', message: error.message };
  const code = unreachableCode(error);
  if (code !== undefined) {
    return {
      type: 'unavailable',
      message: `the Docker engine cannot be reached (${code}); start dockerd or set DOCKER_HOST`,
    };
  }
  const e = error as DockerError;
  if (e.statusCode === 404) return { type: 'not_found', message: e.json?.message ?? `not found during ${operation}` };
  return { type: 'failed', message: e.json?.message ?? e.message ?? String(error) };
}
