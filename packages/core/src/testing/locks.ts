import { describe, expect, it } from 'vitest';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import type { Locks } from '../locks.js';
import { expectOk } from './stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Two views of the same locks, as two processes would hold them (or one object twice, in one process). */
export interface LocksFixture {
  readonly first: Locks;
  readonly second: Locks;
}

/** Locks whose holders are separate processes: `endFirst` ends the first as its process dying would. */
export interface ProcessLocksFixture extends LocksFixture {
  readonly endFirst: () => Promise<void>;
}

/**
 * Contract of the Locks port: exclusion per key, leadership per role. Locks held by processes
 * (a database's) also free what a process held when it ends: pass `{ processes: true }` with a
 * fixture that can end its first holder.
 */
export function describeLocksContract(name: string, make: () => Promise<LocksFixture>): void;
export function describeLocksContract(
  name: string,
  make: () => Promise<ProcessLocksFixture>,
  options: { processes: true },
): void;
export function describeLocksContract(
  name: string,
  make: () => Promise<LocksFixture | ProcessLocksFixture>,
  options: { processes?: boolean } = {},
): void {
  describe(`Locks contract: ${name}`, () => {
    it('runs the works of one key one at a time across both holders, and of different keys side by side', async () => {
      const { first, second } = await make();
      let inside = 0;
      let most = 0;
      const work = (ms: number) => () =>
        ResultAsync.fromSafePromise(
          (async () => {
            inside++;
            most = Math.max(most, inside);
            await sleep(ms);
            inside--;
            return ms;
          })(),
        );
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? first : second).withLock('user alice', work(5))),
      );
      expect(results.every((r) => r.isOk())).toBe(true);
      expect(most).toBe(1);

      // Another key is not held up: a work under "b" finishes while one under "a" waits for it.
      let releaseA!: () => void;
      const aHeld = new Promise<void>((resolve) => (releaseA = resolve));
      const a = first.withLock('a', () => ResultAsync.fromSafePromise(aHeld.then(() => 'a')));
      const b = await second.withLock('b', () => okAsync('b'));
      expect(b._unsafeUnwrap()).toBe('b');
      releaseA();
      expect((await a)._unsafeUnwrap()).toBe('a');
    });

    it('passes the work’s error through, and lets the next taker in after an error', async () => {
      const { first, second } = await make();
      const failed = await first.withLock('k', () => errAsync({ type: 'Nope' as const }));
      expect(failed._unsafeUnwrapErr()).toEqual({ type: 'Nope' });
      const next = await second.withLock('k', () => okAsync(42));
      expect(next._unsafeUnwrap()).toBe(42);
      // A work that throws (a bug) frees the lock too.
      await expect(first.withLock('k', () => new ResultAsync(Promise.reject(new Error('bug'))))).rejects.toThrow('bug');
      expect((await second.withLock('k', () => okAsync(1)))._unsafeUnwrap()).toBe(1);
    });

    it('lets one candidate lead a role until it resigns; then another may', async () => {
      const { first, second } = await make();
      expect(await expectOk(first.lead('maintenance', 'A'))).toBe(true);
      expect(await expectOk(second.lead('maintenance', 'B'))).toBe(false);
      expect(await expectOk(first.lead('maintenance', 'A'))).toBe(true);
      expect(await expectOk(second.lead('other role', 'B'))).toBe(true);
      // Resigning a role one does not hold changes nothing.
      await expectOk(second.resign('maintenance', 'B'));
      expect(await expectOk(second.lead('maintenance', 'B'))).toBe(false);
      await expectOk(first.resign('maintenance', 'A'));
      expect(await expectOk(second.lead('maintenance', 'B'))).toBe(true);
      expect(await expectOk(first.lead('maintenance', 'A'))).toBe(false);
    });

    if (!options.processes) return;
    it('frees the locks and roles of a holder whose process ends', async () => {
      const fixture = (await make()) as ProcessLocksFixture;
      const { first, second } = fixture;
      expect(await expectOk(first.lead('maintenance', 'A'))).toBe(true);
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      // The first holder takes the lock and never lets go (its process hangs, then dies).
      void first.withLock('k', () => ResultAsync.fromSafePromise(new Promise<void>(() => entered())));
      await inside;
      const waiting = second.withLock('k', () => okAsync('got it'));
      await sleep(100);
      await fixture.endFirst();
      expect((await waiting)._unsafeUnwrap()).toBe('got it');
      expect(await expectOk(second.lead('maintenance', 'B'))).toBe(true);
    });
  });
}
