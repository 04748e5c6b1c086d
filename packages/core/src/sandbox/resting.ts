import { okAsync, ResultAsync } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import type { SandboxRecord } from './schema.js';
import type { SandboxServiceDeps, SandboxUse } from './service-contract.js';
import type { Startups } from './startups.js';

/** A running sandbox whose conversations all rest, and since when nothing used it (its last use or its conversations' last change). */
export interface RestingSandbox {
  readonly record: SandboxRecord;
  readonly idleSince: number;
}

/** When a sandbox's conversations have all finished or wait for the user, and since when. */
export function createResting({ useOf }: Pick<SandboxServiceDeps, 'useOf'>, startups: Startups, activity: Activity) {
  /** The use of one sandbox; without `useOf` (a sandbox service on its own) every sandbox is unused. */
  const useOfSandbox = (record: SandboxRecord): ResultAsync<SandboxUse, StoreFailure> =>
    useOf ? useOf(record.user_id, record.id) : okAsync({ kind: 'unused' });

  /** Of these records, the running ones whose conversations all rest, least recently used first. */
  const restingAmong = (records: readonly SandboxRecord[]): ResultAsync<RestingSandbox[], StoreFailure> =>
    ResultAsync.combine(
      records
        .filter((r) => r.status === 'RUNNING' && !startups.inHand(r.id))
        .map((record) =>
          useOfSandbox(record).map((use): RestingSandbox | null =>
            use.kind === 'resting' ? { record, idleSince: Math.max(activity.lastActiveAt(record), use.since) } : null,
          ),
        ),
    ).map((found) => found.filter((r): r is RestingSandbox => r !== null).sort((a, b) => a.idleSince - b.idleSince));

  return { restingAmong };
}

export type Resting = ReturnType<typeof createResting>;
