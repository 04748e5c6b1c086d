import { describe, expect, it } from 'vitest';
import type { Clock } from '../clock.js';
import type { StoreFactory } from './stores.js';

/** Contract for Clock implementations. */
export function describeClockContract(name: string, make: StoreFactory<Clock>): void {
  describe(`Clock contract: ${name}`, () => {
    it('tells time as ISO-8601 UTC with milliseconds, never going back', async () => {
      const clock = await make();
      let previous = '';
      for (let i = 0; i < 50; i++) {
        const now = clock.now();
        expect(now).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(now >= previous).toBe(true);
        previous = now;
      }
    });

    it('sleeps and can be woken by an abort signal', async () => {
      const clock = await make();
      await clock.sleep(1);
      const abort = new AbortController();
      const sleeping = clock.sleep(60_000, abort.signal);
      abort.abort();
      await expect(sleeping).resolves.toBeUndefined();
    });
  });
}
