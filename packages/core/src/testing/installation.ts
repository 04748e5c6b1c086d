import { describe, expect, it } from 'vitest';
import type { InstallationStore } from '../installation.js';
import { expectOk, type StoreFactory } from './stores.js';

/** An installation store over fresh data, and a way to open the same data again (a restart, another process). */
export interface InstallationStoreFixture {
  store: InstallationStore;
  /** Another store over the same data; for memory storage, the same object. */
  reopen(): InstallationStore | Promise<InstallationStore>;
}

/** Contract every InstallationStore must meet: one id per installation, kept as long as its data. */
export function describeInstallationStoreContract(name: string, make: StoreFactory<InstallationStoreFixture>): void {
  describe(`InstallationStore contract: ${name}`, () => {
    it('gives one non-empty id, the same on every call, also to concurrent first callers', async () => {
      const { store } = await make();
      const ids = await Promise.all(Array.from({ length: 8 }, () => expectOk(store.identity())));
      expect(ids[0]).toMatch(/\S/);
      expect(new Set(ids).size).toBe(1);
      expect(await expectOk(store.identity())).toBe(ids[0]);
    });

    it('keeps the id with the data: the same data reopened has it, other data has another', async () => {
      const first = await make();
      const id = await expectOk(first.store.identity());
      expect(await expectOk((await first.reopen()).identity())).toBe(id);
      const other = await make();
      expect(await expectOk(other.store.identity())).not.toBe(id);
    });
  });
}
