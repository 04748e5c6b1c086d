import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { okAsync } from 'neverthrow';
import { z } from 'zod';
import {
  ApiKeyServiceErrors,
  ConversationServiceErrors,
  DeviceAuthorizationErrors,
  DEVICE_TOKEN_REFUSALS,
  DOMAIN_ERROR_CODES,
  GitServiceErrors,
  explainDomainError,
  SandboxServiceErrors,
  SandboxSpecServiceErrors,
  SettingsServiceErrors,
  WorkspaceServiceErrors,
  type AgentConversationService,
  type DomainErrorOf,
  type DomainErrorType,
} from '@acs/core';
import {
  buildRoutes,
  defineRoute,
  explainHttpError,
  HTTP_ERROR_CODES,
  statusOf,
  type RouteDefinition,
} from '@acs/adapter-express';
import {
  errorCode,
  fetchOpenApi,
  obj,
  startHarness,
  storeSettings,
  type Harness,
  type OpenApiDoc,
  type OpenApiOperation,
} from './harness.js';

/**
 * What each route may fail with, written out here from the service operation it calls (and
 * what its handler adds), so a route wired to the wrong list is caught.
 */
const DECLARED: Record<string, readonly DomainErrorType[]> = {
  alive: [],
  health: [],
  ready: [],
  serverInfo: [],
  getWebClientConfig: [],
  searchModels: [],
  searchProviders: [],
  loadSettingsV1: SettingsServiceErrors.loadWithProfiles,
  storeSettingsV1: SettingsServiceErrors.change,
  getAgentSettingsSchema: [],
  getConversationSettingsSchema: [],
  listLlmProfiles: SettingsServiceErrors.listProfiles,
  getLlmProfile: SettingsServiceErrors.getProfile,
  saveLlmProfile: SettingsServiceErrors.saveProfile,
  deleteLlmProfile: SettingsServiceErrors.deleteProfile,
  activateLlmProfile: SettingsServiceErrors.activateProfile,
  renameLlmProfile: SettingsServiceErrors.renameProfile,
  switchConversationProfile: ConversationServiceErrors.switchProfile,
  searchSecrets: SettingsServiceErrors.listSecrets,
  putSecret: SettingsServiceErrors.putSecret,
  updateSecretV1: SettingsServiceErrors.updateSecret,
  deleteSecretV1: SettingsServiceErrors.deleteSecret,
  setGitProviderTokensV1: SettingsServiceErrors.setProviderTokens,
  unsetGitProviderTokensV1: SettingsServiceErrors.unsetProviderTokens,
  listSandboxSecrets: ['StoreUnavailable'],
  getSandboxSecret: ['SecretNotFound', 'StoreUnavailable'],
  signOut: [],
  getUiConfig: [],
  listModels: [],
  listAgents: [],
  listSecurityAnalyzers: [],
  listSecrets: SettingsServiceErrors.listSecrets,
  createSecret: SettingsServiceErrors.createSecret,
  updateSecret: SettingsServiceErrors.updateSecret,
  deleteSecret: SettingsServiceErrors.deleteSecret,
  setGitProviderTokens: SettingsServiceErrors.setProviderTokens,
  unsetGitProviderTokens: SettingsServiceErrors.unsetProviderTokens,
  pauseAgent: ConversationServiceErrors.pauseAgent,
  runAgent: ConversationServiceErrors.runAgent,
  countEvents: ConversationServiceErrors.searchEvents,
  getVsCodeUrl: [],
  renameConversation: ConversationServiceErrors.rename,
  getConversationConfig: WorkspaceServiceErrors.describe,
  listConversationFiles: WorkspaceServiceErrors.listFiles,
  readConversationFile: WorkspaceServiceErrors.readFile,
  getConversationGitChanges: WorkspaceServiceErrors.gitChanges,
  getConversationGitDiff: WorkspaceServiceErrors.gitDiff,
  getConversationTrajectory: ConversationServiceErrors.searchEvents,
  getConversationMicroagents: WorkspaceServiceErrors.describe,
  getConversationWebHosts: ConversationServiceErrors.get,
  getConversationVsCodeUrl: ConversationServiceErrors.get,
  getGitChangesV1: WorkspaceServiceErrors.gitChanges,
  getGitDiffV1: [...WorkspaceServiceErrors.gitDiff, ...WorkspaceServiceErrors.describe],
  storeSettings: SettingsServiceErrors.store,
  loadSettings: SettingsServiceErrors.load,
  newConversation: ConversationServiceErrors.create,
  listConversations: ConversationServiceErrors.search,
  getConversation: ConversationServiceErrors.get,
  deleteConversation: ConversationServiceErrors.delete,
  startConversation: ConversationServiceErrors.start,
  stopConversation: ConversationServiceErrors.stop,
  sendConversationMessage: ConversationServiceErrors.sendMessage,
  respondToConfirmationV0: ConversationServiceErrors.respondToConfirmation,
  startAppConversation: ConversationServiceErrors.startApp,
  streamStartAppConversation: [...ConversationServiceErrors.startApp, ...ConversationServiceErrors.followStartTask],
  searchAppConversations: ConversationServiceErrors.search,
  countAppConversations: ConversationServiceErrors.count,
  searchStartTasks: ConversationServiceErrors.searchStartTasks,
  countStartTasks: ConversationServiceErrors.countStartTasks,
  getStartTasks: ['InvalidIds', ...ConversationServiceErrors.getStartTasks],
  listAppConversations: ['InvalidIds', ...ConversationServiceErrors.getMany, ...ConversationServiceErrors.search],
  searchGitInstallations: GitServiceErrors.searchInstallations,
  searchGitRepositories: GitServiceErrors.searchRepositories,
  searchGitBranches: GitServiceErrors.searchBranches,
  searchGitSuggestedTasks: GitServiceErrors.searchSuggestedTasks,
  getUserGitInfo: GitServiceErrors.user,
  getAppConversation: ConversationServiceErrors.get,
  updateAppConversation: ConversationServiceErrors.update,
  rotateAppConversationKey: [...ConversationServiceErrors.rotateKey, ...ConversationServiceErrors.get],
  deleteAppConversation: ConversationServiceErrors.delete,
  sendAppConversationMessage: [...ConversationServiceErrors.sendMessage, ...ConversationServiceErrors.get],
  readAppConversationFile: [],
  getAppConversationGitChanges: [...WorkspaceServiceErrors.gitChanges, ...WorkspaceServiceErrors.describe],
  getAppConversationGitDiff: [...WorkspaceServiceErrors.gitDiff, ...WorkspaceServiceErrors.describe],
  getAppConversationSkills: WorkspaceServiceErrors.describe,
  getAppConversationHooks: ConversationServiceErrors.get,
  downloadAppConversation: [
    ...ConversationServiceErrors.get,
    ...ConversationServiceErrors.searchEvents,
    'ExportTooLarge',
  ],
  searchSdkEvents: ConversationServiceErrors.searchEvents,
  countSdkEvents: ConversationServiceErrors.searchEvents,
  getSdkEvents: ['InvalidIds', ...ConversationServiceErrors.searchEvents],
  queuePendingMessage: ConversationServiceErrors.queueMessage,
  searchSkills: WorkspaceServiceErrors.repositorySkills,
  respondToConfirmation: ConversationServiceErrors.respondToConfirmation,
  searchConversationEvents: ConversationServiceErrors.searchEvents,
  streamConversationEvents: ConversationServiceErrors.subscribeEvents,
  searchSandboxes: SandboxServiceErrors.search,
  getSandboxes: SandboxServiceErrors.getMany,
  startSandbox: SandboxServiceErrors.start,
  getSandbox: SandboxServiceErrors.get,
  deleteSandbox: SandboxServiceErrors.delete,
  deleteSandboxByQuery: SandboxServiceErrors.delete,
  pauseSandbox: SandboxServiceErrors.pause,
  resumeSandbox: SandboxServiceErrors.resume,
  searchSandboxSpecs: SandboxSpecServiceErrors.search,
  getSandboxSpecs: SandboxSpecServiceErrors.getMany,
  listApiKeys: ApiKeyServiceErrors.list,
  createApiKey: ApiKeyServiceErrors.create,
  revokeApiKey: ApiKeyServiceErrors.revoke,
  getLlmApiKey: ['StoreUnavailable'],
  getCurrentUser: ['SecretsNotExposed', 'StoreUnavailable'],
  startDeviceAuthorization: DeviceAuthorizationErrors.start,
  pollDeviceToken: DeviceAuthorizationErrors.poll,
  getDeviceAuthorization: DeviceAuthorizationErrors.describe,
  approveDeviceAuthorization: DeviceAuthorizationErrors.approve,
  denyDeviceAuthorization: DeviceAuthorizationErrors.deny,
};

/** The status of every domain error type, written out (a change to statusOf must show up here). */
const STATUS: Record<DomainErrorType, number> = {
  ValidationFailed: 422,
  SettingsNotFound: 404,
  SettingsRequired: 400,
  ConversationNotFound: 404,
  ConversationIdTaken: 409,
  IllegalConversationTransition: 409,
  ConfirmationNotPending: 409,
  StartTaskNotFound: 404,
  SandboxNotFound: 404,
  SandboxSpecNotFound: 404,
  IllegalSandboxTransition: 409,
  SandboxRuntimeFailed: 502,
  SandboxesUnavailable: 503,
  SandboxCapReached: 429,
  SecretNotFound: 404,
  ConversationNotRunning: 409,
  SecretNameTaken: 409,
  ProfileNotFound: 404,
  ProfileNameTaken: 409,
  ProfileLimitReached: 409,
  WorkspaceFileNotFound: 404,
  WorkspacePathIsDirectory: 400,
  ApiKeyNotFound: 404,
  ApiKeyLimitReached: 409,
  DeviceTokenRefused: 400,
  DeviceAuthorizationsFull: 503,
  DeviceAuthorizationsFromClientFull: 429,
  UserCodeNotFound: 404,
  UserCodeAttemptsExceeded: 429,
  DeviceAuthorizationAnswered: 409,
  GitProviderNotConnected: 403,
  GitRequestRefused: 400,
  GitProviderRefused: 403,
  GitResourceNotFound: 404,
  GitProviderRateLimited: 429,
  GitProviderUnavailable: 502,
  InvalidIds: 400,
  TooManyPendingMessages: 429,
  ExportTooLarge: 413,
  HostNotAllowed: 400,
  SandboxImageNotAllowed: 400,
  SecretsNotExposed: 403,
  StoreUnavailable: 503,
};

/** Path parameters that name a record: a value no record can have is that record's 404. */
const RECORD_PATH_PARAMS: Record<string, DomainErrorType> = {
  conversation_id: 'ConversationNotFound',
  sandbox_id: 'SandboxNotFound',
  key_id: 'ApiKeyNotFound',
};

const shapeOf = (schema: z.ZodType): string[] => (schema instanceof z.ZodObject ? Object.keys(schema.shape) : []);

/**
 * The error statuses a route must document, with the codes each may carry: its declared
 * domain errors, and what the adapter answers by itself (401 without a key; 403 from the CSRF
 * guard on what changes state; a body's 400, 413, 415 and 422; 422 for parameters; a path's 400
 * for bad percent-encoding and 404 for a record id nothing can have; 503 for a stream while
 * shutting down and 429 past the user's live connections; 431 from the HTTP server; 500).
 */
function expectedErrors(route: RouteDefinition): Map<number, Set<string>> {
  const expected = new Map<number, Set<string>>();
  const add = (status: number, ...codes: string[]) =>
    expected.set(status, new Set([...(expected.get(status) ?? []), ...codes]));
  for (const type of DECLARED[route.operationId] ?? []) add(STATUS[type], ...DOMAIN_ERROR_CODES[type]);
  add(500, 'INTERNAL_ERROR');
  if (route.authenticated) add(401, 'UNAUTHENTICATED');
  if (route.sandboxKeyOnly) {
    add(401, 'SANDBOX_NOT_RUNNING');
    add(403, 'SANDBOX_KEY_MISMATCH');
  }
  if (!(route.body instanceof z.ZodUndefined)) {
    add(400, 'MALFORMED_JSON', 'JSON_TOO_DEEP');
    add(413, 'PAYLOAD_TOO_LARGE');
    add(415, 'UNSUPPORTED_MEDIA_TYPE');
    add(422, 'VALIDATION_FAILED');
  }
  const pathParams = shapeOf(route.params);
  if (pathParams.length + shapeOf(route.query).length + shapeOf(route.headers).length > 0)
    add(422, 'VALIDATION_FAILED');
  if (pathParams.length > 0) add(400, 'BAD_REQUEST');
  for (const name of pathParams) {
    const notFound = RECORD_PATH_PARAMS[name];
    if (notFound) add(STATUS[notFound], ...DOMAIN_ERROR_CODES[notFound]);
  }
  if (route.stream) add(503, 'SHUTTING_DOWN');
  if (route.stream) add(429, 'TOO_MANY_CONNECTIONS');
  if (route.authenticated && !route.sandboxKeyOnly && route.method !== 'get') add(403, 'CROSS_SITE_REQUEST');
  if (route.apiKeyOnly) add(403, 'API_KEY_REQUIRED');
  add(431, 'REQUEST_HEADERS_TOO_LARGE');
  return expected;
}

function operation(doc: OpenApiDoc, method: string, path: string): OpenApiOperation {
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${method} ${path} is not in the document`);
  return op;
}

const errorStatuses = (op: OpenApiOperation) =>
  Object.keys(op.responses)
    .map(Number)
    .filter((s) => s >= 400)
    .sort((a, b) => a - b);

/** The codes a documented response lists in its description ("… Codes: A, B."). */
function documentedCodes(op: OpenApiOperation, status: number): string[] {
  const description = (op.responses[String(status)] as { description?: string } | undefined)?.description ?? '';
  const listed = /Codes: ([A-Z0-9_, ]+)\.$/.exec(description);
  return listed?.[1] ? listed[1].split(', ').sort() : [];
}

describe('documented error statuses', () => {
  let h: Harness;
  let doc: OpenApiDoc;
  let routes: RouteDefinition[];

  beforeAll(async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
    routes = buildRoutes(h.service);
  });
  afterAll(async () => {
    await h.close();
  });

  it('lists 429 where the user limit applies and 503 on both conversation creates', () => {
    for (const [method, path] of [
      ['POST', '/api/v1/sandboxes'],
      ['POST', '/api/conversations'],
      ['POST', '/api/v1/app-conversations'],
      ['POST', '/api/v1/sandboxes/{sandbox_id}/resume'],
      ['POST', '/api/conversations/{conversation_id}/start'],
    ] as const) {
      const op = operation(doc, method, path);
      expect(errorStatuses(op), `${method} ${path}`).toContain(429);
      expect(documentedCodes(op, 429), `${method} ${path}`).toEqual(['SANDBOX_LIMIT_REACHED']);
    }
    for (const path of ['/api/conversations', '/api/v1/app-conversations']) {
      const op = operation(doc, 'POST', path);
      expect(errorStatuses(op), `POST ${path}`).toContain(503);
      expect(documentedCodes(op, 503), `POST ${path}`).toEqual(['SANDBOXES_UNAVAILABLE', 'STORE_UNAVAILABLE']);
    }
  });

  it('every route is wired to the errors of the operation it calls', () => {
    expect(routes.map((r) => r.operationId).sort()).toEqual(Object.keys(DECLARED).sort());
    for (const route of routes)
      expect(new Set(route.errors), route.operationId).toEqual(new Set(DECLARED[route.operationId]));
  });

  it('for every operation: exactly the statuses (and codes) of its declared errors plus those of the adapter', () => {
    for (const route of routes) {
      const label = `${route.method.toUpperCase()} ${route.path}`;
      const op = operation(doc, route.method, route.path);
      const expected = expectedErrors(route);
      expect(errorStatuses(op), label).toEqual([...expected.keys()].sort((a, b) => a - b));
      for (const [status, codes] of expected)
        expect(documentedCodes(op, status), `${label} ${status}`).toEqual([...codes].sort());
    }
  });

  it('statusOf is the table the document is derived from', () => {
    for (const type of Object.keys(STATUS) as DomainErrorType[]) expect(statusOf(type), type).toBe(STATUS[type]);
    expect(statusOf({ type: 'SandboxCapReached', limit: 1 })).toBe(429);
  });

  it('DOMAIN_ERROR_CODES lists every code explainDomainError gives, per type', () => {
    const samples: { [T in DomainErrorType]: DomainErrorOf<T>[] } = {
      ValidationFailed: [{ type: 'ValidationFailed', message: 'm', issues: [] }],
      SettingsNotFound: [{ type: 'SettingsNotFound' }],
      SettingsRequired: [
        { type: 'SettingsRequired', missing: 'settings' },
        { type: 'SettingsRequired', missing: 'llm_model' },
        { type: 'SettingsRequired', missing: 'llm_api_key' },
      ],
      ConversationNotFound: [{ type: 'ConversationNotFound', conversationId: 'c' }],
      ConversationIdTaken: [{ type: 'ConversationIdTaken', conversationId: 'c' }],
      IllegalConversationTransition: [
        { type: 'IllegalConversationTransition', conversationId: 'c', from: 'RUNNING', event: 'start_failed' },
      ],
      ConfirmationNotPending: [{ type: 'ConfirmationNotPending', conversationId: 'c', executionStatus: null }],
      StartTaskNotFound: [{ type: 'StartTaskNotFound', taskId: 't' }],
      SandboxNotFound: [{ type: 'SandboxNotFound', sandboxId: 's' }],
      SandboxSpecNotFound: [{ type: 'SandboxSpecNotFound', specId: 's' }],
      IllegalSandboxTransition: [{ type: 'IllegalSandboxTransition', sandboxId: 's', from: 'ERROR', action: 'resume' }],
      SandboxRuntimeFailed: [{ type: 'SandboxRuntimeFailed', sandboxId: 's', operation: 'pause', message: 'm' }],
      SandboxesUnavailable: [{ type: 'SandboxesUnavailable', reason: 'r' }],
      SandboxCapReached: [{ type: 'SandboxCapReached', limit: 1 }],
      SecretNotFound: [{ type: 'SecretNotFound', name: 'X' }],
      ConversationNotRunning: [{ type: 'ConversationNotRunning', conversationId: 'c', status: 'STOPPED' }],
      SecretNameTaken: [{ type: 'SecretNameTaken', name: 'X' }],
      ProfileNotFound: [{ type: 'ProfileNotFound', name: 'p' }],
      ProfileNameTaken: [{ type: 'ProfileNameTaken', name: 'p' }],
      ProfileLimitReached: [{ type: 'ProfileLimitReached', limit: 10 }],
      WorkspaceFileNotFound: [{ type: 'WorkspaceFileNotFound', conversationId: 'c', path: 'p' }],
      WorkspacePathIsDirectory: [{ type: 'WorkspacePathIsDirectory', conversationId: 'c', path: 'p' }],
      ApiKeyNotFound: [{ type: 'ApiKeyNotFound', keyId: 'k' }],
      ApiKeyLimitReached: [{ type: 'ApiKeyLimitReached', limit: 1 }],
      DeviceTokenRefused: DEVICE_TOKEN_REFUSALS.map((reason) => ({
        type: 'DeviceTokenRefused' as const,
        reason,
        interval: null,
        note: null,
      })),
      DeviceAuthorizationsFull: [{ type: 'DeviceAuthorizationsFull', limit: 1 }],
      DeviceAuthorizationsFromClientFull: [{ type: 'DeviceAuthorizationsFromClientFull', limit: 1 }],
      UserCodeNotFound: [{ type: 'UserCodeNotFound', userCode: 'BBBB-BBBB' }],
      UserCodeAttemptsExceeded: [{ type: 'UserCodeAttemptsExceeded', limit: 1, windowSeconds: 60 }],
      DeviceAuthorizationAnswered: [{ type: 'DeviceAuthorizationAnswered', userCode: 'BBBB-BBBB' }],
      GitProviderNotConnected: [{ type: 'GitProviderNotConnected', provider: null }],
      GitRequestRefused: [
        { type: 'GitRequestRefused', provider: 'gitlab', reason: 'unsupported', message: 'm' },
        { type: 'GitRequestRefused', provider: 'github', reason: 'rejected', message: 'm' },
        { type: 'GitRequestRefused', provider: 'github', reason: 'host_not_allowed', message: 'm' },
      ],
      GitProviderRefused: [
        { type: 'GitProviderRefused', provider: 'github', reason: 'token_invalid', message: 'm' },
        { type: 'GitProviderRefused', provider: 'github', reason: 'forbidden', message: 'm' },
      ],
      GitResourceNotFound: [{ type: 'GitResourceNotFound', provider: 'github', message: 'm' }],
      GitProviderRateLimited: [{ type: 'GitProviderRateLimited', provider: 'github', message: 'm' }],
      GitProviderUnavailable: [
        { type: 'GitProviderUnavailable', provider: 'github', reason: 'unavailable', message: 'm' },
        { type: 'GitProviderUnavailable', provider: 'github', reason: 'timeout', message: 'm' },
      ],
      InvalidIds: [{ type: 'InvalidIds', field: 'ids', reason: 'r' }],
      TooManyPendingMessages: [{ type: 'TooManyPendingMessages', conversationId: 'c', limit: 10 }],
      ExportTooLarge: [{ type: 'ExportTooLarge', conversationId: 'c', limit: 1 }],
      HostNotAllowed: (['llm', 'mcp'] as const).map((target) => ({
        type: 'HostNotAllowed' as const,
        target,
        path: 'p',
        host: 'h',
        allowed: [],
        listName: null,
      })),
      SandboxImageNotAllowed: [{ type: 'SandboxImageNotAllowed', image: 'evil:1', allowed: [], listName: null }],
      SecretsNotExposed: [
        { type: 'SecretsNotExposed', reason: 'missing' },
        { type: 'SecretsNotExposed', reason: 'invalid' },
        { type: 'SecretsNotExposed', reason: 'other_user' },
      ],
      StoreUnavailable: [{ type: 'StoreUnavailable', operation: 'o', message: 'm', errorClass: 'Error' }],
    };
    for (const [type, errors] of Object.entries(samples) as [DomainErrorType, DomainErrorOf<DomainErrorType>[]][]) {
      expect(errors.map((e) => explainDomainError(e).code).sort(), type).toEqual([...DOMAIN_ERROR_CODES[type]].sort());
    }
  });

  it('the adapter codes the document lists are the router’s', () => {
    for (const code of [
      'UNAUTHENTICATED',
      'MALFORMED_JSON',
      'JSON_TOO_DEEP',
      'PAYLOAD_TOO_LARGE',
      'UNSUPPORTED_MEDIA_TYPE',
      'BAD_REQUEST',
      'SHUTTING_DOWN',
      'INTERNAL_ERROR',
      'CROSS_SITE_REQUEST',
      'TOO_MANY_CONNECTIONS',
      'REQUEST_HEADERS_TOO_LARGE',
    ]) {
      expect(Object.values(HTTP_ERROR_CODES), code).toContain(code);
    }
  });

  it('a handler that can return an error its route does not declare does not compile', () => {
    const build = (service: AgentConversationService) => [
      defineRoute({
        method: 'get',
        path: '/api/v1/sandboxes/{sandbox_id}',
        operationId: 'undeclared',
        summary: 'get returns SandboxNotFound, which getMany never does',
        tags: [],
        params: z.object({ sandbox_id: z.string() }),
        success: { status: 200, description: 'x', schema: z.unknown() },
        errors: SandboxServiceErrors.getMany,
        // @ts-expect-error SandboxNotFound is not in SandboxServiceErrors.getMany
        handle: ({ userId, params }) => service.sandboxes.get(userId, params.sandbox_id),
      }),
      defineRoute({
        method: 'get',
        path: '/api/v1/app-conversations/{conversation_id}/events/stream',
        operationId: 'undeclaredStream',
        summary: 'a stream checked the same way',
        tags: [],
        params: z.object({ conversation_id: z.string() }),
        success: { status: 200, description: 'x', schema: z.unknown() },
        errors: ['StoreUnavailable'],
        // @ts-expect-error ConversationNotFound is not declared
        stream: ({ userId, params }) =>
          service.conversations.subscribeEvents(userId, params.conversation_id, 0, () => {}),
      }),
      // The same handler with its errors declared compiles.
      defineRoute({
        method: 'get',
        path: '/api/v1/sandboxes/{sandbox_id}',
        operationId: 'declared',
        summary: 'declared',
        tags: [],
        params: z.object({ sandbox_id: z.string() }),
        success: { status: 200, description: 'x', schema: z.unknown() },
        errors: SandboxServiceErrors.get,
        handle: ({ userId, params }) => service.sandboxes.get(userId, params.sandbox_id),
      }),
      // A handler that cannot fail declares nothing.
      defineRoute({
        method: 'get',
        path: '/ok',
        operationId: 'ok',
        summary: 'ok',
        tags: [],
        authenticated: false,
        success: { status: 200, description: 'x', schema: z.unknown() },
        errors: [],
        handle: () => okAsync('ok'),
      }),
    ];
    expect(build(h.service).map((r) => r.errors)).toEqual([
      SandboxServiceErrors.getMany,
      ['StoreUnavailable'],
      SandboxServiceErrors.get,
      [],
    ]);
  });
});

describe('the statuses the issue found missing are answered, and documented', () => {
  let h: Harness | undefined;
  let doc: OpenApiDoc;

  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  const documented = (method: string, path: string, status: number) =>
    expect(errorStatuses(operation(doc, method, path)), `${method} ${path}`).toContain(status);

  it('429 SANDBOX_LIMIT_REACHED from every route that starts or resumes a sandbox', async () => {
    h = await startHarness({ service: { maxRunningSandboxesPerUser: 1 } });
    doc = await fetchOpenApi(h);
    await storeSettings(h);
    // A conversation whose sandbox is paused (stopped), another sandbox paused, and one running: the limit.
    const created = await h.call('POST', '/api/conversations', { body: { initial_user_msg: 'hi' } });
    expect(created.status, created.text).toBe(200);
    const conversationId = obj(created.body).conversation_id as string;
    await h.idle();
    expect((await h.call('POST', `/api/conversations/${conversationId}/stop`)).status).toBe(200);
    await h.idle();
    const paused = await h.call('POST', '/api/v1/sandboxes');
    expect(paused.status, paused.text).toBe(200);
    const pausedId = obj(paused.body).id as string;
    await h.idle();
    expect((await h.call('POST', `/api/v1/sandboxes/${pausedId}/pause`)).status).toBe(200);
    const running = await h.call('POST', '/api/v1/sandboxes');
    expect(running.status, running.text).toBe(200);
    await h.idle();

    for (const [method, template, concrete, body] of [
      ['POST', '/api/v1/sandboxes', '/api/v1/sandboxes', undefined],
      ['POST', '/api/conversations', '/api/conversations', { initial_user_msg: 'hi' }],
      ['POST', '/api/v1/app-conversations', '/api/v1/app-conversations', {}],
      ['POST', '/api/v1/sandboxes/{sandbox_id}/resume', `/api/v1/sandboxes/${pausedId}/resume`, undefined],
      ['POST', '/api/conversations/{conversation_id}/start', `/api/conversations/${conversationId}/start`, undefined],
    ] as const) {
      const r = await h.call(method, concrete, body !== undefined ? { body } : {});
      expect(r.status, `${method} ${concrete}: ${r.text}`).toBe(429);
      expect(errorCode(r.body)).toBe('SANDBOX_LIMIT_REACHED');
      documented(method, template, 429);
    }
  });

  it('503 SANDBOXES_UNAVAILABLE from both conversation creates when the runtime is down', async () => {
    h = await startHarness();
    doc = await fetchOpenApi(h);
    await storeSettings(h);
    h.ports.runtime.setUnavailable('no Docker engine answers');
    for (const [path, body] of [
      ['/api/conversations', { initial_user_msg: 'hi' }],
      ['/api/v1/app-conversations', {}],
    ] as const) {
      const r = await h.call('POST', path, { body });
      expect(r.status, `POST ${path}: ${r.text}`).toBe(503);
      expect(errorCode(r.body)).toBe('SANDBOXES_UNAVAILABLE');
      documented('POST', path, 503);
    }
  });
});

describe('error messages over HTTP name the route that helps (core names none)', () => {
  let hh: Harness;
  beforeAll(async () => {
    hh = await startHarness();
  });
  afterAll(async () => {
    await hh.close();
  });
  const message = (body: unknown) => String(obj(body)['message']);

  it('404 SETTINGS_NOT_FOUND says to store them with POST /api/settings', async () => {
    const r = await hh.call('GET', '/api/settings');
    expect(errorCode(r.body)).toBe('SETTINGS_NOT_FOUND');
    expect(message(r.body)).toBe('No settings are stored for this user yet; store them with POST /api/settings.');
  });

  it('a conversation without settings points at POST /api/settings', async () => {
    const r = await hh.call('POST', '/api/conversations', { body: { initial_user_msg: 'hi' } });
    expect(errorCode(r.body)).toBe('SETTINGS_REQUIRED');
    expect(message(r.body)).toContain('with POST /api/settings before starting a conversation');
  });

  it('an unknown sandbox spec points at GET /api/v1/sandbox-specs/search', async () => {
    const r = await hh.call('POST', '/api/v1/sandboxes', { body: { sandbox_spec_id: 'no-such-spec' } });
    expect(errorCode(r.body)).toBe('SANDBOX_SPEC_NOT_FOUND');
    expect(message(r.body)).toBe(
      'Sandbox spec no-such-spec does not exist; list the available specs with GET /api/v1/sandbox-specs/search.',
    );
  });

  it('explainHttpError adds the route to every code that has one, and only to those', () => {
    expect(explainHttpError({ type: 'SettingsRequired', missing: 'llm_model' }).message).toBe(
      'The stored settings have no llm_model; set one with POST /api/settings before starting a conversation.',
    );
    expect(explainHttpError({ type: 'SettingsRequired', missing: 'llm_api_key' }).message).toContain(
      'POST /api/settings',
    );
    expect(explainHttpError({ type: 'SandboxNotFound', sandboxId: 's1' })).toEqual(
      explainDomainError({ type: 'SandboxNotFound', sandboxId: 's1' }),
    );
    expect(explainHttpError({ type: 'WorkspacePathIsDirectory', conversationId: 'c1', path: 'src' }).message).toBe(
      'src in the workspace of conversation c1 is a directory, not a file; list its entries with GET /api/conversations/{conversation_id}/list-files?path=….',
    );
  });
});
