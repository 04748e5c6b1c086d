import type { ResultAsync } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';
import type { StoredSettings } from './schema.js';

/**
 * Keeps each user's settings, secret values included (adapters that persist them
 * encrypt them at rest). `update` is atomic per user: concurrent updates of one
 * user apply one after the other, each on the result of the previous, so the
 * last write wins whole and never mixes two bodies.
 */
export interface SettingsStore {
  get(userId: string): ResultAsync<StoredSettings | null, StoreFailure>;
  update(
    userId: string,
    mutate: (current: StoredSettings | null) => StoredSettings,
  ): ResultAsync<StoredSettings, StoreFailure>;
}
