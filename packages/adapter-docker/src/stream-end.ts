import type { Duplex } from 'node:stream';

/** Resolves when an exec's stream ends, closes or fails, or after timeoutMs, whichever comes first; never rejects. */
export function untilStreamEnds(stream: Duplex, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, timeoutMs);
    function done() {
      clearTimeout(timer);
      resolve();
    }
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', done);
  });
}
