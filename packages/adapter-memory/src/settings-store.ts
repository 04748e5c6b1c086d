import { okAsync, type ResultAsync } from 'neverthrow';
import type { SettingsStore, StoreFailure } from '@acs/core/ports';
import type { StoredSettings } from '@acs/core/schemas';
import { cloneData } from '@acs/core';

/** Settings per user, in memory. */
export class MemorySettingsStore implements SettingsStore {
  readonly #byUser = new Map<string, StoredSettings>();

  get(userId: string): ResultAsync<StoredSettings | null, StoreFailure> {
    const stored = this.#byUser.get(userId);
    return okAsync(stored ? cloneData(stored) : null);
  }

  update(
    userId: string,
    mutate: (current: StoredSettings | null) => StoredSettings,
  ): ResultAsync<StoredSettings, StoreFailure> {
    const current = this.#byUser.get(userId);
    const next = mutate(current ? cloneData(current) : null);
    this.#byUser.set(userId, cloneData(next));
    return okAsync(cloneData(next));
  }
}
