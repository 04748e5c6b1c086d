import { randomUUID } from 'node:crypto';
import { okAsync, type ResultAsync } from 'neverthrow';
import type { InstallationStore, StoreFailure } from '@acs/core/ports';

/** An installation identity that lives as long as this object (with memory storage: the process). */
export class MemoryInstallationStore implements InstallationStore {
  readonly #id: string;

  /** `id`: a fixed identity (tests that play two installations, or a restart of the same one). */
  constructor(id: string = randomUUID().replaceAll('-', '')) {
    if (id.trim() === '') throw new Error('An installation id must not be empty.');
    this.#id = id;
  }

  identity(): ResultAsync<string, StoreFailure> {
    return okAsync(this.#id);
  }
}
