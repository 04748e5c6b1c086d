import { ApiException } from '@kubernetes/client-node';
import { unreachableCode, type SandboxRuntimeError } from '@acs/core/ports';

/** The object, or null when the API says it does not exist. */
export async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return null;
    throw error;
  }
}

/** A delete whose "not found" is success. */
export async function gone(deletion: Promise<unknown>): Promise<void> {
  await orNull(deletion);
}

/** The message of the API's Status body, if the exception carries one. */
function apiMessage(error: ApiException<unknown>): string {
  const body = error.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      return body.slice(0, 500) || error.message;
    }
  }
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string')
    return (body as { message: string }).message;
  return error.message;
}

/** What the API client threw during `operation` in `namespace`, as the port's error. */
export function toRuntimeError(operation: string, error: unknown, namespace: string): SandboxRuntimeError {
  if (error instanceof ApiException) {
    const message = apiMessage(error);
    if (error.code === 404) return { type: 'not_found', message };
    if (error.code === 401)
      return { type: 'unavailable', message: `the Kubernetes API refused the credentials (401): ${message}` };
    if (error.code === 403)
      return {
        type: 'failed',
        message: `the Kubernetes API forbids ${operation} in namespace ${namespace} (check the service account's Role): ${message}`,
      };
    if (error.code >= 500)
      return { type: 'unavailable', message: `the Kubernetes API failed (${error.code}): ${message}` };
    return { type: 'failed', message };
  }
  const code = unreachableCode(error);
  if (code !== undefined) {
    return {
      type: 'unavailable',
      message: `the Kubernetes API cannot be reached (${code}); check the kubeconfig or that the cluster is up`,
    };
  }
  return { type: 'failed', message: (error as Error).message ?? String(error) };
}
