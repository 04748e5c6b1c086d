import { z } from 'zod';

export const SANDBOX_STATUSES = ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING'] as const;
export const SandboxStatusSchema = z.enum(SANDBOX_STATUSES);
export type SandboxStatus = z.infer<typeof SandboxStatusSchema>;

/** Lifecycle states a stored sandbox can be in: the public statuses plus DELETED (a tombstone, never listed). */
export type SandboxLifecycleStatus = SandboxStatus | 'DELETED';

export const ExposedUrlSchema = z.object({
  name: z.string().meta({ description: 'What listens there, e.g. AGENT_SERVER, VSCODE, WORKER_1.' }),
  url: z.string(),
  port: z.int().meta({ description: 'The port it listens on inside the sandbox.' }),
});
export type ExposedUrl = z.infer<typeof ExposedUrlSchema>;

/** A port a spec's image listens on, offered (through the service) as an exposed URL of that name. */
export const ExposedPortSchema = z.object({
  name: z
    .string()
    .regex(/^[A-Z][A-Z0-9_]{0,63}$/)
    .meta({ description: "The exposed URL's name, e.g. AGENT_SERVER (upper case, digits, underscores)." }),
  port: z.int().min(1).max(65535),
  health_path: z
    .string()
    .regex(/^\/[\x21-\x7e]{0,255}$/)
    .nullable()
    .optional()
    .meta({ description: 'A path answering 2xx once the service is up; the sandbox is STARTING until it does.' }),
});
export type ExposedPort = z.infer<typeof ExposedPortSchema>;

/** A template sandboxes are created from: an image and how to run it. */
export const SandboxSpecSchema = z.object({
  id: z.string(),
  image: z.string(),
  command: z.array(z.string()).nullable(),
  working_dir: z.string(),
  initial_env: z.record(z.string(), z.string()),
  description: z.string().nullable(),
  created_at: z.iso.datetime(),
  exposed_ports: z
    .array(ExposedPortSchema)
    .optional()
    .meta({ description: 'Ports its image serves, each reached through the service at <base>/sandboxes/{id}/<name>.' }),
  session_api_key_variable: z.string().nullable().optional().meta({
    description:
      'Each sandbox gets a fresh key in this environment variable: its session_api_key, which opens its exposed URLs.',
  }),
});
export type SandboxSpec = z.infer<typeof SandboxSpecSchema>;

/**
 * The owner a pooled sandbox is recorded under (its record's `user_id`, and its container's user
 * label) while it waits, ready, to be claimed: it belongs to the installation and to no user.
 * Every store read is scoped to a user, so no user lists it, counts it or reaches it. A claim
 * (`SandboxStore.claimPooled`) moves the record to the user; the runtime's label keeps saying
 * this, which means "the owner is the one the store names" (reconcile and prune ask the store).
 * Hosts must not authenticate anyone as this id.
 */
export const POOLED_SANDBOX_OWNER = 'acs:sandbox-pool';

/** A sandbox as kept by a SandboxStore. */
export interface SandboxRecord {
  id: string;
  user_id: string;
  sandbox_spec_id: string;
  /** The spec as it was when the sandbox was created (ad-hoc specs are not in any catalog). */
  spec: SandboxSpec;
  status: SandboxLifecycleStatus;
  status_detail: string | null;
  exposed_urls: ExposedUrl[];
  created_at: string;
  updated_at: string;
  /**
   * When an agent last used the sandbox, as far as any process recorded it (written at most
   * about once a minute, and only while idle pausing is on). Absent until first written.
   */
  last_active_at?: string | null;
  /** Which engine runs it, for runtimes over several engines (absent otherwise). */
  location?: string | null;
  /**
   * The sandbox's own key, made when it is reserved when its spec names a
   * `session_api_key_variable` (the container gets it there): it opens this sandbox's exposed
   * URLs and nothing else. Absent for other specs and for adopted sandboxes (their key is the
   * container's alone).
   */
  session_api_key?: string | null;
}

/** The sandbox record of the V1 API. */
export const SandboxInfoSchema = z.object({
  id: z.string(),
  created_by_user_id: z.string().nullable(),
  sandbox_spec_id: z.string(),
  status: SandboxStatusSchema,
  status_detail: z
    .string()
    .nullable()
    .meta({ description: 'Why the sandbox is in ERROR or MISSING, or what it is waiting for.' }),
  session_api_key: z.string().nullable().meta({
    description:
      "While RUNNING, for specs that run a server of their own (e.g. the OpenHands agent-server): the key that opens the sandbox's exposed URLs, as X-Session-API-Key. Null otherwise.",
  }),
  exposed_urls: z.array(ExposedUrlSchema).nullable().meta({ description: 'Only while RUNNING; null otherwise.' }),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});
export type SandboxInfo = z.infer<typeof SandboxInfoSchema>;

export function toSandboxInfo(record: SandboxRecord): SandboxInfo {
  const status: SandboxStatus = record.status === 'DELETED' ? 'MISSING' : record.status;
  return {
    id: record.id,
    created_by_user_id: record.user_id,
    sandbox_spec_id: record.sandbox_spec_id,
    status,
    status_detail: record.status_detail,
    session_api_key: status === 'RUNNING' ? (record.session_api_key ?? null) : null,
    exposed_urls: status === 'RUNNING' ? record.exposed_urls : null,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** Start a sandbox: the spec may come in the body (or, for compatibility, the query). */
export const StartSandboxRequestSchema = z.object({
  sandbox_spec_id: z.string().min(1).max(512).nullable().optional(),
});
export type StartSandboxRequest = z.infer<typeof StartSandboxRequestSchema>;
