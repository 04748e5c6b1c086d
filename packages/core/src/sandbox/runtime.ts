import type { ResultAsync } from 'neverthrow';
import type { ExposedUrl, SandboxSpec } from './schema.js';

/** What the runtime reports about one sandbox. */
export interface RuntimeObservation {
  state: 'starting' | 'running' | 'paused' | 'error' | 'missing';
  /** Why it is in error or missing, or what it is doing; null when there is nothing to say. */
  detail: string | null;
  exposed_urls: ExposedUrl[];
}

export interface RuntimeCreateRequest {
  sandbox_id: string;
  user_id: string;
  spec: SandboxSpec;
  /** The spec's initial_env merged with what the service adds. */
  env: Record<string, string>;
}

export interface SandboxRuntimeError {
  /** `unavailable`: the runtime itself cannot be reached (engine down); `failed`: this operation failed. */
  kind: 'unavailable' | 'failed';
  message: string;
}

/**
 * Where sandboxes actually run (a container engine, a VM service, a fake).
 * `create` returns promptly, usually in `starting`; the service polls `inspect`
 * until `running`. Pause and resume must be idempotent. `delete` of an unknown
 * sandbox succeeds. Errors say what went wrong in words a user can act on.
 */
export interface SandboxRuntime {
  readonly specificationVersion: 'v1';
  create(request: RuntimeCreateRequest): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  inspect(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  pause(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  resume(sandboxId: string): ResultAsync<RuntimeObservation, SandboxRuntimeError>;
  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError>;
}
