/**
 * The console's one way to the service: the typed client of `@acs/web-console/client`, with
 * the API base the server put into the page, and answers unwrapped into data or an ApiError
 * carrying the server's own message.
 */
import { createAcsClient, type components, type paths } from '../../src/client.js';

export const apiBase = document.querySelector<HTMLMetaElement>('meta[name="acs-api-base"]')?.content ?? '';
export const api = createAcsClient({ baseUrl: apiBase });

/** An answer that was not 2xx: the status and what the server said (its `code` and `message`). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: { path: string; message: string }[] = [],
  ) {
    super(message);
  }
}

/** Unwraps an openapi-fetch answer: the data, or an ApiError (a network failure is status 0). */
export async function unwrap<T>(pending: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await pending;
  } catch (error) {
    throw new ApiError(
      0,
      'NETWORK',
      `The service did not answer (${error instanceof Error ? error.message : String(error)}). Check that it is running.`,
    );
  }
  if (answer.response.ok) return answer.data as T;
  const body = (answer.error ?? {}) as {
    code?: string;
    message?: string;
    issues?: { path: string; message: string }[];
  };
  throw new ApiError(
    answer.response.status,
    body.code ?? `HTTP_${answer.response.status}`,
    body.message ?? answer.response.statusText,
    body.issues ?? [],
  );
}

type JsonOf<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer T } } };
}
  ? T
  : never;

export type AppConversation = JsonOf<'/api/v1/app-conversations/{conversation_id}', 'get'>;
export type SandboxInfo = NonNullable<JsonOf<'/api/v1/sandboxes', 'get'>[number]>;
export type ConversationEvent = components['schemas']['ConversationEvent'];
export type ActionEvent = components['schemas']['ActionEvent'];
export type ObservationEvent = components['schemas']['ObservationEvent'];
export type LlmCallEvent = components['schemas']['LlmCallEvent'];
export type ExecutionStatus = components['schemas']['StatusEvent']['execution_status'];
/** Every kind of event: generated with the API's types from core's one list (a stream listener per kind). */
export { CONVERSATION_EVENT_KINDS } from '../../src/api-schema.js';
