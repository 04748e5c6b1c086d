import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import type { ConversationRecord } from '../conversation/schema.js';
import type { ConversationStore } from '../conversation/store.js';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import { normalizeId } from '../ids.js';
import { resolveSandboxPath, runtimeFailure, type FileContent, type SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxRecord } from '../sandbox/schema.js';
import type { SandboxService } from '../sandbox/service.js';

/** What each workspace operation can fail with (the compiler holds the implementation to it). */
export const WorkspaceServiceErrors = {
  listFiles: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  readFile: ['ConversationNotFound', 'ConversationNotRunning', 'WorkspaceFileNotFound', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  gitChanges: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  gitDiff: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  describe: ['ConversationNotFound', 'StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** The error union of a workspace operation. */
export type WorkspaceServiceError<K extends keyof typeof WorkspaceServiceErrors> = ErrorsOf<(typeof WorkspaceServiceErrors)[K]>;

/** A changed file, as `git status` reports it: M modified, A added (or new), D deleted, R renamed, U unmerged. */
export interface GitChange {
  status: 'M' | 'A' | 'D' | 'R' | 'U';
  /** Relative to the repository root. */
  path: string;
}

/** A conversation's workspace, for the panels of a UI: where it is and what guides its agent. */
export interface WorkspaceDescription {
  conversation_id: string;
  sandbox_id: string | null;
  /** The repository the conversation works on (`owner/name`), if any. */
  repository: string | null;
  /** The agent's working directory: the repository's clone, or the sandbox's working directory. */
  directory: string | null;
  /** The repository's guidance files (`AGENTS.md`, `.openhands/microagents/*`). */
  microagents: { name: string; type: 'repo' | 'knowledge'; content: string; triggers: string[] }[];
}

/**
 * Looks into a running conversation's sandbox for a UI's panels: files, and the changes of its
 * repository. Everything goes through the runtime port (argv, never a shell line), inside the
 * conversation's own sandbox.
 */
export interface WorkspaceService {
  /** The entries of a directory (relative to the working directory; default itself), directories with a trailing `/`. */
  listFiles(userId: string, conversationId: string, path: string | null): ResultAsync<string[], WorkspaceServiceError<'listFiles'>>;
  /** A file's text (invalid UTF-8 replaced), clipped at `maxBytes` (default 1 MiB) with a note. */
  readFile(userId: string, conversationId: string, path: string): ResultAsync<string, WorkspaceServiceError<'readFile'>>;
  /** What changed in the working directory's git repository; empty when it is not one. */
  gitChanges(userId: string, conversationId: string): ResultAsync<GitChange[], WorkspaceServiceError<'gitChanges'>>;
  /** A file as committed (HEAD) and as it is now; '' for a side that does not exist. */
  gitDiff(userId: string, conversationId: string, path: string): ResultAsync<{ original: string; modified: string }, WorkspaceServiceError<'gitDiff'>>;
  describe(userId: string, conversationId: string): ResultAsync<WorkspaceDescription, WorkspaceServiceError<'describe'>>;
}

export interface WorkspaceServiceDeps {
  conversations: ConversationStore;
  sandboxes: SandboxService;
  runtime: SandboxRuntime;
}

const MAX_FILE_BYTES = 1024 * 1024;

export function createWorkspaceService(deps: WorkspaceServiceDeps): WorkspaceService {
  const { conversations, sandboxes, runtime } = deps;

  const recordOf = (userId: string, id: string) =>
    conversations
      .get(userId, normalizeId(id))
      .andThen((record) => (record ? okAsync(record) : errAsync<ConversationRecord, DomainErrorOf<'ConversationNotFound'>>({ type: 'ConversationNotFound', conversationId: id })));

  const directoryOf = (record: ConversationRecord, box: SandboxRecord | null): string | null => record.workspace?.repository_dir ?? box?.spec.working_dir ?? null;

  /** The conversation with its sandbox, which must be running. */
  const running = (userId: string, id: string) =>
    recordOf(userId, id).andThen((record) =>
      sandboxes.liveRecords(userId, record.sandbox_id ? [record.sandbox_id] : []).andThen((boxes) => {
        const box = record.sandbox_id ? (boxes.get(record.sandbox_id) ?? null) : null;
        if (!box || box.status !== 'RUNNING') {
          return errAsync<{ record: ConversationRecord; box: SandboxRecord; dir: string }, DomainErrorOf<'ConversationNotRunning'>>({
            type: 'ConversationNotRunning',
            conversationId: record.id,
            status: box ? `${record.status} (sandbox ${box.status})` : record.status,
          });
        }
        return okAsync({ record, box, dir: directoryOf(record, box) ?? box.spec.working_dir });
      }),
    );

  const git = (sandboxId: string, dir: string, args: readonly string[]) =>
    runtime.exec(sandboxId, { command: ['git', '-C', dir, ...args], timeoutMs: 30_000 }).mapErr(runtimeFailure(sandboxId, 'read the repository of'));

  const decode = (content: FileContent) => {
    const text = new TextDecoder('utf-8', { fatal: false }).decode(content.bytes);
    return content.truncated ? `${text}\n[… ${content.size - content.bytes.length} more bytes not shown]` : text;
  };

  return {
    listFiles: (userId, id, path) =>
      running(userId, id).andThen(({ box, dir }) => {
        const target = resolveSandboxPath(dir, path ?? '.') ?? dir;
        return runtime
          .listDirectory(box.id, target)
          .map((entries) =>
            entries.map((e) => {
              const relative = target === dir ? e.name : `${target.startsWith(`${dir}/`) ? target.slice(dir.length + 1) : target}/${e.name}`;
              return e.type === 'directory' ? `${relative}/` : relative;
            }),
          )
          .orElse((e) => (e.type === 'not_found' ? okAsync<string[], never>([]) : errAsync(runtimeFailure(box.id, 'list files in')(e))));
      }),

    readFile: (userId, id, path) =>
      running(userId, id).andThen(({ record, box, dir }) =>
        runtime
          .readFile(box.id, resolveSandboxPath(dir, path) ?? path, { maxBytes: MAX_FILE_BYTES })
          .map(decode)
          .mapErr((e): WorkspaceServiceError<'readFile'> =>
            e.type === 'not_found' ? { type: 'WorkspaceFileNotFound', conversationId: record.id, path } : runtimeFailure(box.id, 'read a file of')(e),
          ),
      ),

    gitChanges: (userId, id) =>
      running(userId, id).andThen(({ box, dir }) =>
        git(box.id, dir, ['status', '--porcelain=v1', '-uall', '-z']).map((result) => (result.exit_code === 0 ? parseStatus(result.stdout) : [])),
      ),

    gitDiff: (userId, id, path) =>
      running(userId, id).andThen(({ box, dir }) => {
        const relative = path.startsWith(`${dir}/`) ? path.slice(dir.length + 1) : path.replace(/^\/+/, '');
        return ResultAsync.combine([
          git(box.id, dir, ['show', `HEAD:${relative}`]).map((r) => (r.exit_code === 0 ? r.stdout : '')),
          runtime
            .readFile(box.id, resolveSandboxPath(dir, relative) ?? relative, { maxBytes: MAX_FILE_BYTES })
            .map(decode)
            .orElse((e) => (e.type === 'not_found' ? okAsync<string, never>('') : errAsync(runtimeFailure(box.id, 'read a file of')(e)))),
        ] as const).map(([original, modified]) => ({ original, modified }));
      }),

    describe: (userId, id) =>
      recordOf(userId, id).andThen((record) =>
        sandboxes
          .liveRecords(userId, record.sandbox_id ? [record.sandbox_id] : [])
          .map((boxes) => {
            const box = record.sandbox_id ? (boxes.get(record.sandbox_id) ?? null) : null;
            const guidance = record.workspace?.guidance;
            return {
              conversation_id: record.id,
              sandbox_id: record.sandbox_id,
              repository: record.selected_repository,
              directory: directoryOf(record, box),
              microagents: [
                ...(guidance?.instructions ?? []).map((f) => ({ name: f.path, type: 'repo' as const, content: f.content, triggers: [] })),
                ...(guidance?.knowledge ?? []).map((f) => ({ name: f.name, type: 'knowledge' as const, content: f.content, triggers: f.triggers })),
              ],
            };
          }),
      ),
  };
}

/** `git status --porcelain=v1 -z` → changes (a rename's entry is followed by its old path, which is skipped). */
function parseStatus(output: string): GitChange[] {
  const fields = output.split('\0').filter((f) => f !== '');
  const changes: GitChange[] = [];
  for (let i = 0; i < fields.length; i++) {
    const entry = fields[i]!;
    const xy = entry.slice(0, 2);
    const path = entry.slice(3);
    const status: GitChange['status'] = xy.includes('U') || xy === 'AA' || xy === 'DD' ? 'U' : xy.includes('R') ? 'R' : xy.includes('D') ? 'D' : xy === '??' || xy.includes('A') ? 'A' : 'M';
    if (status === 'R') i++;
    changes.push({ status, path });
  }
  return changes;
}
