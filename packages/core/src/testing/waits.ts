/**
 * Resolves with what `work` resolves to, or fails saying what was still being waited for after
 * `ms` (default 60 s). For "it does not wait for X" checks: X is made to take far longer
 * (minutes), so the generous deadline tells prompt from stuck on any machine, however busy.
 */
export async function settlesWithin<T>(work: PromiseLike<T>, what: string, ms = 60_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const gaveUp = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still waiting after ${Math.round(ms / 1000)} s for ${what}`)), ms);
  });
  try {
    return await Promise.race([work, gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls every 10 ms until the condition holds or the time is up (the caller then asserts). */
export async function waitUntil(condition: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await sleep(10);
}
