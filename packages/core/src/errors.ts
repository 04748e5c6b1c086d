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
  | { readonly type: 'IllegalConversationTransition'; readonly conversationId: string; readonly from: string; readonly event: string }
  | { readonly type: 'ConfirmationNotPending'; readonly conversationId: string; readonly executionStatus: string | null }
  | { readonly type: 'StartTaskNotFound'; readonly taskId: string }
  | { readonly type: 'SandboxNotFound'; readonly sandboxId: string }
  | { readonly type: 'SandboxSpecNotFound'; readonly specId: string }
  | { readonly type: 'IllegalSandboxTransition'; readonly sandboxId: string; readonly from: string; readonly action: string }
  | { readonly type: 'SandboxRuntimeFailed'; readonly sandboxId: string; readonly operation: string; readonly message: string }
  | { readonly type: 'SandboxesUnavailable'; readonly reason: string }
  | { readonly type: 'SandboxCapReached'; readonly limit: number }
  | { readonly type: 'SecretNotFound'; readonly name: string }
  | { readonly type: 'ConversationNotRunning'; readonly conversationId: string; readonly status: string }
  | { readonly type: 'SecretNameTaken'; readonly name: string }
  | { readonly type: 'WorkspaceFileNotFound'; readonly conversationId: string; readonly path: string }
  | { readonly type: 'WorkspacePathIsDirectory'; readonly conversationId: string; readonly path: string }
  /** Ids a request names that no record can have, or more of them than one request may name. */
  | { readonly type: 'InvalidIds'; readonly field: string; readonly reason: string }
  /** A conversation already holds as many messages waiting for its agent as it may. */
  | { readonly type: 'TooManyPendingMessages'; readonly conversationId: string; readonly limit: number }
  /** A conversation's log is larger than an export may be. */
  | { readonly type: 'ExportTooLarge'; readonly conversationId: string; readonly limit: number }
  | {
      readonly type: 'StoreUnavailable';
      readonly operation: string;
      /** The backend's own message: for the operator, never shown to clients (it may quote stored values). */
      readonly message: string;
      /** What failed, without any value: the error's class and, where the backend has one, its code (e.g. `DatabaseError 22P05`). Safe to log. */
      readonly errorClass: string;
    };

export type DomainErrorType = DomainError['type'];

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
  WorkspaceFileNotFound: ['FILE_NOT_FOUND'],
  WorkspacePathIsDirectory: ['PATH_IS_DIRECTORY'],
  InvalidIds: ['INVALID_IDS'],
  TooManyPendingMessages: ['TOO_MANY_PENDING_MESSAGES'],
  ExportTooLarge: ['EXPORT_TOO_LARGE'],
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
}

/**
 * Stable machine code and a human sentence for every domain error. The sentence speaks of the
 * domain, never of a transport; `hints` add where to go.
 */
export function explainDomainError(error: DomainError, hints: ErrorHints = {}): ExplainedDomainError {
  const via = (where: string | undefined) => (where ? ` with ${where}` : '');
  return match<DomainError, ExplainedDomainError>(error)
    .with({ type: 'ValidationFailed' }, (e) => ({ code: 'VALIDATION_FAILED', message: e.message }))
    .with({ type: 'SettingsNotFound' }, () => ({
      code: 'SETTINGS_NOT_FOUND',
      message: `No settings are stored for this user yet; store them${via(hints.storeSettings) || ' first'}.`,
    }))
    .with({ type: 'SettingsRequired' }, (e) =>
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
    )
    .with({ type: 'ConversationNotFound' }, (e) => ({
      code: 'CONVERSATION_NOT_FOUND',
      message: `Conversation ${e.conversationId} was not found.`,
    }))
    .with({ type: 'ConversationIdTaken' }, (e) => ({
      code: 'CONVERSATION_ID_TAKEN',
      message: `A conversation with id ${e.conversationId} already exists; choose another id or omit it.`,
    }))
    .with({ type: 'IllegalConversationTransition' }, (e) => ({
      code: 'ILLEGAL_CONVERSATION_TRANSITION',
      message: `Conversation ${e.conversationId} is ${e.from}; it cannot ${e.event.replaceAll('_', ' ')}.`,
    }))
    .with({ type: 'ConfirmationNotPending' }, (e) => ({
      code: 'CONFIRMATION_NOT_PENDING',
      message: `Conversation ${e.conversationId} has no actions waiting for confirmation (its agent is ${e.executionStatus ?? 'not started'}); nothing was accepted or rejected.`,
    }))
    .with({ type: 'StartTaskNotFound' }, (e) => ({
      code: 'START_TASK_NOT_FOUND',
      message: `Start task ${e.taskId} was not found.`,
    }))
    .with({ type: 'SandboxNotFound' }, (e) => ({
      code: 'SANDBOX_NOT_FOUND',
      message: `Sandbox ${e.sandboxId} was not found.`,
    }))
    .with({ type: 'SandboxSpecNotFound' }, (e) => ({
      code: 'SANDBOX_SPEC_NOT_FOUND',
      message: `Sandbox spec ${e.specId} does not exist; list the available specs${via(hints.listSandboxSpecs)}.`,
    }))
    .with({ type: 'IllegalSandboxTransition' }, (e) => ({
      code: 'ILLEGAL_SANDBOX_TRANSITION',
      message: `Sandbox ${e.sandboxId} is ${e.from}; it cannot be ${pastTense(e.action)}.`,
    }))
    .with({ type: 'SandboxRuntimeFailed' }, (e) => ({
      code: 'SANDBOX_RUNTIME_FAILED',
      message: `The sandbox runtime failed to ${e.operation} sandbox ${e.sandboxId}: ${e.message}`,
    }))
    .with({ type: 'SandboxesUnavailable' }, (e) => ({
      code: 'SANDBOXES_UNAVAILABLE',
      message: `Sandboxes are unavailable on this server: ${e.reason}`,
    }))
    .with({ type: 'ConversationNotRunning' }, (e) => ({
      code: 'CONVERSATION_NOT_RUNNING' as const,
      message: `Conversation ${e.conversationId} is ${e.status}: its sandbox is not running. Start the conversation to look at its files.`,
    }))
    .with({ type: 'SecretNotFound' }, (e) => ({
      code: 'SECRET_NOT_FOUND' as const,
      message: `There is no secret named ${e.name}.`,
    }))
    .with({ type: 'SecretNameTaken' }, (e) => ({
      code: 'SECRET_NAME_TAKEN' as const,
      message: `A secret named ${e.name} already exists; choose another name, or change that one.`,
    }))
    .with({ type: 'WorkspaceFileNotFound' }, (e) => ({
      code: 'FILE_NOT_FOUND' as const,
      message: `There is no file ${e.path} in the workspace of conversation ${e.conversationId}.`,
    }))
    .with({ type: 'WorkspacePathIsDirectory' }, (e) => ({
      code: 'PATH_IS_DIRECTORY' as const,
      message: `${e.path} in the workspace of conversation ${e.conversationId} is a directory, not a file; list its entries${via(hints.listFiles) || ' instead'}.`,
    }))
    .with({ type: 'InvalidIds' }, (e) => ({
      code: 'INVALID_IDS' as const,
      message: `${e.field}: ${e.reason}`,
    }))
    .with({ type: 'TooManyPendingMessages' }, (e) => ({
      code: 'TOO_MANY_PENDING_MESSAGES' as const,
      message: `Conversation ${e.conversationId} already has ${e.limit} messages waiting for its agent, the most allowed; send more once it has taken them.`,
    }))
    .with({ type: 'ExportTooLarge' }, (e) => ({
      code: 'EXPORT_TOO_LARGE' as const,
      message: `Conversation ${e.conversationId} has more than ${e.limit} events, more than an export may hold; read its events page by page instead.`,
    }))
    .with({ type: 'SandboxCapReached' }, (e) => ({
      code: 'SANDBOX_LIMIT_REACHED',
      message: `You already have ${e.limit} running sandbox${e.limit === 1 ? '' : 'es'}, the most allowed at once; pause or delete one, then try again.`,
    }))
    .with({ type: 'StoreUnavailable' }, (e) => ({
      code: 'STORE_UNAVAILABLE',
      message: `Storage failed during ${e.operation}; nothing was changed by this request. Try again.`,
    }))
    .exhaustive();
}

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

export const validationFailed = (issues: readonly FieldIssue[], message?: string): DomainErrorOf<'ValidationFailed'> => ({
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
