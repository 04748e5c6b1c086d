import { z } from 'zod';

export const SANDBOX_STATUSES = ['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING'] as const;
export const SandboxStatusSchema = z.enum(SANDBOX_STATUSES);
export type SandboxStatus = z.infer<typeof SandboxStatusSchema>;

/** Lifecycle states a stored sandbox can be in: the public statuses plus DELETED (a tombstone, never listed). */
export type SandboxLifecycleStatus = SandboxStatus | 'DELETED';

export const ExposedUrlSchema = z.object({
  name: z.string().meta({ description: 'What listens there, e.g. AGENT_SERVER, VSCODE, WORKER_1.' }),
  url: z.string(),
});
export type ExposedUrl = z.infer<typeof ExposedUrlSchema>;

/** A template sandboxes are created from: an image and how to run it. */
export const SandboxSpecSchema = z.object({
  id: z.string(),
  image: z.string(),
  command: z.array(z.string()).nullable(),
  working_dir: z.string(),
  initial_env: z.record(z.string(), z.string()),
  description: z.string().nullable(),
  created_at: z.iso.datetime(),
});
export type SandboxSpec = z.infer<typeof SandboxSpecSchema>;

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
}

/** The sandbox record of the V1 API. */
export const SandboxInfoSchema = z.object({
  id: z.string(),
  created_by_user_id: z.string().nullable(),
  sandbox_spec_id: z.string(),
  status: SandboxStatusSchema,
  status_detail: z.string().nullable().meta({ description: 'Why the sandbox is in ERROR or MISSING, or what it is waiting for.' }),
  session_api_key: z
    .string()
    .nullable()
    .meta({ description: 'Always null: tools run through the service, so no agent server inside the sandbox needs a key.' }),
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
    session_api_key: null,
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
