import {
  ConversationServiceErrors,
  WorkspaceServiceErrors,
  type AgentConversationService,
  type ConversationServiceError,
  type DomainErrorOf,
  type WorkspaceDescription,
} from '@acs/core';
import { resultAsync } from '@acs/core/ports';
import { err, ok, okAsync, type Result } from 'neverthrow';
import { z } from 'zod';
import type { RouteContext } from '../route-context.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { trajectoryZip, type ExportLimits } from '../views/trajectory-zip.js';
import { toAppConversationInfo } from '../views/conversations.js';
import { conversationIdParams } from './params.js';
import { AgentServerGitChangeSchema, GitDiffSchema, projectRelative, toAgentServerChange } from './panels.js';

const TAGS = ['app conversations (V1)'];
const filePath = z.string().min(1).max(4096);

/** The git ref OpenHands lets a client compare with: only HEAD here (the working tree against its last commit). */
const refParam = z
  .enum(['HEAD'])
  .optional()
  .meta({ description: 'Only HEAD (the default here): the working tree against its last commit.' });

/** OpenHands' SkillResponse: a guidance file the agent of the conversation was given. */
const SkillResponseSchema = z.object({
  name: z.string(),
  type: z.enum(['repo', 'knowledge', 'agentskills']),
  content: z.string(),
  triggers: z.array(z.string()),
});

/** The skills of a workspace: its repository's always-on instructions (`repo`) and knowledge files. */
const skillsOf = (w: WorkspaceDescription) =>
  w.microagents.map((m) => ({ name: m.name, type: m.type, content: m.content, triggers: m.triggers }));

/**
 * What the OpenHands 1.11 UI reads of a V1 conversation's workspace: a file, the repository's
 * changes and a file's diff (paths as the agent-server lays them out, `/workspace/project/…`),
 * the guidance its agent was given (skills), its hooks (none run here), and the whole
 * conversation as a zip.
 */
export function appConversationWorkspaceRoutes(
  service: AgentConversationService,
  context: RouteContext,
): RouteDefinition[] {
  const { conversations, workspace } = service;
  const inConversation = { params: conversationIdParams, tags: TAGS };
  return [
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/file',
      operationId: 'readAppConversationFile',
      summary: "A file of the conversation's workspace, as text",
      description:
        "The file's text (its first MiB, with a note when there is more). As OpenHands answers, every failure (no such conversation, its sandbox not running, no such file, a directory) is an empty string.",
      query: z.object({
        file_path: filePath.default('/workspace/project/PLAN.md').meta({
          description: 'Absolute, or as the agent-server lays the workspace out (default /workspace/project/PLAN.md).',
        }),
      }),
      success: { status: 200, description: 'The text, or "".', schema: z.string() },
      errors: [],
      handle: ({ userId, params, query }) =>
        workspace
          .describe(userId, params.conversation_id)
          .andThen((w) =>
            workspace.readFile(userId, params.conversation_id, projectRelative(query.file_path, w.repository)),
          )
          .orElse(() => okAsync<string, never>('')),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/git/changes',
      operationId: 'getAppConversationGitChanges',
      summary: "What changed in the conversation's repository (agent-server form)",
      description:
        'From `git status` in `path` (the repository; default its working directory). 409 when its sandbox is not running.',
      query: z.object({ path: filePath.optional(), ref: refParam }),
      success: {
        status: 200,
        description: 'The changes, paths relative to the repository root.',
        schema: z.array(AgentServerGitChangeSchema),
      },
      errors: [...WorkspaceServiceErrors.gitChanges, ...WorkspaceServiceErrors.describe],
      handle: ({ userId, params, query }) =>
        workspace
          .describe(userId, params.conversation_id)
          .andThen((w) =>
            workspace.gitChanges(
              userId,
              params.conversation_id,
              query.path ? projectRelative(query.path, w.repository) : null,
            ),
          )
          .map((changes) => changes.map(toAgentServerChange)),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/git/diff',
      operationId: 'getAppConversationGitDiff',
      summary: 'A changed file, before and after (agent-server form)',
      query: z.object({ path: filePath, ref: refParam }),
      success: {
        status: 200,
        description: 'As committed (original), and as it is now (modified).',
        schema: GitDiffSchema,
      },
      errors: [...WorkspaceServiceErrors.gitDiff, ...WorkspaceServiceErrors.describe],
      handle: ({ userId, params, query }) =>
        workspace
          .describe(userId, params.conversation_id)
          .andThen((w) => workspace.gitDiff(userId, params.conversation_id, projectRelative(query.path, w.repository))),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/skills',
      operationId: 'getAppConversationSkills',
      summary: 'The guidance the agent of the conversation was given',
      description:
        "Its repository's always-on instructions (`repo`: AGENTS.md, .openhands/microagents/repo.md…) and knowledge files with their triggers; empty before the repository is prepared, or without one.",
      success: { status: 200, description: 'The skills.', schema: z.object({ skills: z.array(SkillResponseSchema) }) },
      errors: WorkspaceServiceErrors.describe,
      handle: ({ userId, params }) =>
        workspace.describe(userId, params.conversation_id).map((w) => ({ skills: skillsOf(w) })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/hooks',
      operationId: 'getAppConversationHooks',
      summary: 'The hooks of the conversation (none)',
      description: 'The agent here runs no hooks (.openhands/hooks.json is not read), so the list is always empty.',
      success: { status: 200, description: 'No hooks.', schema: z.object({ hooks: z.array(z.never()) }) },
      errors: ConversationServiceErrors.get,
      handle: ({ userId, params }) =>
        conversations.get(userId, params.conversation_id).map(() => ({ hooks: [] as never[] })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/v1/app-conversations/{conversation_id}/download',
      operationId: 'downloadAppConversation',
      summary: 'The conversation as a zip (its trajectory)',
      description: `As OpenHands exports it: meta.json (the conversation) and event_<index>_<id>.json for each event (OpenHands SDK events, oldest first). Written as it is read, never held whole. A conversation with more than ${context.exportLimits.maxEvents} events is refused (413 EXPORT_TOO_LARGE); past ${context.exportLimits.maxBytes} bytes of events the archive ends with TRUNCATED.txt saying where it was cut.`,
      success: {
        status: 200,
        description: 'The zip archive.',
        contentType: 'application/zip',
        schema: z.string().meta({ format: 'binary' }),
      },
      errors: [...ConversationServiceErrors.get, ...ConversationServiceErrors.searchEvents, 'ExportTooLarge'],
      respond: ({ userId, params }) =>
        resultAsync(download(conversations, context.exportLimits, userId, params.conversation_id)),
    }),
  ];
}

/** The download's body: refused when the log holds more events than an export may (ids are gap-free, so one past the limit's id says so). */
async function download(
  conversations: AgentConversationService['conversations'],
  limits: ExportLimits,
  userId: string,
  conversationId: string,
): Promise<
  Result<
    { headers: Record<string, string>; chunks: ReturnType<typeof trajectoryZip> },
    ConversationServiceError<'get' | 'searchEvents'> | DomainErrorOf<'ExportTooLarge'>
  >
> {
  const overview = await conversations.get(userId, conversationId);
  if (overview.isErr()) return err(overview.error);
  const id = overview.value.record.id;
  const beyond = await conversations.searchEvents(userId, id, { after: limits.maxEvents, kinds: null, limit: 1 });
  if (beyond.isErr()) return err(beyond.error);
  if (beyond.value.items.length > 0)
    return err({ type: 'ExportTooLarge', conversationId: id, limit: limits.maxEvents });
  const dashed = id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
  return ok({
    headers: { 'Content-Disposition': `attachment; filename="conversation_${dashed}.zip"` },
    chunks: trajectoryZip(
      toAppConversationInfo(overview.value),
      (after) => conversations.searchEvents(userId, id, { after, kinds: null, limit: 100 }),
      limits,
    ),
  });
}
