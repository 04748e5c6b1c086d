import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { DomainErrorOf } from '../errors.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import type { SandboxSpec } from './schema.js';
import type { SandboxSpecCatalog } from './store.js';

/**
 * Which images a user may name for their sandboxes (`sandbox_base_container_image`). A user's
 * image is pulled and run by the operator's engine (on Kubernetes, by nodes that pull with
 * their own registry credentials, so a private image of the operator's is one name away), and
 * an image the engine lacks may even be built by the server: so users name only what the
 * operator allows.
 */
export interface SandboxImagePolicy {
  /**
   * Images users may name besides those of the sandbox specs (always allowed): exact names, or
   * prefixes ending in `*` (`ghcr.io/acme/*`). Null: any image. Default: none besides the specs'.
   */
  allowed?: readonly string[] | null;
  /** What the list is called where the operator sets it (an environment variable), for refusals. */
  listName?: string | null;
}

/** The most specs read from the catalog to know their images. */
const MAX_SPECS = 1000;

/** Whether an image is one of the operator's entries (exact, or under a prefix ending in `*`). */
export function imageMatches(image: string, allowed: readonly string[]): boolean {
  return allowed.some((entry) => (entry.endsWith('*') ? image.startsWith(entry.slice(0, -1)) : image === entry));
}

/**
 * The spec a user's image runs with: the spec of that image when there is one (so its ports and
 * key come with it), else an ad-hoc spec on the default one when the policy allows the image,
 * else the refusal.
 */
export function specForImage(
  catalog: SandboxSpecCatalog,
  policy: SandboxImagePolicy,
  image: string,
): ResultAsync<SandboxSpec, DomainErrorOf<'SandboxImageNotAllowed'> | StoreFailure> {
  return resultAsync(resolve(catalog, policy, image));
}

/** Null when users may name the image, else why not. */
export function checkImage(
  catalog: SandboxSpecCatalog,
  policy: SandboxImagePolicy,
  image: string,
): ResultAsync<DomainErrorOf<'SandboxImageNotAllowed'> | null, StoreFailure> {
  return resultAsync(
    resolve(catalog, policy, image).then((spec) =>
      spec.isOk() ? ok(null) : spec.error.type === 'SandboxImageNotAllowed' ? ok(spec.error) : err(spec.error),
    ),
  );
}

async function resolve(
  catalog: SandboxSpecCatalog,
  policy: SandboxImagePolicy,
  image: string,
): Promise<Result<SandboxSpec, DomainErrorOf<'SandboxImageNotAllowed'> | StoreFailure>> {
  const listed = await catalog.list({ limit: MAX_SPECS, after: null });
  if (listed.isErr()) return err(listed.error);
  const own = listed.value.items.find((spec) => spec.image === image);
  if (own) return ok(own);
  const allowed = policy.allowed === undefined ? [] : policy.allowed;
  if (allowed !== null && !imageMatches(image, allowed))
    return err({ type: 'SandboxImageNotAllowed', image, allowed, listName: policy.listName ?? null });
  const base = await catalog.getDefault();
  if (base.isErr()) return err(base.error);
  return ok({
    ...base.value,
    id: image,
    image,
    description: 'Ad-hoc spec from the sandbox_base_container_image setting',
  });
}
