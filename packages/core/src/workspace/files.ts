import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import type { ConversationRecord } from '../conversation/schema.js';
import type { ConversationStore } from '../conversation/store.js';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import { normalizeId } from '../ids.js';
import { resolveSandboxPath, runtimeFailure, splitClippedOutput, type FileContent, type SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxRecord } from '../sandbox/schema.js';
import type { SandboxService } from '../sandbox/service.js';
import { decodeCursor, type PageRequest } from '../pagination.js';

/** What each workspace operation can fail with (the compiler holds the implementation to it). */
export const WorkspaceServiceErrors = {
  listFiles: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  readFile: ['ConversationNotFound', 'ConversationNotRunning', 'WorkspaceFileNotFound', 'WorkspacePathIsDirectory', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  gitChanges: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  gitDiff: ['ConversationNotFound', 'ConversationNotRunning', 'SandboxesUnavailable', 'SandboxRuntimeFailed', 'StoreUnavailable'],
  describe: ['ConversationNotFound', 'StoreUnavailable'],
  repositorySkills: ['StoreUnavailable'],
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
 * repository. Everything goes through the runtime port as argv, inside the conversation's own
 * sandbox; the one shell script (the HEAD side of a diff) is fixed, with the user's path as its
 * argument, never in a shell line. At most 1 MiB of any file reaches the server.
 */
export interface WorkspaceService {
  /**
   * The entries of a directory (relative to the working directory; default itself), directories
   * with a trailing `/`. Entries of a directory inside the working directory are relative to it
   * (`src/app.ts`), of one outside it absolute (`/usr/bin/`, and `/bin/` for `/`).
   */
  listFiles(userId: string, conversationId: string, path: string | null): ResultAsync<string[], WorkspaceServiceError<'listFiles'>>;
  /**
   * A file's text (invalid UTF-8 replaced): at most its first MiB is read, and a longer file's
   * text ends with a note saying so and how large it is; binary content (a NUL byte in its first
   * 8,000 bytes, git's test) is a one-line note instead. Links are followed in the sandbox; a
   * directory is WorkspacePathIsDirectory.
   */
  readFile(userId: string, conversationId: string, path: string): ResultAsync<string, WorkspaceServiceError<'readFile'>>;
  /**
   * What changed in the git repository of the working directory (or of `directory`, absolute or
   * relative to it); empty when it is not in one. Paths are relative to the repository's root.
   */
  gitChanges(userId: string, conversationId: string, directory?: string | null): ResultAsync<GitChange[], WorkspaceServiceError<'gitChanges'>>;
  /**
   * A file as committed (HEAD) and as it is now; '' for a side that does not exist (or is a
   * directory). Each side is shown as `readFile` shows a file: its first MiB, with a note when
   * there is more, or a note for binary content.
   */
  gitDiff(userId: string, conversationId: string, path: string): ResultAsync<{ original: string; modified: string }, WorkspaceServiceError<'gitDiff'>>;
  describe(userId: string, conversationId: string): ResultAsync<WorkspaceDescription, WorkspaceServiceError<'describe'>>;
  /**
   * The guidance files of every repository the user's conversations prepared, one per
   * (repository, name), the newest conversation's; sorted by repository, then name. Read from
   * the stored conversations only (no sandbox is asked), a page at a time.
   */
  repositorySkills(userId: string): ResultAsync<RepositorySkill[], WorkspaceServiceError<'repositorySkills'>>;
}

/** A guidance file of a repository, as a list of what agents are given. */
export interface RepositorySkill {
  /** The repository (`owner/name`). */
  repository: string;
  name: string;
  /** repo: always-on instructions; knowledge: loaded when a message says one of its triggers. */
  type: 'repo' | 'knowledge';
  triggers: string[];
}

export interface WorkspaceServiceDeps {
  conversations: ConversationStore;
  sandboxes: SandboxService;
  runtime: SandboxRuntime;
}

/** The longest path a file can have (Linux's PATH_MAX, as resolveSandboxPath takes). */
const MAX_PATH_LENGTH = 4096;
/** The most of a file a panel shows (and so the most the server reads of it). */
const MAX_SHOWN_BYTES = 1024 * 1024;
/** How much of a file's start is searched for a NUL byte to tell binary content (as git does). */
const BINARY_PROBE_BYTES = 8000;
/**
 * Prints the size of the blob `$2` (`HEAD:<path>`) of the repository in `$1`, a newline, and at
 * most `$3` bytes of it; fails when it is not a blob (no such file in HEAD, or a directory).
 * `head` cuts the blob in the sandbox, so a file of gigabytes costs the server its first MiB,
 * not a stream of gigabytes to throw away. The script is fixed and the path an argument: the
 * shell parses nothing a user sent.
 */
const COMMITTED_BLOB_SCRIPT = 'set -e; [ "$(git -C "$1" cat-file -t "$2")" = blob ]; git -C "$1" cat-file -s "$2"; git -C "$1" cat-file blob "$2" | head -c "$3"';

const bySourceThenName = (a: RepositorySkill, b: RepositorySkill) =>
  a.repository === b.repository ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.repository < b.repository ? -1 : 1;

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

  const readShown = (sandboxId: string, path: string) => runtime.readFile(sandboxId, path, { maxBytes: MAX_SHOWN_BYTES }).map(showFile);

  /** The HEAD side of a diff, as a panel shows it; '' when HEAD has no file there. */
  const committed = (sandboxId: string, dir: string, relative: string) =>
    runtime
      .exec(sandboxId, {
        command: ['sh', '-c', COMMITTED_BLOB_SCRIPT, 'sh', dir, `HEAD:${relative}`, String(MAX_SHOWN_BYTES)],
        timeoutMs: 30_000,
        // The script cuts the blob in the sandbox; this holds even a sandbox whose `head` does not.
        maxOutputBytes: MAX_SHOWN_BYTES + 32,
      })
      .mapErr(runtimeFailure(sandboxId, 'read the repository of'))
      .map((result) => {
        const newline = result.stdout.indexOf('\n');
        const size = Number(result.stdout.slice(0, newline));
        return result.exit_code === 0 && newline > 0 && Number.isSafeInteger(size) ? showOutput(result.stdout.slice(newline + 1), size) : '';
      });

  return {
    listFiles: (userId, id, path) =>
      running(userId, id).andThen(({ box, dir }) => {
        const target = resolveSandboxPath(dir, path ?? '.') ?? dir;
        const prefix = entryPrefix(dir, target);
        return runtime
          .listDirectory(box.id, target)
          .map((entries) => entries.map((e) => (e.type === 'directory' ? `${prefix}${e.name}/` : `${prefix}${e.name}`)))
          .orElse((e) => (e.type === 'not_found' ? okAsync<string[], never>([]) : errAsync(runtimeFailure(box.id, 'list files in')(e))));
      }),

    readFile: (userId, id, path) =>
      running(userId, id).andThen(({ record, box, dir }) =>
        readShown(box.id, resolveSandboxPath(dir, path) ?? path).mapErr((e): WorkspaceServiceError<'readFile'> =>
          e.type === 'not_found'
            ? { type: 'WorkspaceFileNotFound', conversationId: record.id, path }
            : e.type === 'is_directory'
              ? { type: 'WorkspacePathIsDirectory', conversationId: record.id, path }
              : runtimeFailure(box.id, 'read a file of')(e),
        ),
      ),

    gitChanges: (userId, id, directory) =>
      running(userId, id).andThen(({ box, dir }) =>
        git(box.id, directory ? (resolveSandboxPath(dir, directory) ?? dir) : dir, ['status', '--porcelain=v1', '-uall', '-z']).map((result) => (result.exit_code === 0 ? parseStatus(result.stdout) : [])),
      ),

    gitDiff: (userId, id, path) =>
      running(userId, id).andThen(({ box, dir }) => {
        const relative = path.startsWith(`${dir}/`) ? path.slice(dir.length + 1) : path.replace(/^\/+/, '');
        const target = resolveSandboxPath(dir, relative);
        // No path (the working directory itself), or one longer than any file's (PATH_MAX): no file, so both sides are empty.
        if (target === null || target.length > MAX_PATH_LENGTH) return okAsync({ original: '', modified: '' });
        return ResultAsync.combine([
          committed(box.id, dir, relative),
          readShown(box.id, target).orElse((e) =>
            e.type === 'not_found' || e.type === 'is_directory' ? okAsync<string, never>('') : errAsync(runtimeFailure(box.id, 'read a file of')(e)),
          ),
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

    repositorySkills: (userId) => {
      const skills = new Map<string, RepositorySkill>();
      const add = (skill: RepositorySkill) => {
        const key = `${skill.repository}\u0000${skill.name}`;
        if (!skills.has(key)) skills.set(key, skill);
      };
      const from = (after: PageRequest['after']): ResultAsync<void, WorkspaceServiceError<'repositorySkills'>> =>
        conversations.search(userId, { include_sub_conversations: true }, { limit: 100, after }).andThen((page) => {
          for (const record of page.items) {
            const repository = record.selected_repository;
            const guidance = record.workspace?.guidance;
            if (!repository || !guidance) continue;
            for (const f of guidance.instructions) add({ repository, name: f.path, type: 'repo', triggers: [] });
            for (const f of guidance.knowledge) add({ repository, name: f.name, type: 'knowledge', triggers: f.triggers });
          }
          const next = page.next_page_id === null ? null : decodeCursor(page.next_page_id);
          return next ? from(next) : okAsync(undefined);
        });
      return from(null).map(() => [...skills.values()].sort(bySourceThenName));
    },
  };
}

/**
 * What an entry of `target` is named by in a listing of the working directory `dir`: relative to
 * it for what lies inside it, absolute otherwise (a plain join made `//bin` of `/`).
 */
function entryPrefix(dir: string, target: string): string {
  if (target === dir) return '';
  const inside = dir === '/' ? '/' : `${dir}/`;
  if (target.startsWith(inside)) return `${target.slice(inside.length)}/`;
  return target === '/' ? '/' : `${target}/`;
}

/** A file's first bytes as a panel shows them (see WorkspaceService.readFile). */
function showFile(content: FileContent): string {
  if (content.bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) return binaryNote(content.size);
  // `stream: true` keeps back a character the cut split, rather than showing U+FFFD for it.
  const text = new TextDecoder('utf-8', { fatal: false }).decode(content.bytes, { stream: content.truncated });
  return content.truncated ? `${text}${clippedNote(content.bytes.length, content.size)}` : text;
}

/** The first bytes of a file of `size` bytes, as exec returned them (at most MAX_SHOWN_BYTES, perhaps with the runtime's cut note), as a panel shows them. */
function showOutput(output: string, size: number): string {
  const { text, droppedBytes } = splitClippedOutput(output);
  if (text.slice(0, BINARY_PROBE_BYTES).includes('\0')) return binaryNote(size);
  if (droppedBytes === 0 && size <= MAX_SHOWN_BYTES) return text;
  // A character the cut split was decoded as U+FFFD: left out, as showFile leaves it out.
  return `${text.replace(/\uFFFD$/, '')}${clippedNote(Math.min(size, MAX_SHOWN_BYTES), size)}`;
}

const binaryNote = (size: number) => `[binary file, ${size} bytes: not shown]`;
const clippedNote = (shown: number, size: number) => `\n[… clipped: the first ${shown} of ${size} bytes are shown]`;

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
