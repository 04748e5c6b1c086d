import { err, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { Activity } from './activity.js';
import type { SandboxRecord } from './schema.js';
import type { SandboxServiceDeps } from './service-contract.js';
import type { Startups } from './startups.js';

/** A running sandbox whose conversations all rest, and since when nothing used it (its last use or its conversations' last change). */
interface RestingSandbox {
  readonly record: SandboxRecord;
  readonly idleSince: number;
}

export interface RestingDeps {
  /** What the conversations in a sandbox are doing; without it every sandbox is unused. */
  useOf: SandboxServiceDeps['useOf'];
  startups: Startups;
  activity: Activity;
}

/** When a sandbox's conversations have all finished or wait for the user, and since when. */
export interface Resting {
  /** Of these records, the running ones whose conversations all rest, least recently used first. */
  restingAmong(records: readonly SandboxRecord[]): ResultAsync<RestingSandbox[], StoreFailure>;
}

export function createResting(deps: RestingDeps): Resting {
  return { restingAmong: (records) => resultAsync(restingAmong(deps, records)) };
}

async function restingAmong(
  deps: RestingDeps,
  records: readonly SandboxRecord[],
): Promise<Result<RestingSandbox[], StoreFailure>> {
  const running = records.filter((r) => r.status === 'RUNNING' && !deps.startups.inHand(r.id));
  // Asked all at once, as the store can answer them side by side.
  const uses = await Promise.all(
    running.map((record) =>
      deps.useOf ? deps.useOf(record.user_id, record.id) : okAsync({ kind: 'unused' as const }),
    ),
  );
  const found: RestingSandbox[] = [];
  for (const [i, use] of uses.entries()) {
    if (use.isErr()) return err(use.error);
    const record = running[i]!;
    if (use.value.kind === 'resting')
      found.push({ record, idleSince: Math.max(deps.activity.lastActiveAt(record), use.value.since) });
  }
  return ok(found.sort((a, b) => a.idleSince - b.idleSince));
}
