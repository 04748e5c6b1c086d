import { errAsync, okAsync, type ResultAsync } from 'neverthrow';
import type { RuntimeCreateRequest, RuntimeObservation, SandboxRuntime, SandboxRuntimeError } from '@acs/core';

export type FakeRuntimeOperation = 'create' | 'inspect' | 'pause' | 'resume' | 'delete';

interface FakeSandbox {
  state: RuntimeObservation['state'];
  detail: string | null;
  request: RuntimeCreateRequest;
  /** Inspections left that still report `starting`. */
  startingInspections: number;
}

export interface FakeSandboxRuntimeOptions {
  /**
   * How many `inspect` calls report `starting` after a create or resume before the
   * sandbox is `running`. 0 (default): it is running at once.
   */
  inspectionsUntilRunning?: number;
}

/**
 * A sandbox runtime that runs nothing: sandboxes are entries in a map that move
 * through the states a real runtime would report. Tests steer it: fail the next
 * call of an operation, make the runtime unavailable, crash or vanish a sandbox,
 * hold one in `starting`.
 */
export class FakeSandboxRuntime implements SandboxRuntime {
  readonly specificationVersion = 'v1' as const;
  /** Every call, in order, for assertions. */
  readonly calls: { operation: FakeRuntimeOperation; sandboxId: string }[] = [];
  readonly #sandboxes = new Map<string, FakeSandbox>();
  readonly #failures = new Map<FakeRuntimeOperation, SandboxRuntimeError[]>();
  readonly #held = new Set<string>();
  #unavailable: string | null = null;
  #inspectionsUntilRunning: number;

  constructor(options: FakeSandboxRuntimeOptions = {}) {
    this.#inspectionsUntilRunning = options.inspectionsUntilRunning ?? 0;
  }

  /** The next call of `operation` fails with this error (queued, one per call). */
  failNext(operation: FakeRuntimeOperation, error: Partial<SandboxRuntimeError> = {}): this {
    const queue = this.#failures.get(operation) ?? [];
    queue.push({ kind: error.kind ?? 'failed', message: error.message ?? `injected ${operation} failure` });
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
  }

  /** The sandbox disappears behind the service's back: it reports `missing`. */
  vanish(sandboxId: string): void {
    this.#sandboxes.delete(sandboxId);
  }

  /** Keeps sandboxes created from now on (or this one) in `starting` until released. */
  hold(sandboxId = '*'): void {
    this.#held.add(sandboxId);
  }

  release(sandboxId = '*'): void {
    this.#held.delete(sandboxId);
  }

  /** What the runtime holds for a sandbox, or undefined. */
  peek(sandboxId: string): { state: RuntimeObservation['state']; request: RuntimeCreateRequest } | undefined {
    const box = this.#sandboxes.get(sandboxId);
    return box ? { state: box.state, request: structuredClone(box.request) } : undefined;
  }

  get size(): number {
    return this.#sandboxes.size;
  }

  create(request: RuntimeCreateRequest): ResultAsync<RuntimeObservation, SandboxRuntimeError> {
    return this.#call('create', request.sandbox_id, () => {
      const box: FakeSandbox = {
        state: 'starting',
        detail: null,
        request: structuredClone(request),
        startingInspections: this.#inspectionsUntilRunning,
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

  delete(sandboxId: string): ResultAsync<void, SandboxRuntimeError> {
    return this.#call('delete', sandboxId, () => {
      this.#sandboxes.delete(sandboxId);
    });
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
    return { state: box.state, detail: box.detail, exposed_urls: [] };
  }

  #call<T>(operation: FakeRuntimeOperation, sandboxId: string, run: () => T): ResultAsync<T, SandboxRuntimeError> {
    this.calls.push({ operation, sandboxId });
    if (this.#unavailable !== null) return errAsync({ kind: 'unavailable', message: this.#unavailable });
    const injected = this.#failures.get(operation)?.shift();
    if (injected) return errAsync(injected);
    try {
      return okAsync(run());
    } catch (error) {
      if (error instanceof FakeFailure) return errAsync({ kind: 'failed', message: error.message });
      throw error;
    }
  }
}

class FakeFailure extends Error {}
