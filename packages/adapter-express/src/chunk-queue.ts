/**
 * Chunks a source pushes (as things happen) for a body stream that pulls them (as its client
 * reads). The source pushes few, small chunks (a start task's progress), so the queue holds them
 * until they are pulled; `close` runs once, when the puller stops early or the queue has ended
 * and been read out.
 */
export interface ChunkQueue {
  push(chunk: string): void;
  /** No more chunks: the body ends once what was pushed is read. */
  end(): void;
  readonly chunks: AsyncIterable<string>;
}

export function chunkQueue(close: () => void): ChunkQueue {
  const queued: string[] = [];
  let ended = false;
  let closed = false;
  let wake: (() => void) | null = null;
  const finish = () => {
    if (closed) return;
    closed = true;
    close();
  };
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  return {
    push: (chunk) => {
      if (ended) return;
      queued.push(chunk);
      notify();
    },
    end: () => {
      ended = true;
      notify();
    },
    chunks: {
      [Symbol.asyncIterator]: () => ({
        next: async (): Promise<IteratorResult<string>> => {
          while (queued.length === 0 && !ended && !closed) await new Promise<void>((resolve) => (wake = resolve));
          const chunk = queued.shift();
          if (chunk !== undefined) return { value: chunk, done: false };
          finish();
          return { value: undefined, done: true };
        },
        return: (): Promise<IteratorResult<string>> => {
          ended = true;
          finish();
          notify();
          return Promise.resolve({ value: undefined, done: true });
        },
      }),
    },
  };
}
