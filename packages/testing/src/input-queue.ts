/** Text sent to a running command or process, as an async iterable that ends when it does (its signal aborts). */
export class InputQueue implements AsyncIterable<string> {
  readonly #chunks: string[] = [];
  #waiting: ((result: IteratorResult<string>) => void) | null = null;
  #ended = false;

  constructor(signal: AbortSignal) {
    signal.addEventListener('abort', () => this.end(), { once: true });
  }

  push(text: string) {
    if (this.#ended) return;
    if (this.#waiting) {
      const wake = this.#waiting;
      this.#waiting = null;
      wake({ value: text, done: false });
    } else this.#chunks.push(text);
  }

  end() {
    this.#ended = true;
    const wake = this.#waiting;
    this.#waiting = null;
    wake?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<string> {
    return {
      next: () => {
        const chunk = this.#chunks.shift();
        if (chunk !== undefined) return Promise.resolve({ value: chunk, done: false });
        if (this.#ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => (this.#waiting = resolve));
      },
    };
  }
}
