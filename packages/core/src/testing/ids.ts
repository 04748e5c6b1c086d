import { describe, expect, it } from 'vitest';
import type { IdGenerator } from '../ids.js';
import type { StoreFactory } from './stores.js';

/** Contract for IdGenerator implementations. */
export function describeIdGeneratorContract(name: string, make: StoreFactory<IdGenerator>): void {
  describe(`IdGenerator contract: ${name}`, () => {
    it('produces distinct 32-character lowercase hex ids', async () => {
      const ids = await make();
      const seen = new Set<string>();
      for (let i = 0; i < 2000; i++) {
        const id = ids.next();
        expect(id).toMatch(/^[0-9a-f]{32}$/);
        seen.add(id);
      }
      expect(seen.size).toBe(2000);
    });
  });
}
