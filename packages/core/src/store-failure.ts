import type { DomainError } from './errors.js';

/** What a store port may fail with: the backend could not do the operation. */
export type StoreFailure = Extract<DomainError, { type: 'StoreUnavailable' }>;
