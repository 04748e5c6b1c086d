import { randomBytes } from 'node:crypto';
import { millisOf, type Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import type { ConversationLease, ConversationLeaseStore, HeldLease, LeaseFence } from '../events/lease.js';
import { err, ok, type Result } from 'neverthrow';
import type { StoreFailure } from '../store-failure.js';

/** Timings of conversation leases (only used with a lease store, i.e. several processes). */
export interface OwnershipOptions {
  /** How long a lease lasts without renewal: a process that dies is taken over after about this long. Default 6 s. */
  leaseTtlMs?: number;
  /** How often a process renews its leases (and hears stop requests). Default a quarter of the TTL. */
  leaseRenewMs?: number;
  /** How often a process looks for running conversations nobody holds, to take them over. Default 1 s. */
  takeoverScanMs?: number;
}

/** A lease this process holds, or, without a lease store, the right to run (no fence). */
export interface OwnedLease {
  readonly user_id: string;
  readonly conversation_id: string;
  /** What the holder's appends carry; null without a lease store. */
  readonly fence: LeaseFence | null;
}

/** What the renewal tells the process about its leases. */
export interface OwnershipEvents {
  /** The lease is not held any more (taken over after an expiry, or renewals failed for a whole TTL): stop without writing. */
  lost(lease: OwnedLease): void;
  /** Another process asked the holder to stop (a pause or a delete that reached it). */
  stopRequested(lease: OwnedLease): void;
}

const key = (userId: string, conversationId: string) => `${userId}\u0000${conversationId}`;

/**
 * Which conversations this process may run. With a `ConversationLeaseStore` (several processes
 * on one database): leases granted, renewed and released through it, stop requests heard at
 * renewal. Without one: every conversation is this process's, unfenced, as in one process.
 */
export class ConversationOwnership {
  /** This process's name in the lease store. */
  readonly owner: string;
  readonly ttlMs: number;
  readonly renewMs: number;
  readonly scanMs: number;
  readonly #store: ConversationLeaseStore | null;
  readonly #clock: Clock;
  readonly #logger: Logger;
  /** Leases held, by conversation, and when each was last confirmed (local clock). */
  readonly #held = new Map<string, { lease: OwnedLease; epoch: number; confirmedAt: number }>();
  #timer: { cancel(): void } | null = null;
  #renewing = false;

  /** `owner`: this process's name in the lease store (default `acs-<pid>-<random>`; unique per process, so a restarted process never mistakes itself for its predecessor). */
  constructor(
    deps: { store?: ConversationLeaseStore | undefined; clock: Clock; logger: Logger; owner?: string },
    options: OwnershipOptions = {},
  ) {
    this.#store = deps.store ?? null;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.owner = deps.owner ?? `acs-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.ttlMs = Math.max(100, options.leaseTtlMs ?? 6_000);
    this.renewMs = Math.max(10, options.leaseRenewMs ?? Math.floor(this.ttlMs / 4));
    this.scanMs = Math.max(10, options.takeoverScanMs ?? 1_000);
  }

  /** Whether other processes share the conversations (a lease store is configured). */
  get shared(): boolean {
    return this.#store !== null;
  }

  /**
   * Takes the conversation's lease. `elsewhere` when another process holds it; with `wakeHolder`
   * the holder is asked for another run (it looks at the log again before it lets go). A lease
   * store that fails is the error, with the store's words.
   */
  async acquire(
    userId: string,
    conversationId: string,
    wakeHolder = true,
  ): Promise<Result<OwnedLease | 'elsewhere', StoreFailure>> {
    if (!this.#store) return ok({ user_id: userId, conversation_id: conversationId, fence: null });
    const mine = this.#held.get(key(userId, conversationId));
    if (mine) return ok(mine.lease);
    for (let attempt = 0; attempt < 3; attempt++) {
      const granted = await this.#store.acquire(userId, conversationId, this.owner, this.ttlMs);
      if (granted.isErr()) return err(granted.error);
      if (granted.value) return ok(this.#hold(granted.value));
      if (!wakeHolder) return ok('elsewhere');
      const asked = await this.#store.request(userId, conversationId, 'wake');
      if (asked.isErr()) return err(asked.error);
      if (asked.value === 'held') return ok('elsewhere');
      // Released between the two: try to take it again.
    }
    return ok('elsewhere');
  }

  #hold(granted: ConversationLease): OwnedLease {
    const lease: OwnedLease = {
      user_id: granted.user_id,
      conversation_id: granted.conversation_id,
      fence: { epoch: granted.epoch },
    };
    this.#held.set(key(granted.user_id, granted.conversation_id), {
      lease,
      epoch: granted.epoch,
      confirmedAt: millisOf(this.#clock),
    });
    return lease;
  }

  /** Gives the lease up; `again` when another process asked for a run meanwhile (the lease is kept for it). */
  async release(lease: OwnedLease): Promise<'released' | 'again'> {
    const entry = this.#held.get(key(lease.user_id, lease.conversation_id));
    if (!this.#store || !entry || entry.lease !== lease) return 'released';
    const given = await this.#store.release(this.owner, {
      user_id: lease.user_id,
      conversation_id: lease.conversation_id,
      epoch: entry.epoch,
    });
    if (given.isOk() && given.value === 'wake') return 'again';
    this.#held.delete(key(lease.user_id, lease.conversation_id));
    // A failed release expires by itself: another process takes over after the TTL.
    if (given.isErr())
      this.#logger.warn(
        { conversationId: lease.conversation_id, err: given.error.message },
        'could not release a conversation lease',
      );
    return 'released';
  }

  /** Locally still good: held, and confirmed by a renewal within the TTL (less a margin for clock drift). */
  holds(lease: OwnedLease): boolean {
    if (!this.#store) return true;
    const entry = this.#held.get(key(lease.user_id, lease.conversation_id));
    return entry?.lease === lease && millisOf(this.#clock) - entry.confirmedAt < this.ttlMs * 0.8;
  }

  /**
   * Asks whoever holds the conversation elsewhere to stop, and waits until nobody holds it (up
   * to `timeoutMs`). True when it is free (or was never held elsewhere).
   */
  async stopElsewhere(userId: string, conversationId: string, timeoutMs = 30_000): Promise<boolean> {
    if (!this.#store || this.#held.has(key(userId, conversationId))) return true;
    const asked = await this.#store.request(userId, conversationId, 'stop');
    if (asked.isErr() || asked.value === 'free') return asked.isOk();
    const deadline = millisOf(this.#clock) + timeoutMs;
    while (millisOf(this.#clock) < deadline) {
      await this.#clock.sleep(Math.min(100, this.renewMs));
      const holders = await this.#store.holders([{ user_id: userId, conversation_id: conversationId }]);
      if (holders.isOk() && holders.value.length === 0) return true;
    }
    return false;
  }

  /** Of these conversations, the ones nobody holds now (to take over). */
  async unheld<T extends { user_id: string; id: string }>(records: readonly T[]): Promise<T[]> {
    if (!this.#store || records.length === 0) return [...records];
    const holders = await this.#store.holders(records.map((r) => ({ user_id: r.user_id, conversation_id: r.id })));
    if (holders.isErr()) return [];
    const held = new Set(holders.value.map((h) => key(h.user_id, h.conversation_id)));
    return records.filter((r) => !held.has(key(r.user_id, r.id)));
  }

  /** Drops a deleted conversation's lease. */
  async forget(userId: string, conversationId: string): Promise<void> {
    this.#held.delete(key(userId, conversationId));
    await this.#store?.forget(userId, conversationId);
  }

  /** Starts renewing (with a lease store): `events` hears of leases lost and stop requests. */
  start(events: OwnershipEvents): void {
    if (!this.#store || this.#timer) return;
    this.#timer = this.#clock.every(this.renewMs, () => void this.#renew(events));
  }

  stop(): void {
    this.#timer?.cancel();
    this.#timer = null;
  }

  async #renew(events: OwnershipEvents): Promise<void> {
    if (!this.#store || this.#renewing || this.#held.size === 0) return;
    this.#renewing = true;
    try {
      const started = millisOf(this.#clock);
      const renewed = await this.#store.renew(this.owner, this.ttlMs);
      if (renewed.isErr()) {
        this.#logger.warn({ err: renewed.error.message }, 'could not renew conversation leases');
        for (const entry of [...this.#held.values()]) {
          if (millisOf(this.#clock) - entry.confirmedAt >= this.ttlMs * 0.8) this.#drop(entry.lease, events);
        }
        return;
      }
      const still = new Map<string, HeldLease>(renewed.value.map((l) => [key(l.user_id, l.conversation_id), l]));
      for (const [k, entry] of [...this.#held]) {
        const found = still.get(k);
        if (!found || found.epoch !== entry.epoch) {
          // Granted while this renewal ran? Then it was not in the answer yet: keep it.
          if (entry.confirmedAt >= started) continue;
          this.#drop(entry.lease, events);
          continue;
        }
        entry.confirmedAt = started;
        if (found.stop_requested) events.stopRequested(entry.lease);
      }
    } finally {
      this.#renewing = false;
    }
  }

  #drop(lease: OwnedLease, events: OwnershipEvents): void {
    this.#held.delete(key(lease.user_id, lease.conversation_id));
    this.#logger.warn(
      { conversationId: lease.conversation_id },
      'lost the lease of a conversation; another process runs it now',
    );
    events.lost(lease);
  }
}
