/** The source of time. Injected so tests can control it. */
export interface Clock {
  /** Now, as an ISO-8601 UTC timestamp with millisecond precision. */
  now(): string;
  /** Resolves after `ms` milliseconds (or at once for a manual clock). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => new Date().toISOString(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    }),
};

/**
 * A clock for tests: time only moves when told to, and every `now()` is strictly
 * later than the previous one, so records never share a timestamp by accident.
 */
export function manualClock(startIso = '2026-01-01T00:00:00.000Z'): Clock & { advance(ms: number): void } {
  let t = Date.parse(startIso);
  return {
    now: () => new Date(t++).toISOString(),
    sleep: async () => {},
    advance: (ms: number) => {
      t += ms;
    },
  };
}
