import { randomBytes, randomInt } from 'node:crypto';
import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import { millisOf, type Clock } from '../clock.js';
import type { DomainErrorOf, DomainErrorType, DeviceTokenRefusal, ErrorsOf } from '../errors.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import { hashSecret, isExpired, type ApiKeyService } from './api-keys.js';
import {
  displayUserCode,
  USER_CODE_ALPHABET,
  USER_CODE_LENGTH,
  type DeviceAuthorizationRequest,
  type DeviceAuthorizationView,
} from './schema.js';
import type { DeviceGrant, DeviceGrantStore } from './store.js';

/** What each device sign-in operation can fail with (the compiler holds the implementation to it). */
export const DeviceAuthorizationErrors = {
  start: ['DeviceAuthorizationsFull', 'DeviceAuthorizationsFromClientFull', 'StoreUnavailable'],
  poll: ['DeviceTokenRefused', 'StoreUnavailable'],
  describe: ['UserCodeNotFound', 'UserCodeAttemptsExceeded', 'DeviceAuthorizationAnswered', 'StoreUnavailable'],
  approve: [
    'UserCodeNotFound',
    'UserCodeAttemptsExceeded',
    'DeviceAuthorizationAnswered',
    'ApiKeyLimitReached',
    'StoreUnavailable',
  ],
  deny: ['UserCodeNotFound', 'UserCodeAttemptsExceeded', 'DeviceAuthorizationAnswered', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** Limits of device sign-ins; every one bounds what unauthenticated requests can make the server keep. */
export interface DeviceAuthorizationOptions {
  /** How long a device code and its user code live (default 10 minutes). */
  deviceCodeLifetimeMs?: number;
  /** Seconds a device waits between polls at first (default 5). */
  devicePollIntervalSeconds?: number;
  /** Sign-ins waiting at once, over all replicas (default 1000): past it, starting one is refused until some expire. */
  maxPendingDeviceAuthorizations?: number;
  /**
   * Sign-ins one client (an IPv4 address, an IPv6 /64: as the edge names it) may have waiting at
   * once (default 10), so no single client fills `maxPendingDeviceAuthorizations` for everyone.
   */
  maxPendingDeviceAuthorizationsPerClient?: number;
  /** How long the key a device sign-in makes opens things (default 90 days); null: until it is revoked. */
  deviceKeyLifetimeMs?: number | null;
  /** User codes one user may enter that match no sign-in (default 10) … */
  maxUserCodeFailures?: number;
  /** … within this window (default 15 minutes), before more are refused: guessing another's code stays hopeless. */
  userCodeFailureWindowMs?: number;
}

/** A device sign-in just started: what the device shows and polls with. */
export interface StartedDeviceAuthorization {
  device_code: string;
  /** As shown: XXXX-XXXX. */
  user_code: string;
  expires_in: number;
  interval: number;
}

/** The key a device gets once its sign-in is approved. */
export interface DeviceToken {
  access_token: string;
  /** Seconds until the key expires; null when device keys do not expire here. */
  expires_in: number | null;
}

export interface DeviceAuthorizationService {
  /**
   * Starts a sign-in for a device (no user yet: the person answers it in the console). `client`
   * names who asks, as the edge groups clients (e.g. `ip:203.0.113.7`, `ip:2001:db8:1:2::/64`);
   * only a digest of it is stored. Null: not counted per client.
   */
  start(
    request: DeviceAuthorizationRequest,
    client?: string | null,
  ): ResultAsync<StartedDeviceAuthorization, ErrorsOf<typeof DeviceAuthorizationErrors.start>>;
  /**
   * The device polls: once approved, a new API key of the approving user (the grant is used up);
   * until then why not (pending, slow down, expired, denied, unknown).
   */
  poll(deviceCode: string): ResultAsync<DeviceToken, ErrorsOf<typeof DeviceAuthorizationErrors.poll>>;
  /** The sign-in waiting with this (normalised) user code, for the person to answer. */
  describe(
    userId: string,
    userCode: string,
  ): ResultAsync<DeviceAuthorizationView, ErrorsOf<typeof DeviceAuthorizationErrors.describe>>;
  /** Binds the sign-in to the user: the device's next poll gets a new key of theirs. */
  approve(
    userId: string,
    userCode: string,
  ): ResultAsync<DeviceAuthorizationView, ErrorsOf<typeof DeviceAuthorizationErrors.approve>>;
  /** Refuses the sign-in: the device's next poll gets access_denied. */
  deny(
    userId: string,
    userCode: string,
  ): ResultAsync<DeviceAuthorizationView, ErrorsOf<typeof DeviceAuthorizationErrors.deny>>;
}

export interface DeviceAuthorizationDeps {
  store: DeviceGrantStore;
  apiKeys: ApiKeyService;
  clock: Clock;
  options?: DeviceAuthorizationOptions;
}

const DEFAULT_CLIENT_NAME = 'OpenHands CLI';
/** RFC 8628 §3.5: each slow_down adds 5 seconds; past a minute the device waits a minute. */
const SLOW_DOWN_STEP_SECONDS = 5;
const MAX_INTERVAL_SECONDS = 60;
/** A poll counts as too soon before this share of the interval: replicas' clocks and the network may differ a little. */
const TOO_SOON_SHARE = 0.8;
/** Draws of a user code before giving up (a collision is already rare at the most grants allowed). */
const USER_CODE_DRAWS = 5;

const refused = (
  reason: DeviceTokenRefusal,
  interval: number | null = null,
  note: string | null = null,
): DomainErrorOf<'DeviceTokenRefused'> => ({
  type: 'DeviceTokenRefused',
  reason,
  interval,
  note,
});

function randomUserCode(): string {
  return Array.from({ length: USER_CODE_LENGTH }, () => USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)]).join(
    '',
  );
}

const viewOf = (grant: DeviceGrant): DeviceAuthorizationView => ({
  user_code: displayUserCode(grant.user_code),
  client_name: grant.client_name,
  status: grant.status,
  created_at: grant.created_at,
  expires_at: grant.expires_at,
});

/** "OpenHands CLI (2026-01-31 09:12 UTC)": the name of the key a device sign-in makes. */
const keyNameOf = (grant: DeviceGrant, now: string) =>
  `${grant.client_name} (${now.slice(0, 10)} ${now.slice(11, 16)} UTC)`;

/** The limits of device sign-ins, defaults applied. */
interface Limits {
  lifetimeMs: number;
  intervalSeconds: number;
  maxPending: number;
  maxPendingPerClient: number;
  maxFailures: number;
  failureWindowMs: number;
  /** Null: device keys do not expire. */
  keyLifetimeMs: number | null;
}

/** The default lifetime of a device sign-in's key: 90 days. */
const DEFAULT_DEVICE_KEY_LIFETIME_MS = 90 * 24 * 3600_000;

function resolveOptions(options: DeviceAuthorizationOptions = {}): Limits {
  const resolved = {
    lifetimeMs: options.deviceCodeLifetimeMs ?? 10 * 60_000,
    intervalSeconds: options.devicePollIntervalSeconds ?? 5,
    maxPending: options.maxPendingDeviceAuthorizations ?? 1000,
    maxPendingPerClient: options.maxPendingDeviceAuthorizationsPerClient ?? 10,
    maxFailures: options.maxUserCodeFailures ?? 10,
    failureWindowMs: options.userCodeFailureWindowMs ?? 15 * 60_000,
  };
  for (const [name, value] of Object.entries(resolved)) {
    if (!(Number.isInteger(value) && value > 0))
      throw new Error(`device authorization option ${name} must be a positive integer.`);
  }
  const keyLifetimeMs =
    options.deviceKeyLifetimeMs === undefined ? DEFAULT_DEVICE_KEY_LIFETIME_MS : options.deviceKeyLifetimeMs;
  if (keyLifetimeMs !== null && !(Number.isSafeInteger(keyLifetimeMs) && keyLifetimeMs >= 1000))
    throw new Error('device authorization option deviceKeyLifetimeMs must be at least a second, or null.');
  return { ...resolved, keyLifetimeMs };
}

/** What is stored of a client's name: a digest (the grant store keeps no addresses). */
const clientDigest = (client: string) => hashSecret(`acs-device-client\0${client}`);

export function createDeviceAuthorizationService(deps: DeviceAuthorizationDeps): DeviceAuthorizationService {
  const limits = resolveOptions(deps.options);
  return {
    start: (request, client = null) => resultAsync(start(deps, limits, request, client)),
    poll: (deviceCode) => resultAsync(poll(deps, limits, deviceCode)),
    describe: (userId, userCode) => resultAsync(withUserCode(deps, limits, userId, userCode, describeFor(userId))),
    approve: (userId, userCode) => resultAsync(approve(deps, limits, userId, userCode)),
    deny: (userId, userCode) => resultAsync(withUserCode(deps, limits, userId, userCode, answerWith(userId, 'denied'))),
  };
}

const at = (ms: number) => new Date(ms).toISOString();

async function start(
  deps: DeviceAuthorizationDeps,
  limits: Limits,
  request: DeviceAuthorizationRequest,
  client: string | null,
): Promise<Result<StartedDeviceAuthorization, ErrorsOf<typeof DeviceAuthorizationErrors.start>>> {
  const now = millisOf(deps.clock);
  const deviceCode = randomBytes(32).toString('base64url');
  const grant = {
    client: client === null ? null : clientDigest(client),
    device_code_hash: hashSecret(deviceCode),
    client_name: request.client_id ?? DEFAULT_CLIENT_NAME,
    status: 'pending' as const,
    user_id: null,
    created_at: at(now),
    expires_at: at(now + limits.lifetimeMs),
    interval_seconds: limits.intervalSeconds,
    last_polled_at: null,
  };
  const stored = await insertWithFreshCode(deps, limits, grant);
  if (stored.isErr()) return err(stored.error);
  return ok({
    device_code: deviceCode,
    user_code: displayUserCode(stored.value.user_code),
    expires_in: Math.round(limits.lifetimeMs / 1000),
    interval: limits.intervalSeconds,
  });
}

/** Inserts the grant with a user code no live grant has, drawing again on a collision (up to USER_CODE_DRAWS). */
async function insertWithFreshCode(
  deps: DeviceAuthorizationDeps,
  limits: Limits,
  grant: Omit<DeviceGrant, 'user_code'>,
): Promise<Result<DeviceGrant, ErrorsOf<typeof DeviceAuthorizationErrors.start>>> {
  for (let draws = USER_CODE_DRAWS; ; draws--) {
    const candidate = { ...grant, user_code: randomUserCode() };
    const now = millisOf(deps.clock);
    const outcome = await deps.store.insert(candidate, {
      now: at(now),
      maxLive: limits.maxPending,
      maxLivePerClient: limits.maxPendingPerClient,
      dropExpiredBefore: at(now - limits.lifetimeMs),
    });
    if (outcome.isErr()) return err(outcome.error);
    if (outcome.value === 'inserted') return ok(candidate);
    if (outcome.value === 'client_full')
      return err({ type: 'DeviceAuthorizationsFromClientFull', limit: limits.maxPendingPerClient });
    if (outcome.value === 'full' || draws <= 1)
      return err({ type: 'DeviceAuthorizationsFull', limit: limits.maxPending });
  }
}

async function poll(
  deps: DeviceAuthorizationDeps,
  limits: Limits,
  deviceCode: string,
): Promise<Result<DeviceToken, ErrorsOf<typeof DeviceAuthorizationErrors.poll>>> {
  const now = deps.clock.now();
  // Set inside the store's atomic update: what the poll decided on the grant as it was there.
  const decided: { outcome: ReturnType<typeof decidePoll>['outcome'] } = {
    outcome: { refused: refused('invalid_grant') },
  };
  const updated = await deps.store.update({ device_code_hash: hashSecret(deviceCode) }, (grant) => {
    const { next, outcome } = decidePoll(grant, now);
    decided.outcome = outcome;
    return next;
  });
  if (updated.isErr()) return err(updated.error);
  const outcome = decided.outcome;
  if ('refused' in outcome) return err(outcome.refused);
  const grant = outcome.approved;
  const key = await deps.apiKeys.create(grant.user_id ?? '', keyNameOf(grant, now), {
    lifetimeMs: limits.keyLifetimeMs,
  });
  if (key.isOk())
    return ok({
      access_token: key.value.key,
      expires_in: limits.keyLifetimeMs === null ? null : Math.round(limits.keyLifetimeMs / 1000),
    });
  if (key.error.type !== 'ApiKeyLimitReached') return err(key.error);
  return err(
    refused(
      'invalid_grant',
      null,
      `The approving user already has ${key.error.limit} API keys, the most allowed; they must revoke one and sign in again.`,
    ),
  );
}

async function approve(
  deps: DeviceAuthorizationDeps,
  limits: Limits,
  userId: string,
  userCode: string,
): Promise<Result<DeviceAuthorizationView, ErrorsOf<typeof DeviceAuthorizationErrors.approve>>> {
  // Refused before anything is bound: an approval whose key could not be made would leave the device with nothing.
  const keys = await deps.apiKeys.list(userId);
  if (keys.isErr()) return err(keys.error);
  // Expired keys open nothing and make way for the new one (the store drops them when it adds it).
  const now = deps.clock.now();
  if (keys.value.filter((key) => !isExpired(key, now)).length >= deps.apiKeys.maxPerUser)
    return err({ type: 'ApiKeyLimitReached', limit: deps.apiKeys.maxPerUser });
  return withUserCode(deps, limits, userId, userCode, answerWith(userId, 'approved'));
}

/** How a person's answer changes a live grant, and what they are told. */
type Answer<T, E> = (grant: DeviceGrant, now: string) => { next: DeviceGrant; result: Result<T, E> };

/**
 * A user code's grant for a person, under the guessing limit: a code that matches no live
 * sign-in counts against the user, and past the limit nothing is looked up at all.
 */
async function withUserCode<T, E>(
  deps: DeviceAuthorizationDeps,
  limits: Limits,
  userId: string,
  userCode: string,
  answer: Answer<T, E>,
): Promise<Result<T, E | DomainErrorOf<'UserCodeNotFound' | 'UserCodeAttemptsExceeded'> | StoreFailure>> {
  const now = deps.clock.now();
  const failures = await deps.store.failures(userId, now, limits.failureWindowMs);
  if (failures.isErr()) return err(failures.error);
  if (failures.value >= limits.maxFailures)
    return err({
      type: 'UserCodeAttemptsExceeded',
      limit: limits.maxFailures,
      windowSeconds: Math.round(limits.failureWindowMs / 1000),
    });
  // Set inside the store's atomic update: the answer given to the live grant, if there was one.
  const answered: { result: Result<T, E> | null } = { result: null };
  const updated = await deps.store.update({ user_code: userCode }, (grant) => {
    if (!grant || grant.expires_at <= now) return grant;
    const decided = answer(grant, now);
    answered.result = decided.result;
    return decided.next;
  });
  if (updated.isErr()) return err(updated.error);
  if (answered.result) return answered.result;
  const recorded = await deps.store.recordFailure(userId, now, limits.failureWindowMs);
  if (recorded.isErr()) return err(recorded.error);
  return err({ type: 'UserCodeNotFound', userCode: displayUserCode(userCode) });
}

/** Answers a pending grant; answering it again the same way is the same answer, any other is a conflict. */
const answerWith =
  (
    userId: string,
    status: 'approved' | 'denied',
  ): Answer<DeviceAuthorizationView, DomainErrorOf<'DeviceAuthorizationAnswered'>> =>
  (grant) => {
    if (grant.status === 'pending') {
      const next = { ...grant, status, user_id: userId };
      return { next, result: ok(viewOf(next)) };
    }
    const same = grant.status === status && grant.user_id === userId;
    return {
      next: grant,
      result: same
        ? ok(viewOf(grant))
        : err({ type: 'DeviceAuthorizationAnswered', userCode: displayUserCode(grant.user_code) }),
    };
  };

/** Someone else's answered grant is not shown: it is no longer this person's to answer. */
const describeFor =
  (userId: string): Answer<DeviceAuthorizationView, DomainErrorOf<'DeviceAuthorizationAnswered'>> =>
  (grant) => ({
    next: grant,
    result:
      grant.status === 'pending' || grant.user_id === userId
        ? ok(viewOf(grant))
        : err({ type: 'DeviceAuthorizationAnswered', userCode: displayUserCode(grant.user_code) }),
  });

/** What a poll does to the grant, and what the device is told. */
function decidePoll(
  grant: DeviceGrant | null,
  now: string,
): { next: DeviceGrant | null; outcome: { refused: DomainErrorOf<'DeviceTokenRefused'> } | { approved: DeviceGrant } } {
  if (!grant) return { next: null, outcome: { refused: refused('invalid_grant') } };
  // Every answer but "pending" ends the grant: the device stops polling, and a code is used once.
  if (grant.expires_at <= now) return { next: null, outcome: { refused: refused('expired_token') } };
  if (grant.status === 'denied') return { next: null, outcome: { refused: refused('access_denied') } };
  if (grant.status === 'approved') return { next: null, outcome: { approved: grant } };
  const soon =
    grant.last_polled_at !== null &&
    Date.parse(now) - Date.parse(grant.last_polled_at) < grant.interval_seconds * 1000 * TOO_SOON_SHARE;
  if (soon) {
    const interval = Math.min(grant.interval_seconds + SLOW_DOWN_STEP_SECONDS, MAX_INTERVAL_SECONDS);
    return {
      next: { ...grant, interval_seconds: interval, last_polled_at: now },
      outcome: { refused: refused('slow_down', interval) },
    };
  }
  return { next: { ...grant, last_polled_at: now }, outcome: { refused: refused('authorization_pending') } };
}
