/** Output kept for a stream no listener has been added to yet, by default; beyond it, the rest is dropped. */
export const DEFAULT_MAX_UNHEARD_BYTES = 16 * 1024 * 1024;

/**
 * One output stream of a `SandboxProcess`, for runtime adapters. What the process writes before
 * anyone listens is held (up to `maxUnheardBytes`) and handed, once the caller's synchronous
 * set-up is done, to every listener added in that step; after that, chunks pass straight on.
 * So `spawn(...).then((p) => { p.onStdout(a); p.onStdout(b); })` loses nothing, on every runtime.
 */
export class ProcessOutputChannel {
  readonly #listeners: ((chunk: Uint8Array) => void)[] = [];
  readonly #maxUnheardBytes: number;
  #held: Uint8Array[] | null = [];
  #heldBytes = 0;

  constructor(maxUnheardBytes = DEFAULT_MAX_UNHEARD_BYTES) {
    this.#maxUnheardBytes = maxUnheardBytes;
  }

  add(listener: (chunk: Uint8Array) => void): void {
    this.#listeners.push(listener);
    if (this.#listeners.length !== 1) return;
    queueMicrotask(() => {
      const held = this.#held ?? [];
      this.#held = null;
      for (const chunk of held) this.#deliver(chunk);
    });
  }

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    if (this.#held) {
      const room = this.#maxUnheardBytes - this.#heldBytes;
      if (room > 0) this.#held.push(chunk.subarray(0, room));
      this.#heldBytes += Math.min(room, chunk.length);
      return;
    }
    this.#deliver(chunk);
  }

  /** Listeners get a plain Uint8Array view (not a Node Buffer), whatever the adapter pushed. */
  #deliver(chunk: Uint8Array) {
    const bytes =
      chunk.constructor === Uint8Array ? chunk : new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length);
    for (const listener of this.#listeners) listener(bytes);
  }
}
