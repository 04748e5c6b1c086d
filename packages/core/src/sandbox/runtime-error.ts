import { ResultAsync } from 'neverthrow';

/** What every runtime operation fails with (the shell's too). */
export interface SandboxRuntimeError {
  /**
   * `unavailable`: the runtime itself cannot be reached (engine down); `not_found`: the
   * sandbox, or the file asked for, does not exist; `is_directory`: a file was asked for and the
   * path names a directory (readFile); `failed`: this operation failed.
   */
  type: 'unavailable' | 'not_found' | 'is_directory' | 'failed';
  message: string;
}

/**
 * A failure a runtime adapter explains itself, thrown inside an operation and answered as it
 * is (see attemptRuntime): the adapter's own words, of the type it chose.
 */
export class RuntimeFailure extends Error {
  constructor(
    message: string,
    readonly type: SandboxRuntimeError['type'] = 'failed',
  ) {
    super(message);
  }
}

/**
 * Runs one operation of a runtime adapter, written as an async function that throws, as the
 * ResultAsync the port answers with: a RuntimeFailure as it says, anything else (the engine's
 * client threw) as `explain` reads it.
 */
export function attemptRuntime<T>(
  work: () => Promise<T>,
  explain: (error: unknown) => SandboxRuntimeError,
): ResultAsync<T, SandboxRuntimeError> {
  return ResultAsync.fromPromise(work(), (error) =>
    error instanceof RuntimeFailure ? { type: error.type, message: error.message } : explain(error),
  );
}

/** Codes of a connection to an engine's API that could not be made or was cut (not of the operation). */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'EACCES',
  'EPIPE',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/**
 * The code of an error that says the engine could not be reached (refused, reset, unknown
 * host…), looked for along its cause chain (undici's fetch puts the socket's under `cause`);
 * undefined for any other error.
 */
export function unreachableCode(error: unknown): string | undefined {
  for (
    let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string') return UNREACHABLE.has(e.code) ? e.code : undefined;
  }
  return undefined;
}
