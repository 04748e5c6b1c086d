import { err, ok, type Result, type ResultAsync } from 'neverthrow';
import type { ConversationRecord } from '../conversation/schema.js';
import type { ConversationStore } from '../conversation/store.js';
import type { DomainErrorOf, DomainErrorType, ErrorsOf } from '../errors.js';
import { normalizeId } from '../ids.js';
import { resultAsync } from '../result.js';
import type { StoreFailure } from '../store-failure.js';
import {
  resolveSandboxPath,
  runtimeFailure,
  splitClippedOutput,
  type FileContent,
  type SandboxRuntime,
} from '../sandbox/runtime.js';
import type { SandboxRecord } from '../sandbox/schema.js';
import type { SandboxService } from '../sandbox/service.js';
import { decodeCursor, type PageRequest } from '../pagination.js';

/** What each workspace operation can fail with (the compiler holds the implementation to it). */
export const WorkspaceServiceErrors = {
  listFiles: [
    'ConversationNotFound',
    'ConversationNotRunning',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  readFile: [
    'ConversationNotFound',
    'ConversationNotRunning',
    'WorkspaceFileNotFound',
    'WorkspacePathIsDirectory',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  gitChanges: [
    'ConversationNotFound',
    'ConversationNotRunning',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  gitDiff: [
    'ConversationNotFound',
    'ConversationNotRunning',
    'SandboxesUnavailable',
    'SandboxRuntimeFailed',
    'StoreUnavailable',
  ],
  describe: ['ConversationNotFound', 'StoreUnavailable'],
  repositorySkills: ['StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

/** The error union of a workspace operation. */
export type WorkspaceServiceError<K extends keyof typeof WorkspaceServiceErrors> = ErrorsOf<
  (typeof WorkspaceServiceErrors)[K]
>;

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
  listFiles(
    userId: string,
    conversationId: string,
    path: string | null,
  ): ResultAsync<string[], WorkspaceServiceError<'listFiles'>>;
  /**
   * A file's text (invalid UTF-8 replaced): at most its first MiB is read, and a longer file's
   * text ends with a note saying so and how large it is; binary content (a NUL byte in its first
   * 8,000 bytes, git's test) is a one-line note instead. Links are followed in the sandbox; a
   * directory is WorkspacePathIsDirectory.
   */
  readFile(
    userId: string,
    conversationId: string,
    path: string,
  ): ResultAsync<string, WorkspaceServiceError<'readFile'>>;
  /**
   * What changed in the git repository of the working directory (or of `directory`, absolute or
   * relative to it); empty when it is not in one. Paths are relative to the repository's root.
   */
  gitChanges(
    userId: string,
    conversationId: string,
    directory?: string | null,
  ): ResultAsync<GitChange[], WorkspaceServiceError<'gitChanges'>>;
  /**
   * A file as committed (HEAD) and as it is now; '' for a side that does not exist (or is a
   * directory). Each side is shown as `readFile` shows a file: its first MiB, with a note when
   * there is more, or a note for binary content.
   */
  gitDiff(
    userId: string,
    conversationId: string,
    path: string,
  ): ResultAsync<{ original: string; modified: string }, WorkspaceServiceError<'gitDiff'>>;
  describe(
    userId: string,
    conversationId: string,
  ): ResultAsync<WorkspaceDescription, WorkspaceServiceError<'describe'>>;
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
const COMMITTED_BLOB_SCRIPT =
  'set -e; [ "$(git -C "$1" cat-file -t "$2")" = blob ]; git -C "$1" cat-file -s "$2"; git -C "$1" cat-file blob "$2" | head -c "$3"';

const bySourceThenName = (a: RepositorySkill, b: RepositorySkill) =>
  a.repository === b.repository
    ? a.name < b.name
      ? -1
      : a.name > b.name
        ? 1
        : 0
    : a.repository < b.repository
      ? -1
      : 1;

export function createWorkspaceService(deps: WorkspaceServiceDeps): WorkspaceService {
  return {
    listFiles: (userId, id, path) => resultAsync(listFiles(deps, userId, id, path)),
    readFile: (userId, id, path) => resultAsync(readFile(deps, userId, id, path)),
    gitChanges: (userId, id, directory) => resultAsync(gitChanges(deps, userId, id, directory)),
    gitDiff: (userId, id, path) => resultAsync(gitDiff(deps, userId, id, path)),
    describe: (userId, id) => resultAsync(describe(deps, userId, id)),
    repositorySkills: (userId) => resultAsync(repositorySkills(deps, userId)),
  };
}

async function recordOf(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
): Promise<Result<ConversationRecord, DomainErrorOf<'ConversationNotFound' | 'StoreUnavailable'>>> {
  const record = await deps.conversations.get(userId, normalizeId(id));
  if (record.isErr()) return err(record.error);
  if (!record.value) return err({ type: 'ConversationNotFound', conversationId: id });
  return ok(record.value);
}

const directoryOf = (record: ConversationRecord, box: SandboxRecord | null): string | null =>
  record.workspace?.repository_dir ?? box?.spec.working_dir ?? null;

/** The conversation's sandbox, refreshed from the runtime; null when it has none. */
async function sandboxOf(
  deps: WorkspaceServiceDeps,
  userId: string,
  record: ConversationRecord,
): Promise<Result<SandboxRecord | null, StoreFailure>> {
  const boxes = await deps.sandboxes.liveRecords(userId, record.sandbox_id ? [record.sandbox_id] : []);
  if (boxes.isErr()) return err(boxes.error);
  return ok(record.sandbox_id ? (boxes.value.get(record.sandbox_id) ?? null) : null);
}

/** The conversation with its sandbox, which must be running, and the directory the panels show. */
async function running(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
): Promise<
  Result<
    { record: ConversationRecord; box: SandboxRecord; dir: string },
    DomainErrorOf<'ConversationNotFound' | 'ConversationNotRunning' | 'StoreUnavailable'>
  >
> {
  const record = await recordOf(deps, userId, id);
  if (record.isErr()) return err(record.error);
  const box = await sandboxOf(deps, userId, record.value);
  if (box.isErr()) return err(box.error);
  if (!box.value || box.value.status !== 'RUNNING') {
    return err({
      type: 'ConversationNotRunning',
      conversationId: record.value.id,
      status: box.value ? `${record.value.status} (sandbox ${box.value.status})` : record.value.status,
    });
  }
  return ok({
    record: record.value,
    box: box.value,
    dir: directoryOf(record.value, box.value) ?? box.value.spec.working_dir,
  });
}

async function listFiles(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
  path: string | null,
): Promise<Result<string[], WorkspaceServiceError<'listFiles'>>> {
  const found = await running(deps, userId, id);
  if (found.isErr()) return err(found.error);
  const { box, dir } = found.value;
  const target = resolveSandboxPath(dir, path ?? '.') ?? dir;
  const prefix = entryPrefix(dir, target);
  const entries = await deps.runtime.listDirectory(box.id, target);
  if (entries.isErr())
    return entries.error.type === 'not_found' ? ok([]) : err(runtimeFailure(box.id, 'list files in')(entries.error));
  return ok(entries.value.map((e) => (e.type === 'directory' ? `${prefix}${e.name}/` : `${prefix}${e.name}`)));
}

async function readFile(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
  path: string,
): Promise<Result<string, WorkspaceServiceError<'readFile'>>> {
  const found = await running(deps, userId, id);
  if (found.isErr()) return err(found.error);
  const { record, box, dir } = found.value;
  const content = await deps.runtime.readFile(box.id, resolveSandboxPath(dir, path) ?? path, {
    maxBytes: MAX_SHOWN_BYTES,
  });
  if (content.isOk()) return ok(showFile(content.value));
  if (content.error.type === 'not_found')
    return err({ type: 'WorkspaceFileNotFound', conversationId: record.id, path });
  if (content.error.type === 'is_directory')
    return err({ type: 'WorkspacePathIsDirectory', conversationId: record.id, path });
  return err(runtimeFailure(box.id, 'read a file of')(content.error));
}

async function gitChanges(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
  directory: string | null | undefined,
): Promise<Result<GitChange[], WorkspaceServiceError<'gitChanges'>>> {
  const found = await running(deps, userId, id);
  if (found.isErr()) return err(found.error);
  const { box, dir } = found.value;
  const where = directory ? (resolveSandboxPath(dir, directory) ?? dir) : dir;
  const result = await deps.runtime.exec(box.id, {
    command: ['git', '-C', where, 'status', '--porcelain=v1', '-uall', '-z'],
    timeoutMs: 30_000,
  });
  if (result.isErr()) return err(runtimeFailure(box.id, 'read the repository of')(result.error));
  return ok(result.value.exit_code === 0 ? parseStatus(result.value.stdout) : []);
}

async function gitDiff(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
  path: string,
): Promise<Result<{ original: string; modified: string }, WorkspaceServiceError<'gitDiff'>>> {
  const found = await running(deps, userId, id);
  if (found.isErr()) return err(found.error);
  const { box, dir } = found.value;
  const relative = path.startsWith(`${dir}/`) ? path.slice(dir.length + 1) : path.replace(/^\/+/, '');
  const target = resolveSandboxPath(dir, relative);
  // No path (the working directory itself), or one longer than any file's (PATH_MAX): no file, so both sides are empty.
  if (target === null || target.length > MAX_PATH_LENGTH) return ok({ original: '', modified: '' });
  // Both sides at once.
  const [original, modified] = await Promise.all([
    committed(deps, box.id, dir, relative),
    deps.runtime.readFile(box.id, target, { maxBytes: MAX_SHOWN_BYTES }),
  ]);
  if (original.isErr()) return err(original.error);
  if (modified.isOk()) return ok({ original: original.value, modified: showFile(modified.value) });
  if (modified.error.type === 'not_found' || modified.error.type === 'is_directory')
    return ok({ original: original.value, modified: '' });
  return err(runtimeFailure(box.id, 'read a file of')(modified.error));
}

/** The HEAD side of a diff, as a panel shows it; '' when HEAD has no file there. */
async function committed(
  deps: WorkspaceServiceDeps,
  sandboxId: string,
  dir: string,
  relative: string,
): Promise<Result<string, DomainErrorOf<'SandboxesUnavailable' | 'SandboxRuntimeFailed'>>> {
  const result = await deps.runtime.exec(sandboxId, {
    command: ['sh', '-c', COMMITTED_BLOB_SCRIPT, 'sh', dir, `HEAD:${relative}`, String(MAX_SHOWN_BYTES)],
    timeoutMs: 30_000,
    // The script cuts the blob in the sandbox; this holds even a sandbox whose `head` does not.
    maxOutputBytes: MAX_SHOWN_BYTES + 32,
  });
  if (result.isErr()) return err(runtimeFailure(sandboxId, 'read the repository of')(result.error));
  const newline = result.value.stdout.indexOf('\n');
  const size = Number(result.value.stdout.slice(0, newline));
  return ok(
    result.value.exit_code === 0 && newline > 0 && Number.isSafeInteger(size)
      ? showOutput(result.value.stdout.slice(newline + 1), size)
      : '',
  );
}

async function describe(
  deps: WorkspaceServiceDeps,
  userId: string,
  id: string,
): Promise<Result<WorkspaceDescription, WorkspaceServiceError<'describe'>>> {
  const record = await recordOf(deps, userId, id);
  if (record.isErr()) return err(record.error);
  const box = await sandboxOf(deps, userId, record.value);
  if (box.isErr()) return err(box.error);
  const guidance = record.value.workspace?.guidance;
  return ok({
    conversation_id: record.value.id,
    sandbox_id: record.value.sandbox_id,
    repository: record.value.selected_repository,
    directory: directoryOf(record.value, box.value),
    microagents: [
      ...(guidance?.instructions ?? []).map((f) => ({
        name: f.path,
        type: 'repo' as const,
        content: f.content,
        triggers: [],
      })),
      ...(guidance?.knowledge ?? []).map((f) => ({
        name: f.name,
        type: 'knowledge' as const,
        content: f.content,
        triggers: f.triggers,
      })),
    ],
  });
}

/** The skills of every repository the user's conversations prepared, each once (read a page of conversations at a time). */
async function repositorySkills(
  deps: WorkspaceServiceDeps,
  userId: string,
): Promise<Result<RepositorySkill[], WorkspaceServiceError<'repositorySkills'>>> {
  const skills = new Map<string, RepositorySkill>();
  const add = (skill: RepositorySkill) => {
    const key = `${skill.repository}\u0000${skill.name}`;
    if (!skills.has(key)) skills.set(key, skill);
  };
  for (let after: PageRequest['after'] = null; ;) {
    const page = await deps.conversations.search(userId, { include_sub_conversations: true }, { limit: 100, after });
    if (page.isErr()) return err(page.error);
    for (const record of page.value.items) {
      const repository = record.selected_repository;
      const guidance = record.workspace?.guidance;
      if (!repository || !guidance) continue;
      for (const f of guidance.instructions) add({ repository, name: f.path, type: 'repo', triggers: [] });
      for (const f of guidance.knowledge) add({ repository, name: f.name, type: 'knowledge', triggers: f.triggers });
    }
    const next = page.value.next_page_id === null ? null : decodeCursor(page.value.next_page_id);
    if (!next) break;
    after = next;
  }
  return ok([...skills.values()].sort(bySourceThenName));
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
    const status: GitChange['status'] =
      xy.includes('U') || xy === 'AA' || xy === 'DD'
        ? 'U'
        : xy.includes('R')
          ? 'R'
          : xy.includes('D')
            ? 'D'
            : xy === '??' || xy.includes('A')
              ? 'A'
              : 'M';
    if (status === 'R') i++;
    changes.push({ status, path });
  }
  return changes;
}
