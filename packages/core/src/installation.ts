import type { ResultAsync } from 'neverthrow';
import type { StoreFailure } from './store-failure.js';

/**
 * Who this installation is: one id, created once and kept with the installation's data (so
 * a restarted process is the same installation). Every sandbox the service creates carries
 * it, and the service lists, adopts, counts and pauses only sandboxes that carry it, so
 * installations sharing one runtime (one Docker engine, say) never touch each other's.
 */
export interface InstallationStore {
  /** The id: created on the first call, the same on every later call for this data. */
  identity(): ResultAsync<string, StoreFailure>;
}
