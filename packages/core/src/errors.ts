import { match } from 'ts-pattern';

/** A field-level problem found while validating input. `path` is dotted (`mcp_config.sse_servers.0.url`). */
export interface FieldIssue {
  readonly path: string;
  readonly message: string;
}

/**
 * Everything a service can refuse or fail with. Plain data, so it serialises and
 * `ts-pattern` can match it exhaustively at the edge (HTTP, CLI, ...).
 * Programmer errors are thrown instead and never appear here.
 */
export type DomainError =
  | { readonly type: 'ValidationFailed'; readonly message: string; readonly issues: readonly FieldIssue[] }
  | { readonly type: 'SettingsNotFound' }
  | { readonly type: 'SettingsRequired'; readonly missing: 'settings' | 'llm_model' | 'llm_api_key' }
  | { readonly type: 'ConversationNotFound'; readonly conversationId: string }
  | { readonly type: 'ConversationIdTaken'; readonly conversationId: string }
  | {
      readonly type: 'IllegalConversationTransition';
      readonly conversationId: string;
      readonly from: string;
      readonly event: string;
    }
  | {
      readonly type: 'ConfirmationNotPending';
      readonly conversationId: string;
      readonly executionStatus: string | null;
    }
  | { readonly type: 'StartTaskNotFound'; readonly taskId: string }
  | { readonly type: 'SandboxNotFound'; readonly sandboxId: string }
  | { readonly type: 'SandboxSpecNotFound'; readonly specId: string }
  | {
      readonly type: 'IllegalSandboxTransition';
      readonly sandboxId: string;
      readonly from: string;
      readonly action: string;
    }
  | {
      readonly type: 'SandboxRuntimeFailed';
      readonly sandboxId: string;
      readonly operation: string;
      readonly message: string;
    }
  | { readonly type: 'SandboxesUnavailable'; readonly reason: string }
  /**
   * `none_at_rest`: the service would have paused one of the user's sandboxes to make room, but
   * each runs an agent, starts a conversation, was used moments ago or has no conversation;
   * `pause_failed`: pausing the one it chose failed. Absent: the service refuses at the limit.
   */
  | { readonly type: 'SandboxCapReached'; readonly limit: number; readonly why?: 'none_at_rest' | 'pause_failed' }
  | { readonly type: 'SecretNotFound'; readonly name: string }
  | { readonly type: 'ConversationNotRunning'; readonly conversationId: string; readonly status: string }
  | { readonly type: 'SecretNameTaken'; readonly name: string }
  | { readonly type: 'ProfileNotFound'; readonly name: string }
  | { readonly type: 'ProfileNameTaken'; readonly name: string }
  | { readonly type: 'ProfileLimitReached'; readonly limit: number }
  | { readonly type: 'WorkspaceFileNotFound'; readonly conversationId: string; readonly path: string }
  | { readonly type: 'WorkspacePathIsDirectory'; readonly conversationId: string; readonly path: string }
  | { readonly type: 'ApiKeyNotFound'; readonly keyId: string }
  | { readonly type: 'ApiKeyLimitReached'; readonly limit: number }
  | {
      readonly type: 'DeviceTokenRefused';
      /** The RFC 8628 §3.5 answer: the device keeps polling on authorization_pending and slow_down, and stops on the others. */
      readonly reason: DeviceTokenRefusal;
      /** With slow_down: the seconds to wait between polls from now on. */
      readonly interval: number | null;
      /** Why, when there is more to say than the reason (e.g. the key could not be made). */
      readonly note: string | null;
    }
  | { readonly type: 'DeviceAuthorizationsFull'; readonly limit: number }
  /** One client (an address, an IPv6 /64) has as many device sign-ins waiting as one client may. */
  | { readonly type: 'DeviceAuthorizationsFromClientFull'; readonly limit: number }
  | { readonly type: 'UserCodeNotFound'; readonly userCode: string }
  | { readonly type: 'UserCodeAttemptsExceeded'; readonly limit: number; readonly windowSeconds: number }
  | { readonly type: 'DeviceAuthorizationAnswered'; readonly userCode: string }
  /** The user has no token for the git provider asked about (provider null: for none at all). */
  | { readonly type: 'GitProviderNotConnected'; readonly provider: string | null }
  /**
   * A git request that cannot be made: the provider (or this server's client of it) does not offer
   * it (`unsupported`), the provider refused it as asked (`rejected`), or the token's host is one
   * this server may not call (`host_not_allowed`).
   */
  | {
      readonly type: 'GitRequestRefused';
      readonly provider: string;
      readonly reason: 'unsupported' | 'rejected' | 'host_not_allowed';
      readonly message: string;
    }
  /** The git provider refused the user's token (`token_invalid`), or refused it this (`forbidden`). */
  | {
      readonly type: 'GitProviderRefused';
      readonly provider: string;
      readonly reason: 'token_invalid' | 'forbidden';
      readonly message: string;
    }
  | { readonly type: 'GitResourceNotFound'; readonly provider: string; readonly message: string }
  | { readonly type: 'GitProviderRateLimited'; readonly provider: string; readonly message: string }
  /** The git provider could not be reached, failed (5xx), answered something unreadable, or did not answer in time. */
  | {
      readonly type: 'GitProviderUnavailable';
      readonly provider: string;
      readonly reason: 'unavailable' | 'timeout';
      readonly message: string;
    }
  /** Ids a request names that no record can have, or more of them than one request may name. */
  | { readonly type: 'InvalidIds'; readonly field: string; readonly reason: string }
  /** A conversation already holds as many messages waiting for its agent as it may. */
  | { readonly type: 'TooManyPendingMessages'; readonly conversationId: string; readonly limit: number }
  /** A conversation's log is larger than an export may be. */
  | { readonly type: 'ExportTooLarge'; readonly conversationId: string; readonly limit: number }
  /**
   * A URL the user gave names a host outside the operator's allow-list for it (`target`: a
   * model's base URL, or an MCP server's URL): `path` is the field, `allowed` the list's entries,
   * `listName` what the list is called where the operator sets it (an environment variable).
   */
  | {
      readonly type: 'HostNotAllowed';
      readonly target: 'llm' | 'mcp';
      readonly path: string;
      readonly host: string;
      readonly allowed: readonly string[];
      readonly listName: string | null;
    }
  /**
   * An image a user named (`sandbox_base_container_image`) is not one the operator lets users
   * name: `allowed` the operator's entries (exact names, or prefixes ending in `*`), besides the
   * images of the sandbox specs; `listName` what the list is called where it is set.
   */
  | {
      readonly type: 'SandboxImageNotAllowed';
      readonly image: string;
      readonly allowed: readonly string[];
      readonly listName: string | null;
    }
  /**
   * Secret values were asked for (`GET /api/v1/users/me?expose_secrets=true`) without the key of
   * a running sandbox of the caller's: `missing` no key, `invalid` not such a key (or its
   * sandbox is not running), `other_user` the key of another user's sandbox.
   */
  | { readonly type: 'SecretsNotExposed'; readonly reason: 'missing' | 'invalid' | 'other_user' }
  | {
      readonly type: 'StoreUnavailable';
      readonly operation: string;
      /** The backend's own message: for the operator, never shown to clients (it may quote stored values). */
      readonly message: string;
      /** What failed, without any value: the error's class and, where the backend has one, its code (e.g. `DatabaseError 22P05`). Safe to log. */
      readonly errorClass: string;
    };

export type DomainErrorType = DomainError['type'];

/** Why the token endpoint of a device sign-in gives no token (RFC 8628 §3.5, RFC 6749 §5.2). */
export const DEVICE_TOKEN_REFUSALS = [
  'authorization_pending',
  'slow_down',
  'expired_token',
  'access_denied',
  'invalid_grant',
] as const;
export type DeviceTokenRefusal = (typeof DEVICE_TOKEN_REFUSALS)[number];

/** The domain errors of the given types: `DomainErrorOf<'SandboxNotFound' | 'StoreUnavailable'>`. */
export type DomainErrorOf<T extends DomainErrorType> = Extract<DomainError, { type: T }>;

/**
 * The error union of an operation, from the list of error types it declares
 * (`ErrorsOf<typeof SandboxServiceErrors.start>`). Each service declares these lists once, as
 * runtime arrays, so an edge (the HTTP adapter's OpenAPI document) can say what an operation
 * may fail with, and the compiler holds the implementation to the list.
 */
export type ErrorsOf<L extends readonly DomainErrorType[]> = DomainErrorOf<L[number]>;

/**
 * Every code `explainDomainError` gives, per error type (SettingsRequired has one per missing
 * piece), for an edge to list what an operation may answer with.
 */
export const DOMAIN_ERROR_CODES = {
  ValidationFailed: ['VALIDATION_FAILED'],
  SettingsNotFound: ['SETTINGS_NOT_FOUND'],
  SettingsRequired: ['SETTINGS_REQUIRED', 'LLM_MODEL_REQUIRED', 'LLM_API_KEY_REQUIRED'],
  ConversationNotFound: ['CONVERSATION_NOT_FOUND'],
  ConversationIdTaken: ['CONVERSATION_ID_TAKEN'],
  IllegalConversationTransition: ['ILLEGAL_CONVERSATION_TRANSITION'],
  ConfirmationNotPending: ['CONFIRMATION_NOT_PENDING'],
  StartTaskNotFound: ['START_TASK_NOT_FOUND'],
  SandboxNotFound: ['SANDBOX_NOT_FOUND'],
  SandboxSpecNotFound: ['SANDBOX_SPEC_NOT_FOUND'],
  IllegalSandboxTransition: ['ILLEGAL_SANDBOX_TRANSITION'],
  SandboxRuntimeFailed: ['SANDBOX_RUNTIME_FAILED'],
  SandboxesUnavailable: ['SANDBOXES_UNAVAILABLE'],
  SandboxCapReached: ['SANDBOX_LIMIT_REACHED'],
  SecretNotFound: ['SECRET_NOT_FOUND'],
  ConversationNotRunning: ['CONVERSATION_NOT_RUNNING'],
  SecretNameTaken: ['SECRET_NAME_TAKEN'],
  ProfileNotFound: ['PROFILE_NOT_FOUND'],
  ProfileNameTaken: ['PROFILE_NAME_TAKEN'],
  ProfileLimitReached: ['PROFILE_LIMIT_REACHED'],
  WorkspaceFileNotFound: ['FILE_NOT_FOUND'],
  WorkspacePathIsDirectory: ['PATH_IS_DIRECTORY'],
  ApiKeyNotFound: ['API_KEY_NOT_FOUND'],
  ApiKeyLimitReached: ['API_KEY_LIMIT_REACHED'],
  DeviceTokenRefused: ['AUTHORIZATION_PENDING', 'SLOW_DOWN', 'EXPIRED_TOKEN', 'ACCESS_DENIED', 'INVALID_GRANT'],
  DeviceAuthorizationsFull: ['DEVICE_AUTHORIZATIONS_FULL'],
  DeviceAuthorizationsFromClientFull: ['DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL'],
  UserCodeNotFound: ['USER_CODE_NOT_FOUND'],
  UserCodeAttemptsExceeded: ['USER_CODE_ATTEMPTS_EXCEEDED'],
  DeviceAuthorizationAnswered: ['DEVICE_AUTHORIZATION_ANSWERED'],
  GitProviderNotConnected: ['GIT_PROVIDER_NOT_CONNECTED'],
  GitRequestRefused: ['GIT_REQUEST_UNSUPPORTED', 'GIT_PROVIDER_REJECTED_REQUEST', 'GIT_HOST_NOT_ALLOWED'],
  GitProviderRefused: ['GIT_PROVIDER_TOKEN_INVALID', 'GIT_PROVIDER_FORBIDDEN'],
  GitResourceNotFound: ['GIT_RESOURCE_NOT_FOUND'],
  GitProviderRateLimited: ['GIT_PROVIDER_RATE_LIMITED'],
  GitProviderUnavailable: ['GIT_PROVIDER_UNAVAILABLE', 'GIT_PROVIDER_TIMEOUT'],
  InvalidIds: ['INVALID_IDS'],
  TooManyPendingMessages: ['TOO_MANY_PENDING_MESSAGES'],
  ExportTooLarge: ['EXPORT_TOO_LARGE'],
  HostNotAllowed: ['LLM_HOST_NOT_ALLOWED', 'MCP_HOST_NOT_ALLOWED'],
  SandboxImageNotAllowed: ['SANDBOX_IMAGE_NOT_ALLOWED'],
  SecretsNotExposed: ['SESSION_API_KEY_REQUIRED', 'SESSION_API_KEY_INVALID', 'SESSION_API_KEY_MISMATCH'],
  StoreUnavailable: ['STORE_UNAVAILABLE'],
} as const satisfies { readonly [T in DomainErrorType]: readonly [string, ...string[]] };

/** A stable machine code of a domain error (the `code` of an error response). */
export type DomainErrorCode = (typeof DOMAIN_ERROR_CODES)[DomainErrorType][number];

export interface ExplainedDomainError {
  code: DomainErrorCode;
  message: string;
}

/**
 * Where a client does what an error asks of it, in the words of the adapter that serves it
 * (adapter-express: `POST /api/settings`). Core names no route; without these the sentences
 * say what to do, not where.
 */
export interface ErrorHints {
  /** Where settings are stored. */
  storeSettings?: string;
  /** Where the sandbox specs are listed. */
  listSandboxSpecs?: string;
  /** Where a directory of a conversation's workspace is listed. */
  listFiles?: string;
  /** Where git provider tokens are stored. */
  storeProviderTokens?: string;
}

/** How each domain error is explained: its code and sentence, from the error and the caller's hints. */
type Explainers = {
  readonly [K in DomainErrorType]: (error: DomainErrorOf<K>, hints: ErrorHints) => ExplainedDomainError;
};

/** ` with <where>` when the caller said where, else nothing. */
const via = (where: string | undefined) => (where ? ` with ${where}` : '');

/** Every domain error's explanation, one entry per type (the compiler holds it to every type). */
const EXPLAINERS: Explainers = {
  ValidationFailed: (e) => ({ code: 'VALIDATION_FAILED', message: e.message }),
  SettingsNotFound: (_e, hints) => ({
    code: 'SETTINGS_NOT_FOUND',
    message: `No settings are stored for this user yet; store them${via(hints.storeSettings) || ' first'}.`,
  }),
  SettingsRequired: (e, hints) =>
    match<typeof e.missing, ExplainedDomainError>(e.missing)
      .with('settings', () => ({
        code: 'SETTINGS_REQUIRED',
        message: `Store settings (at least llm_model and llm_api_key)${via(hints.storeSettings)} before starting a conversation.`,
      }))
      .with('llm_model', () => ({
        code: 'LLM_MODEL_REQUIRED',
        message: `The stored settings have no llm_model; set one${via(hints.storeSettings)} before starting a conversation.`,
      }))
      .with('llm_api_key', () => ({
        code: 'LLM_API_KEY_REQUIRED',
        message: `The stored settings have no llm_api_key; set one${via(hints.storeSettings)} before starting a conversation.`,
      }))
      .exhaustive(),
  ConversationNotFound: (e) => ({
    code: 'CONVERSATION_NOT_FOUND',
    message: `Conversation ${e.conversationId} was not found.`,
  }),
  ConversationIdTaken: (e) => ({
    code: 'CONVERSATION_ID_TAKEN',
    message: `A conversation with id ${e.conversationId} already exists; choose another id or omit it.`,
  }),
  IllegalConversationTransition: (e) => ({
    code: 'ILLEGAL_CONVERSATION_TRANSITION',
    message: `Conversation ${e.conversationId} is ${e.from}; it cannot ${e.event.replaceAll('_', ' ')}.`,
  }),
  ConfirmationNotPending: (e) => ({
    code: 'CONFIRMATION_NOT_PENDING',
    message: `Conversation ${e.conversationId} has no actions waiting for confirmation (its agent is ${e.executionStatus ?? 'not started'}); nothing was accepted or rejected.`,
  }),
  StartTaskNotFound: (e) => ({
    code: 'START_TASK_NOT_FOUND',
    message: `Start task ${e.taskId} was not found.`,
  }),
  SandboxNotFound: (e) => ({
    code: 'SANDBOX_NOT_FOUND',
    message: `Sandbox ${e.sandboxId} was not found.`,
  }),
  SandboxSpecNotFound: (e, hints) => ({
    code: 'SANDBOX_SPEC_NOT_FOUND',
    message: `Sandbox spec ${e.specId} does not exist; list the available specs${via(hints.listSandboxSpecs)}.`,
  }),
  IllegalSandboxTransition: (e) => ({
    code: 'ILLEGAL_SANDBOX_TRANSITION',
    message: `Sandbox ${e.sandboxId} is ${e.from}; it cannot be ${pastTense(e.action)}.`,
  }),
  SandboxRuntimeFailed: (e) => ({
    code: 'SANDBOX_RUNTIME_FAILED',
    message: `The sandbox runtime failed to ${e.operation} sandbox ${e.sandboxId}: ${e.message}`,
  }),
  SandboxesUnavailable: (e) => ({
    code: 'SANDBOXES_UNAVAILABLE',
    message: `Sandboxes are unavailable on this server: ${e.reason}`,
  }),
  ConversationNotRunning: (e) => ({
    code: 'CONVERSATION_NOT_RUNNING' as const,
    message: `Conversation ${e.conversationId} is ${e.status}: its sandbox is not running. Start the conversation to look at its files.`,
  }),
  SecretNotFound: (e) => ({
    code: 'SECRET_NOT_FOUND' as const,
    message: `There is no secret named ${e.name}.`,
  }),
  SecretNameTaken: (e) => ({
    code: 'SECRET_NAME_TAKEN' as const,
    message: `A secret named ${e.name} already exists; choose another name, or change that one.`,
  }),
  ProfileNotFound: (e) => ({
    code: 'PROFILE_NOT_FOUND' as const,
    message: `There is no LLM profile named ${e.name}; save one under that name first.`,
  }),
  ProfileNameTaken: (e) => ({
    code: 'PROFILE_NAME_TAKEN' as const,
    message: `An LLM profile named ${e.name} already exists; choose another name, or delete that one first.`,
  }),
  ProfileLimitReached: (e) => ({
    code: 'PROFILE_LIMIT_REACHED' as const,
    message: `You already have ${e.limit} LLM profiles, the most allowed; delete one before saving a new one.`,
  }),
  WorkspaceFileNotFound: (e) => ({
    code: 'FILE_NOT_FOUND' as const,
    message: `There is no file ${e.path} in the workspace of conversation ${e.conversationId}.`,
  }),
  WorkspacePathIsDirectory: (e, hints) => ({
    code: 'PATH_IS_DIRECTORY' as const,
    message: `${e.path} in the workspace of conversation ${e.conversationId} is a directory, not a file; list its entries${via(hints.listFiles) || ' instead'}.`,
  }),
  GitProviderNotConnected: (e, hints) => ({
    code: 'GIT_PROVIDER_NOT_CONNECTED' as const,
    message:
      e.provider === null
        ? `No git provider is connected: store a provider token (a GitHub or GitLab one)${via(hints.storeProviderTokens)} first.`
        : `No ${providerName(e.provider)} token is stored for you: store one${via(hints.storeProviderTokens)} first.`,
  }),
  GitRequestRefused: (e, hints) =>
    match<typeof e.reason, ExplainedDomainError>(e.reason)
      .with('unsupported', () => ({ code: 'GIT_REQUEST_UNSUPPORTED', message: e.message }))
      .with('rejected', () => ({
        code: 'GIT_PROVIDER_REJECTED_REQUEST',
        message: `${providerName(e.provider)} refused the request: ${e.message}`,
      }))
      .with('host_not_allowed', () => ({
        code: 'GIT_HOST_NOT_ALLOWED',
        message: `${e.message} Store the ${providerName(e.provider)} token with a host this server may call${via(hints.storeProviderTokens)}.`,
      }))
      .exhaustive(),
  GitProviderRefused: (e, hints) =>
    e.reason === 'token_invalid'
      ? {
          code: 'GIT_PROVIDER_TOKEN_INVALID' as const,
          message: `${providerName(e.provider)} refused the stored token (${e.message}): store a valid one${via(hints.storeProviderTokens)}.`,
        }
      : {
          code: 'GIT_PROVIDER_FORBIDDEN' as const,
          message: `${providerName(e.provider)} does not allow this with the stored token: ${e.message}`,
        },
  GitResourceNotFound: (e) => ({
    code: 'GIT_RESOURCE_NOT_FOUND' as const,
    message: `${providerName(e.provider)} has no such resource for the stored token: ${e.message}`,
  }),
  GitProviderRateLimited: (e) => ({
    code: 'GIT_PROVIDER_RATE_LIMITED' as const,
    message: `The ${providerName(e.provider)} rate limit of the stored token is used up; try again later. (${e.message})`,
  }),
  GitProviderUnavailable: (e) =>
    e.reason === 'timeout'
      ? {
          code: 'GIT_PROVIDER_TIMEOUT' as const,
          message: `${providerName(e.provider)} did not answer in time: ${e.message}`,
        }
      : {
          code: 'GIT_PROVIDER_UNAVAILABLE' as const,
          message: `${providerName(e.provider)} could not be used: ${e.message}`,
        },
  InvalidIds: (e) => ({
    code: 'INVALID_IDS' as const,
    message: `${e.field}: ${e.reason}`,
  }),
  TooManyPendingMessages: (e) => ({
    code: 'TOO_MANY_PENDING_MESSAGES' as const,
    message: `Conversation ${e.conversationId} already has ${e.limit} messages waiting for its agent, the most allowed; send more once it has taken them.`,
  }),
  ExportTooLarge: (e) => ({
    code: 'EXPORT_TOO_LARGE' as const,
    message: `Conversation ${e.conversationId} has more than ${e.limit} events, more than an export may hold; read its events page by page instead.`,
  }),
  HostNotAllowed: (e) => explainHostNotAllowed(e),
  SandboxImageNotAllowed: (e) => ({
    code: 'SANDBOX_IMAGE_NOT_ALLOWED' as const,
    message: `sandbox_base_container_image names the image ${e.image}, which users of this server may not name. Allowed: the images of the sandbox specs${
      e.allowed.length > 0
        ? `, and ${e.allowed.slice(0, 20).join(', ')}${e.allowed.length > 20 ? ` and ${e.allowed.length - 20} more` : ''}`
        : ''
    }${e.listName ? ` (${e.listName})` : ''}; or leave it empty for the default sandbox.`,
  }),
  SecretsNotExposed: (e) =>
    match(e.reason)
      .with('missing', () => ({
        code: 'SESSION_API_KEY_REQUIRED' as const,
        message:
          'Secret values are shown only to code in one of your running sandboxes: send its session_api_key as X-Session-API-Key, or leave expose_secrets out to see them masked.',
      }))
      .with('invalid', () => ({
        code: 'SESSION_API_KEY_INVALID' as const,
        message:
          'X-Session-API-Key is not the key of a running sandbox of yours (or of a conversation in one); secret values are shown only with such a key.',
      }))
      .with('other_user', () => ({
        code: 'SESSION_API_KEY_MISMATCH' as const,
        message:
          'X-Session-API-Key belongs to a sandbox of another user; secret values are shown only with a key of yours.',
      }))
      .exhaustive(),
  SandboxCapReached: (e) => ({
    code: 'SANDBOX_LIMIT_REACHED',
    message: `You already have ${e.limit} running sandbox${e.limit === 1 ? '' : 'es'}, the most allowed at once${
      e.why === 'none_at_rest'
        ? `, and none could be paused to make room: a sandbox is paused for another only when all its conversations have finished or wait for you (and not in the seconds after they did), never while an agent works in it or when it was started without a conversation. Wait for an agent to finish, or pause or delete one, then try again.`
        : e.why === 'pause_failed'
          ? `, and pausing one whose conversations have finished, to make room, failed; pause or delete one, then try again.`
          : `; pause or delete one, then try again.`
    }`,
  }),
  ApiKeyNotFound: (e) => ({
    code: 'API_KEY_NOT_FOUND' as const,
    message: `You have no API key ${e.keyId} (it may have been revoked already).`,
  }),
  ApiKeyLimitReached: (e) => ({
    code: 'API_KEY_LIMIT_REACHED' as const,
    message: `You already have ${e.limit} API keys, the most allowed; revoke one you no longer use, then try again.`,
  }),
  DeviceTokenRefused: (e) => explainDeviceTokenRefusal(e),
  DeviceAuthorizationsFull: (e) => ({
    code: 'DEVICE_AUTHORIZATIONS_FULL' as const,
    message: `${e.limit} device sign-ins are waiting to be answered, the most allowed at once; try again in a few minutes.`,
  }),
  DeviceAuthorizationsFromClientFull: (e) => ({
    code: 'DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL' as const,
    message: `${e.limit} device sign-ins from your address are waiting to be answered, the most one address may have; answer them, or wait until they expire (minutes), then try again.`,
  }),
  UserCodeNotFound: (e) => ({
    code: 'USER_CODE_NOT_FOUND' as const,
    message: `No device sign-in is waiting with code ${e.userCode}: check the code, or start the sign-in on the device again (codes expire).`,
  }),
  UserCodeAttemptsExceeded: (e) => ({
    code: 'USER_CODE_ATTEMPTS_EXCEEDED' as const,
    message: `Too many codes that match no sign-in (${e.limit} within ${Math.round(e.windowSeconds / 60)} minutes); wait, then open the link the device shows.`,
  }),
  DeviceAuthorizationAnswered: (e) => ({
    code: 'DEVICE_AUTHORIZATION_ANSWERED' as const,
    message: `The device sign-in ${e.userCode} has already been answered; start the sign-in on the device again.`,
  }),
  StoreUnavailable: (e) => ({
    code: 'STORE_UNAVAILABLE',
    message: `Storage failed during ${e.operation}; nothing was changed by this request. Try again.`,
  }),
};

/**
 * Stable machine code and a human sentence for every domain error. The sentence speaks of the
 * domain, never of a transport; `hints` add where to go.
 */
export function explainDomainError(error: DomainError, hints: ErrorHints = {}): ExplainedDomainError {
  // The table's entry for this error's type takes this error (TypeScript cannot relate the two by itself).
  const explain = EXPLAINERS[error.type] as (error: DomainError, hints: ErrorHints) => ExplainedDomainError;
  return explain(error, hints);
}

function explainDeviceTokenRefusal(e: DomainErrorOf<'DeviceTokenRefused'>): ExplainedDomainError {
  const note = e.note ? ` ${e.note}` : '';
  return match<DeviceTokenRefusal, ExplainedDomainError>(e.reason)
    .with('authorization_pending', () => ({
      code: 'AUTHORIZATION_PENDING',
      message: `The sign-in has not been approved yet; poll again.${note}`,
    }))
    .with('slow_down', () => ({
      code: 'SLOW_DOWN',
      message: `Polled too often: wait at least ${e.interval ?? 5} seconds between polls.${note}`,
    }))
    .with('expired_token', () => ({
      code: 'EXPIRED_TOKEN',
      message: `The device code has expired; start the sign-in again.${note}`,
    }))
    .with('access_denied', () => ({ code: 'ACCESS_DENIED', message: `The sign-in was denied.${note}` }))
    .with('invalid_grant', () => ({
      code: 'INVALID_GRANT',
      message: `The device code is not one of a waiting sign-in (unknown, or already used).${note}`,
    }))
    .exhaustive();
}

/** The hosts shown in a refusal: the first 20 entries of the list. */
const SHOWN_HOSTS = 20;

function explainHostNotAllowed(e: DomainErrorOf<'HostNotAllowed'>): ExplainedDomainError {
  const what = e.target === 'llm' ? 'call for models' : 'connect to for MCP servers';
  const shown = e.allowed.slice(0, SHOWN_HOSTS).join(', ');
  const more = e.allowed.length > SHOWN_HOSTS ? ` and ${e.allowed.length - SHOWN_HOSTS} more` : '';
  const list = e.allowed.length === 0 ? 'none' : `${shown}${more}`;
  return {
    code: e.target === 'llm' ? 'LLM_HOST_NOT_ALLOWED' : 'MCP_HOST_NOT_ALLOWED',
    message: `${e.path} names the host ${e.host}, which this server may not ${what}. The hosts it may: ${list}${e.listName ? ` (${e.listName})` : ''}.`,
  };
}

const PROVIDER_NAMES: Readonly<Record<string, string>> = {
  github: 'GitHub',
  gitlab: 'GitLab',
  bitbucket: 'Bitbucket',
  bitbucket_data_center: 'Bitbucket Data Center',
  forgejo: 'Forgejo',
  azure_devops: 'Azure DevOps',
};

/** `github` → `GitHub`, for sentences. */
const providerName = (provider: string): string => PROVIDER_NAMES[provider] ?? provider;

function pastTense(action: string): string {
  switch (action) {
    case 'pause':
      return 'paused';
    case 'resume':
      return 'resumed';
    case 'delete':
      return 'deleted';
    case 'start':
      return 'started';
    case 'attach':
      return 'used for a new conversation; start a new sandbox instead';
    default:
      return action;
  }
}

export const validationFailed = (
  issues: readonly FieldIssue[],
  message?: string,
): DomainErrorOf<'ValidationFailed'> => ({
  type: 'ValidationFailed',
  message:
    message ??
    `Invalid input: ${issues
      .slice(0, 5)
      .map((i) => (i.path ? `${i.path}: ${i.message}` : i.message))
      .join('; ')}${issues.length > 5 ? ` (and ${issues.length - 5} more)` : ''}`,
  issues,
});

export const storeUnavailable = (operation: string, cause: unknown): DomainError => ({
  type: 'StoreUnavailable',
  operation,
  message: cause instanceof Error ? cause.message : String(cause),
  errorClass: errorClassOf(cause),
});

/** `DatabaseError 22P05`, `Error ECONNREFUSED`, `TypeError`: the class and code of a failure, never its values. */
function errorClassOf(cause: unknown): string {
  const name = cause instanceof Error ? cause.constructor.name || cause.name : typeof cause;
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,32}$/i.test(code) ? `${name} ${code}` : name;
}
