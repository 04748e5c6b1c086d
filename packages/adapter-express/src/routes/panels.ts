import {
  ConversationServiceErrors,
  WorkspaceServiceErrors,
  type AgentConversationService,
  type GitChange,
} from '@acs/core';
import type { Caller } from '../auth/caller.js';
import { z } from 'zod';
import { readWholeLog } from '../realtime/feed.js';
import { V0EventTranslator } from '../realtime/v0-events.js';
import { defineRoute, type RouteDefinition } from '../route.js';
import { conversationIdParams, pathSegment } from './params.js';

const GitChangeSchema = z
  .object({ status: z.enum(['M', 'A', 'D', 'R', 'U']), path: z.string() })
  .meta({ id: 'GitChange' });
export const GitDiffSchema = z.object({ original: z.string(), modified: z.string() }).meta({ id: 'GitDiff' });

/** A change as the agent-server names it (what OpenHands V1 clients read). */
export const AgentServerGitChangeSchema = z.object({
  status: z.enum(['ADDED', 'UPDATED', 'DELETED', 'MOVED']),
  path: z.string(),
});
export const toAgentServerChange = (c: GitChange) => ({
  status: ({ A: 'ADDED', D: 'DELETED', R: 'MOVED', M: 'UPDATED', U: 'UPDATED' } as const)[c.status],
  path: c.path,
});

/**
 * A path as the agent-server lays the workspace out (`/workspace/project[/<repository>]/<file>`),
 * relative to the conversation's working directory (the clone, if any); other paths as given.
 */
export function projectRelative(path: string, repository: string | null): string {
  if (path !== '/workspace/project' && !path.startsWith('/workspace/project/')) return path;
  const underProject = path.slice('/workspace/project'.length).replace(/^\/+/, '');
  const name = repository?.split('/').pop();
  if (name && underProject === name) return '.';
  return name && underProject.startsWith(`${name}/`) ? underProject.slice(name.length + 1) : underProject || '.';
}
const TAGS = ['conversation panels'];
const filePath = z.string().min(1).max(4096);

/** The conversation of the V1 UI's git routes: they name none, and only its own key opens them (`conversationKeyOnly`). */
const keyConversation = (caller: Caller): string => {
  if (!caller.conversationId) throw new Error('the router lets only conversation keys into this route');
  return caller.conversationId;
};

/**
 * What the OpenHands UI shows around the chat, answered from the conversation's sandbox (its
 * files, its repository's changes) or its record. Each accepts the conversation's own key.
 */
export function panelRoutes(service: AgentConversationService): RouteDefinition[] {
  const { conversations, workspace } = service;
  const inConversation = {
    params: conversationIdParams,
    tags: TAGS,
    conversationScope: ({ params }: { params: { conversation_id: string } }) => params.conversation_id,
  };
  return [
    defineRoute({
      method: 'patch',
      path: '/api/conversations/{conversation_id}',
      operationId: 'renameConversation',
      summary: 'Rename a conversation',
      tags: ['conversations (V0)'],
      params: conversationIdParams,
      body: z.strictObject({ title: z.string().trim().min(1).max(200) }),
      success: { status: 200, description: 'Renamed.', schema: z.literal(true) },
      errors: ConversationServiceErrors.rename,
      handle: ({ userId, params, body }) =>
        conversations.rename(userId, params.conversation_id, body.title).map(() => true as const),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/config',
      operationId: 'getConversationConfig',
      summary: 'Which sandbox the conversation runs in',
      success: {
        status: 200,
        description: 'Its ids.',
        schema: z.object({ runtime_id: z.string().nullable(), session_id: z.string() }),
      },
      errors: WorkspaceServiceErrors.describe,
      handle: ({ userId, params }) =>
        workspace
          .describe(userId, params.conversation_id)
          .map((w) => ({ runtime_id: w.sandbox_id, session_id: w.conversation_id })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/list-files',
      operationId: 'listConversationFiles',
      summary: "List a directory of the conversation's workspace",
      description:
        'Paths relative to the working directory (the repository clone, if any); directories end with `/`. 409 when the sandbox is not running.',
      query: z.object({ path: filePath.optional() }),
      success: { status: 200, description: 'The entries.', schema: z.array(z.string()) },
      errors: WorkspaceServiceErrors.listFiles,
      handle: ({ userId, params, query }) => workspace.listFiles(userId, params.conversation_id, query.path ?? null),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/select-file',
      operationId: 'readConversationFile',
      summary: "Read a file of the conversation's workspace",
      query: z.object({ file: filePath }),
      success: { status: 200, description: 'Its text (at most 1 MiB shown).', schema: z.object({ code: z.string() }) },
      errors: WorkspaceServiceErrors.readFile,
      handle: ({ userId, params, query }) =>
        workspace.readFile(userId, params.conversation_id, query.file).map((code) => ({ code })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/git/changes',
      operationId: 'getConversationGitChanges',
      summary: "What changed in the conversation's repository",
      description: 'From `git status`; empty when the working directory is not a git repository.',
      success: { status: 200, description: 'The changes.', schema: z.array(GitChangeSchema) },
      errors: WorkspaceServiceErrors.gitChanges,
      handle: ({ userId, params }) => workspace.gitChanges(userId, params.conversation_id),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/git/diff',
      operationId: 'getConversationGitDiff',
      summary: 'A changed file, before and after',
      query: z.object({ path: filePath }),
      success: { status: 200, description: 'As committed, and as it is now.', schema: GitDiffSchema },
      errors: WorkspaceServiceErrors.gitDiff,
      handle: ({ userId, params, query }) => workspace.gitDiff(userId, params.conversation_id, query.path),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/trajectory',
      operationId: 'getConversationTrajectory',
      summary: 'The whole conversation as V0 events',
      description:
        'What the V0 realtime channel sends, from the first event: a trajectory the UI can download (and `replay_json` can replay).',
      success: {
        status: 200,
        description: 'The events.',
        schema: z.object({ trajectory: z.array(z.record(z.string(), z.unknown())) }),
      },
      errors: ConversationServiceErrors.searchEvents,
      handle: ({ userId, params }) =>
        readWholeLog(service, userId, params.conversation_id).map((events) => {
          const translator = new V0EventTranslator();
          return { trajectory: events.flatMap((e) => translator.translate(e)) };
        }),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/microagents',
      operationId: 'getConversationMicroagents',
      summary: "The repository's guidance the agent was given",
      success: {
        status: 200,
        description: 'Always-on instructions (repo) and knowledge files with their triggers.',
        schema: z.object({
          microagents: z.array(
            z.object({
              name: z.string(),
              type: z.enum(['repo', 'knowledge']),
              content: z.string(),
              triggers: z.array(z.string()),
              inputs: z.array(z.unknown()),
              tools: z.array(z.string()),
            }),
          ),
        }),
      },
      errors: WorkspaceServiceErrors.describe,
      handle: ({ userId, params }) =>
        workspace
          .describe(userId, params.conversation_id)
          .map((w) => ({ microagents: w.microagents.map((m) => ({ ...m, inputs: [], tools: [] })) })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/web-hosts',
      operationId: 'getConversationWebHosts',
      summary: 'Web servers the sandbox exposes (none)',
      description: 'Sandboxes here publish no ports to the browser: always empty.',
      success: { status: 200, description: 'None.', schema: z.object({ hosts: z.record(z.string(), z.int()) }) },
      errors: ConversationServiceErrors.get,
      handle: ({ userId, params }) => conversations.get(userId, params.conversation_id).map(() => ({ hosts: {} })),
    }),
    defineRoute({
      ...inConversation,
      method: 'get',
      path: '/api/conversations/{conversation_id}/vscode-url',
      operationId: 'getConversationVsCodeUrl',
      summary: 'The VS Code URL of the sandbox (none)',
      success: { status: 200, description: 'No VS Code here.', schema: z.object({ vscode_url: z.null() }) },
      errors: ConversationServiceErrors.get,
      handle: ({ userId, params }) =>
        conversations.get(userId, params.conversation_id).map(() => ({ vscode_url: null })),
    }),
    defineRoute({
      method: 'get',
      path: '/api/git/changes/{path}',
      operationId: 'getGitChangesV1',
      summary: "What changed in the repository of the key's conversation (agent-server form)",
      description:
        "With the conversation's own key. Statuses as the agent-server names them (ADDED, UPDATED, DELETED, MOVED).",
      tags: TAGS,
      params: z.object({ path: pathSegment(4096) }),
      success: { status: 200, description: 'The changes.', schema: z.array(AgentServerGitChangeSchema) },
      errors: WorkspaceServiceErrors.gitChanges,
      conversationKeyOnly: true,
      conversationScope: ({ caller }) => caller.conversationId,
      handle: ({ userId, caller }) =>
        workspace.gitChanges(userId, keyConversation(caller)).map((changes) => changes.map(toAgentServerChange)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/git/diff/{path}',
      operationId: 'getGitDiffV1',
      summary: "A changed file of the key's conversation, before and after (agent-server form)",
      tags: TAGS,
      params: z.object({ path: pathSegment(4096) }),
      success: { status: 200, description: 'As committed, and as it is now.', schema: GitDiffSchema },
      errors: [...WorkspaceServiceErrors.gitDiff, ...WorkspaceServiceErrors.describe],
      conversationKeyOnly: true,
      conversationScope: ({ caller }) => caller.conversationId,
      handle: ({ userId, caller, params }) => {
        const id = keyConversation(caller);
        // The UI names files as the agent-server lays them out: /workspace/project[/<repository>]/<file>.
        return workspace
          .describe(userId, id)
          .andThen((w) => workspace.gitDiff(userId, id, projectRelative(params.path, w.repository)));
      },
    }),
  ];
}
