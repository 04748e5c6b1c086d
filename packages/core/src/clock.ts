/** The source of time, timers included. Injected so tests can control it. */
export interface Clock {
  /** Now, as an ISO-8601 UTC timestamp with millisecond precision. */
  now(): string;
  /** Resolves after `ms` milliseconds (or at once for a manual clock). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls `task` every `ms` milliseconds until cancelled. A system clock's timer never keeps
   * the process alive on its own.
   */
  every(ms: number, task: () => void): { cancel(): void };
}

/** Milliseconds since the epoch on a clock (for durations and ages measured against its `now()`). */
export const millisOf = (clock: Clock): number => Date.parse(clock.now());

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
  every: (ms, task) => {
    const timer = setInterval(task, ms);
    timer.unref();
    return { cancel: () => clearInterval(timer) };
  },
};

/**
 * A clock for tests: time only moves when told to, and every `now()` is strictly
 * later than the previous one, so records never share a timestamp by accident.
 * `advance(ms)` runs the `every` tasks that fall due, as often as they fall due.
 */
export function manualClock(startIso = '2026-01-01T00:00:00.000Z'): Clock & { advance(ms: number): void } {
  let t = Date.parse(startIso);
  const timers = new Set<{ ms: number; task: () => void; due: number }>();
  return {
    now: () => new Date(t++).toISOString(),
    sleep: async () => {},
    every: (ms, task) => {
      const timer = { ms: Math.max(1, ms), task, due: t + Math.max(1, ms) };
      timers.add(timer);
      return { cancel: () => void timers.delete(timer) };
    },
    advance: (ms: number) => {
      const until = t + ms;
      for (;;) {
        const next = [...timers].filter((timer) => timer.due <= until).sort((a, b) => a.due - b.due)[0];
        if (!next) break;
        t = Math.max(t, next.due);
        next.due += next.ms;
        next.task();
      }
      t = Math.max(t, until);
    },
  };
}
