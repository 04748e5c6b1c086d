import { describe, expect, it } from 'vitest';
import { explainDomainError, validationFailed, type DomainError, type DomainErrorType } from '../src/index.js';
import { AppConversationStartRequestSchema, NewConversationRequestSchema } from '../src/schemas.js';
import { normalizeId, randomIdGenerator, sequentialIdGenerator } from '../src/ports.js';
import { issuePaths, parseOk } from './helpers.js';

describe('normalizeId', () => {
  it.each([
    ['550e8400-e29b-41d4-a716-446655440000', '550e8400e29b41d4a716446655440000'],
    ['550E8400-E29B-41D4-A716-446655440000', '550e8400e29b41d4a716446655440000'],
    ['550e8400e29b41d4a716446655440000', '550e8400e29b41d4a716446655440000'],
    ['550E8400E29B41D4A716446655440000', '550e8400e29b41d4a716446655440000'],
  ])('normalises %j to %j', (input, expected) => {
    expect(normalizeId(input)).toBe(expected);
  });

  it.each([
    'My-Conversation_1',
    'ABC',
    '550e8400e29b41d4a71644665544000', // 31 hex
    '550e8400e29b41d4a7164466554400000', // 33 hex
    '550e8400-e29b-41d4-a716-44665544000', // last group too short
    '{550e8400-e29b-41d4-a716-446655440000}',
    '550e8400-e29b41d4-a716-446655440000',
    'g50e8400e29b41d4a716446655440000',
    '',
  ])('leaves %j unchanged', (input) => {
    expect(normalizeId(input)).toBe(input);
  });
});

describe('id generators', () => {
  it('randomIdGenerator gives 32 lowercase hex characters, all distinct', () => {
    const ids = Array.from({ length: 2000 }, () => randomIdGenerator.next());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('random ids are already normalised', () => {
    const id = randomIdGenerator.next();
    expect(normalizeId(id)).toBe(id);
  });

  it('sequentialIdGenerator counts in 32-hex form', () => {
    const ids = sequentialIdGenerator(255);
    expect([ids.next(), ids.next()]).toEqual(['000000000000000000000000000000ff', '00000000000000000000000000000100']);
    expect(sequentialIdGenerator().next()).toBe('00000000000000000000000000000001');
  });
});

describe('NewConversationRequestSchema', () => {
  const parse = (body: unknown) => parseOk(NewConversationRequestSchema, body);
  const rejected = (body: unknown) => issuePaths(NewConversationRequestSchema, body);

  it('accepts an empty body and a full one', () => {
    expect(parse({})).toEqual({});
    const full = {
      repository: 'octo/hello-world',
      git_provider: 'github',
      selected_branch: 'feature/x',
      initial_user_msg: 'fix the bug',
      image_urls: ['https://img.example.com/a.png'],
      replay_json: null,
      suggested_task: { repo: 'octo/hello-world', issue_number: 12, title: 'Bug' },
      create_microagent: { repo: 'octo/hello-world', title: null },
      conversation_instructions: 'be brief',
      mcp_config: { sse_servers: ['https://sse.example.com'] },
      conversation_id: 'my-conv_1',
    };
    expect(parse(full)).toEqual({
      ...full,
      mcp_config: {
        sse_servers: [{ url: 'https://sse.example.com', api_key: null }],
        stdio_servers: [],
        shttp_servers: [],
      },
    });
  });

  it('rejects unknown keys', () => {
    const result = NewConversationRequestSchema.safeParse({ initial_user_msg: 'hi', llm_model: 'x' });
    expect(result.success).toBe(false);
    expect(result.error?.issues).toHaveLength(1);
    expect(result.error?.issues[0]?.code).toBe('unrecognized_keys');
  });

  it.each(['github', 'gitlab', 'bitbucket', 'enterprise_sso', null])('accepts git_provider %j', (git_provider) => {
    expect(parse({ git_provider }).git_provider).toBe(git_provider);
  });

  it.each(['GitHub', 'azure_devops', '', 1])('rejects git_provider %j', (git_provider) => {
    expect(rejected({ git_provider })).toEqual(['git_provider']);
  });

  it.each([
    'https://img.example.com/a.png',
    'http://img.example.com/a.png?x=1',
    'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE=',
    'data:image/svg+xml;base64,PHN2Zz4=',
  ])('accepts the image url %j', (url) => {
    expect(parse({ image_urls: [url] }).image_urls).toEqual([url]);
  });

  it.each([
    'ftp://img.example.com/a.png',
    'file:///etc/passwd',
    'javascript:alert(1)',
    'data:text/plain;base64,aGVsbG8=',
    'data:image/png,rawbytes',
    'data:image/png;base64,not*base64',
    'img.example.com/a.png',
    'https://img.example.com/a b.png',
    '',
  ])('rejects the image url %j', (url) => {
    expect(rejected({ image_urls: ['https://ok.example.com/x.png', url] })).toEqual(['image_urls.1']);
  });

  it('accepts a suggested task with an integer issue number', () => {
    expect(parse({ suggested_task: { repo: 'o/n', issue_number: 0, title: 't' } }).suggested_task).toEqual({
      repo: 'o/n',
      issue_number: 0,
      title: 't',
    });
  });

  it.each([1.5, '3', -1, null])('rejects suggested_task.issue_number %j', (issue_number) => {
    expect(rejected({ suggested_task: { repo: 'o/n', issue_number, title: 't' } })).toEqual([
      'suggested_task.issue_number',
    ]);
  });

  it('rejects a suggested task without issue_number, and suggested_task null', () => {
    expect(rejected({ suggested_task: { repo: 'o/n', title: 't' } })).toEqual(['suggested_task.issue_number']);
    expect(rejected({ suggested_task: null })).toEqual(['suggested_task']);
  });

  it.each([
    ['octo/hello-world', 'octo/hello-world'],
    ['  octo/hello.world_2  ', 'octo/hello.world_2'],
    ['group/sub/name', 'group/sub/name'],
  ])('accepts repository %j as %j', (repository, expected) => {
    expect(parse({ repository }).repository).toBe(expected);
  });

  it.each(['octo', 'octo/', '/name', 'octo name/x', 'https://github.com/octo/hello', 'octo//name', ''])(
    'rejects repository %j',
    (repository) => {
      expect(rejected({ repository })).toEqual(['repository']);
    },
  );

  it('validates the repo of suggested_task and create_microagent the same way', () => {
    expect(rejected({ suggested_task: { repo: 'nope', issue_number: 1, title: 't' } })).toEqual([
      'suggested_task.repo',
    ]);
    expect(rejected({ create_microagent: { repo: 'nope' } })).toEqual(['create_microagent.repo']);
  });

  it.each(['a..b', '-x', 'has space', 'x~1', 'x@{1}', ''])('rejects selected_branch %j', (selected_branch) => {
    expect(rejected({ selected_branch })).toEqual(['selected_branch']);
  });

  it.each(['-starts-with-dash', 'has space', 'a/b', '', 'count', 'SEARCH', 'start-tasks', 'Stream-Start'])(
    'rejects conversation_id %j',
    (conversation_id) => {
      expect(rejected({ conversation_id })).toEqual(['conversation_id']);
    },
  );

  it('refuses a suggested task or microagent about another repository than `repository`', () => {
    expect(
      rejected({ repository: 'acme/api', suggested_task: { repo: 'acme/web', issue_number: 1, title: 't' } }),
    ).toEqual(['suggested_task.repo']);
    expect(rejected({ repository: 'acme/api', create_microagent: { repo: 'acme/web' } })).toEqual([
      'create_microagent.repo',
    ]);
    expect(
      NewConversationRequestSchema.safeParse({
        repository: 'acme/api',
        suggested_task: { repo: 'Acme/API', issue_number: 1, title: 't' },
      }).success,
    ).toBe(true);
  });

  it('validates a nested mcp_config', () => {
    expect(rejected({ mcp_config: { sse_servers: ['ftp://x.example.com'] } })).toEqual(['mcp_config.sse_servers.0']);
    expect(rejected({ mcp_config: { unknown: [] } })).toEqual(['mcp_config']);
  });
});

describe('AppConversationStartRequestSchema', () => {
  const parse = (body: unknown) => parseOk(AppConversationStartRequestSchema, body);
  const rejected = (body: unknown) => issuePaths(AppConversationStartRequestSchema, body);

  it('ignores (strips) unknown keys', () => {
    expect(parse({ selected_repository: 'o/n', unknown_field: 1, sandbox_spec_id: 'x' })).toEqual({
      selected_repository: 'o/n',
    });
  });

  it('applies the message defaults: role user, run false', () => {
    expect(parse({ initial_message: { content: [{ type: 'text', text: 'hello' }] } }).initial_message).toEqual({
      role: 'user',
      content: [{ type: 'text', text: 'hello' }],
      run: false,
    });
  });

  it('accepts text and image content together', () => {
    const message = {
      role: 'user',
      content: [
        { type: 'text', text: 'look', cache_prompt: true },
        { type: 'image', image_urls: ['https://img.example.com/a.png', 'data:image/jpeg;base64,/9j/4AAQ'] },
      ],
      run: true,
    };
    expect(parse({ initial_message: message }).initial_message).toEqual(message);
  });

  it('accepts initial_message null', () => {
    expect(parse({ initial_message: null }).initial_message).toBeNull();
  });

  it('rejects an unknown content type', () => {
    expect(rejected({ initial_message: { content: [{ type: 'audio', url: 'x' }] } })).toEqual([
      'initial_message.content.0.type',
    ]);
  });

  it('rejects image content without urls or with a bad url', () => {
    expect(rejected({ initial_message: { content: [{ type: 'image', image_urls: [] }] } })).toEqual([
      'initial_message.content.0.image_urls',
    ]);
    expect(rejected({ initial_message: { content: [{ type: 'image', image_urls: ['ftp://x/y.png'] }] } })).toEqual([
      'initial_message.content.0.image_urls.0',
    ]);
  });

  it('rejects text content without text; a first message may leave its content out (none, as OpenHands 1.11 defaults it)', () => {
    expect(rejected({ initial_message: { content: [{ type: 'text' }] } })).toEqual(['initial_message.content.0.text']);
    expect(rejected({ initial_message: { content: [{}] } })).toEqual(['initial_message.content.0.text']);
    expect(AppConversationStartRequestSchema.safeParse({ initial_message: { role: 'user' } }).success).toBe(true);
    expect(
      AppConversationStartRequestSchema.parse({
        initial_message: { content: [{ text: 'hi' }, { image_urls: ['https://example.com/a.png'] }] },
      }).initial_message?.content,
    ).toEqual([
      { type: 'text', text: 'hi' },
      { type: 'image', image_urls: ['https://example.com/a.png'] },
    ]);
  });

  it('refuses what it cannot honour unless empty: plugins, secrets, agent profiles; a suggested task with a first message', () => {
    expect(rejected({ plugins: [{ source: 'github:o/r' }] })).toEqual(['plugins']);
    expect(rejected({ secrets: { TOKEN: 'x' } })).toEqual(['secrets']);
    expect(rejected({ agent_profile_id: 'p1' })).toEqual(['agent_profile_id']);
    expect(
      AppConversationStartRequestSchema.safeParse({ plugins: [], secrets: {}, agent_profile_id: null }).success,
    ).toBe(true);
    const task = { repo: 'o/r', issue_number: 1, title: 't', task_type: 'OPEN_ISSUE', git_provider: 'github' };
    expect(AppConversationStartRequestSchema.safeParse({ suggested_task: task }).success).toBe(true);
    expect(rejected({ suggested_task: task, initial_message: { content: [{ type: 'text', text: 'x' }] } })).toEqual([
      'suggested_task',
    ]);
    expect(rejected({ conversation_id: 'not-a-uuid' })).toEqual(['conversation_id']);
    expect(
      AppConversationStartRequestSchema.safeParse({
        conversation_id: '3387d26a-07df-48e8-add9-d60b19695f1f',
        trigger: 'automation',
        public: true,
        system_message_suffix: 'Be brief.',
      }).success,
    ).toBe(true);
  });

  it('rejects an unknown role', () => {
    expect(rejected({ initial_message: { role: 'admin', content: [] } })).toEqual(['initial_message.role']);
  });

  it('validates selected_repository, git_provider and llm_model', () => {
    expect(rejected({ selected_repository: 'nope' })).toEqual(['selected_repository']);
    expect(rejected({ git_provider: 'azure' })).toEqual(['git_provider']);
    expect(rejected({ llm_model: '   ' })).toEqual(['llm_model']);
    expect(parse({ llm_model: ' openai/gpt-4o ' }).llm_model).toBe('openai/gpt-4o');
  });
});

describe('explainDomainError', () => {
  /** One example of every variant; adding a variant to DomainError without one here fails to compile. */
  const EXAMPLES: { [K in DomainErrorType]: Extract<DomainError, { type: K }> } = {
    ValidationFailed: {
      type: 'ValidationFailed',
      message: 'Invalid input: llm_model: too long',
      issues: [{ path: 'llm_model', message: 'too long' }],
    },
    SettingsNotFound: { type: 'SettingsNotFound' },
    SettingsRequired: { type: 'SettingsRequired', missing: 'llm_api_key' },
    ConversationNotFound: { type: 'ConversationNotFound', conversationId: 'conv-123' },
    ConversationIdTaken: { type: 'ConversationIdTaken', conversationId: 'conv-123' },
    ConfirmationNotPending: { type: 'ConfirmationNotPending', conversationId: 'conv-123', executionStatus: 'running' },
    IllegalConversationTransition: {
      type: 'IllegalConversationTransition',
      conversationId: 'conv-123',
      from: 'STOPPED',
      event: 'sandbox_ready',
    },
    StartTaskNotFound: { type: 'StartTaskNotFound', taskId: 'task-9' },
    SandboxNotFound: { type: 'SandboxNotFound', sandboxId: 'sbx-1' },
    SandboxSpecNotFound: { type: 'SandboxSpecNotFound', specId: 'spec-x' },
    IllegalSandboxTransition: {
      type: 'IllegalSandboxTransition',
      sandboxId: 'sbx-1',
      from: 'DELETED',
      action: 'resume',
    },
    SandboxRuntimeFailed: {
      type: 'SandboxRuntimeFailed',
      sandboxId: 'sbx-1',
      operation: 'pause',
      message: 'engine said no',
    },
    SandboxesUnavailable: { type: 'SandboxesUnavailable', reason: 'docker is not running' },
    SandboxCapReached: { type: 'SandboxCapReached', limit: 3 },
    SecretNotFound: { type: 'SecretNotFound', name: 'DEPLOY_TOKEN' },
    ConversationNotRunning: { type: 'ConversationNotRunning', conversationId: 'conv-123', status: 'STOPPED' },
    SecretNameTaken: { type: 'SecretNameTaken', name: 'DEPLOY_TOKEN' },
    ProfileNotFound: { type: 'ProfileNotFound', name: 'fast' },
    ProfileNameTaken: { type: 'ProfileNameTaken', name: 'fast' },
    ProfileLimitReached: { type: 'ProfileLimitReached', limit: 10 },
    WorkspaceFileNotFound: { type: 'WorkspaceFileNotFound', conversationId: 'conv-123', path: 'src/missing.ts' },
    WorkspacePathIsDirectory: { type: 'WorkspacePathIsDirectory', conversationId: 'conv-123', path: 'src' },
    ApiKeyNotFound: { type: 'ApiKeyNotFound', keyId: 'key-7' },
    ApiKeyLimitReached: { type: 'ApiKeyLimitReached', limit: 100 },
    DeviceTokenRefused: { type: 'DeviceTokenRefused', reason: 'slow_down', interval: 10, note: null },
    DeviceAuthorizationsFull: { type: 'DeviceAuthorizationsFull', limit: 1000 },
    DeviceAuthorizationsFromClientFull: { type: 'DeviceAuthorizationsFromClientFull', limit: 10 },
    UserCodeNotFound: { type: 'UserCodeNotFound', userCode: 'WDJB-MJHT' },
    UserCodeAttemptsExceeded: { type: 'UserCodeAttemptsExceeded', limit: 10, windowSeconds: 900 },
    DeviceAuthorizationAnswered: { type: 'DeviceAuthorizationAnswered', userCode: 'WDJB-MJHT' },
    GitProviderNotConnected: { type: 'GitProviderNotConnected', provider: 'gitlab' },
    GitRequestRefused: {
      type: 'GitRequestRefused',
      provider: 'github',
      reason: 'rejected',
      message: 'Validation Failed',
    },
    GitProviderRefused: {
      type: 'GitProviderRefused',
      provider: 'github',
      reason: 'token_invalid',
      message: 'Bad credentials',
    },
    GitResourceNotFound: { type: 'GitResourceNotFound', provider: 'gitlab', message: '404 Project Not Found' },
    GitProviderRateLimited: { type: 'GitProviderRateLimited', provider: 'github', message: 'API rate limit exceeded' },
    GitProviderUnavailable: {
      type: 'GitProviderUnavailable',
      provider: 'github',
      reason: 'timeout',
      message: 'no answer within 15 s',
    },
    InvalidIds: { type: 'InvalidIds', field: 'ids', reason: 'nope is not a UUID' },
    TooManyPendingMessages: { type: 'TooManyPendingMessages', conversationId: 'conv-123', limit: 10 },
    ExportTooLarge: { type: 'ExportTooLarge', conversationId: 'conv-123', limit: 10000 },
    HostNotAllowed: {
      type: 'HostNotAllowed',
      target: 'llm',
      path: 'llm_base_url',
      host: '10.0.0.5:8080',
      allowed: ['api.openai.com', 'litellm.internal:4000'],
      listName: 'ACS_LLM_ALLOWED_HOSTS',
    },
    SandboxImageNotAllowed: {
      type: 'SandboxImageNotAllowed',
      image: 'registry.internal/secret:1',
      allowed: ['ghcr.io/acme/*'],
      listName: 'ACS_ALLOWED_IMAGES',
    },
    SecretsNotExposed: { type: 'SecretsNotExposed', reason: 'other_user' },
    StoreUnavailable: {
      type: 'StoreUnavailable',
      operation: 'settings.save',
      message: 'connection refused',
      errorClass: 'Error ECONNREFUSED',
    },
  };

  const EXPECTED: Record<DomainErrorType, { code: string; mentions: string[] }> = {
    ValidationFailed: { code: 'VALIDATION_FAILED', mentions: ['llm_model'] },
    SettingsNotFound: { code: 'SETTINGS_NOT_FOUND', mentions: ['No settings', 'store them'] },
    SettingsRequired: { code: 'LLM_API_KEY_REQUIRED', mentions: ['llm_api_key'] },
    ConversationNotFound: { code: 'CONVERSATION_NOT_FOUND', mentions: ['conv-123'] },
    ConversationIdTaken: { code: 'CONVERSATION_ID_TAKEN', mentions: ['conv-123'] },
    ConfirmationNotPending: { code: 'CONFIRMATION_NOT_PENDING', mentions: ['conv-123', 'running'] },
    IllegalConversationTransition: { code: 'ILLEGAL_CONVERSATION_TRANSITION', mentions: ['conv-123', 'STOPPED'] },
    StartTaskNotFound: { code: 'START_TASK_NOT_FOUND', mentions: ['task-9'] },
    SandboxNotFound: { code: 'SANDBOX_NOT_FOUND', mentions: ['sbx-1'] },
    SandboxSpecNotFound: { code: 'SANDBOX_SPEC_NOT_FOUND', mentions: ['spec-x'] },
    IllegalSandboxTransition: { code: 'ILLEGAL_SANDBOX_TRANSITION', mentions: ['sbx-1', 'DELETED', 'resumed'] },
    SandboxRuntimeFailed: { code: 'SANDBOX_RUNTIME_FAILED', mentions: ['sbx-1', 'pause', 'engine said no'] },
    SandboxesUnavailable: { code: 'SANDBOXES_UNAVAILABLE', mentions: ['docker is not running'] },
    SandboxCapReached: { code: 'SANDBOX_LIMIT_REACHED', mentions: ['3 running sandboxes', 'pause or delete one'] },
    SecretNotFound: { code: 'SECRET_NOT_FOUND', mentions: ['DEPLOY_TOKEN'] },
    ConversationNotRunning: { code: 'CONVERSATION_NOT_RUNNING', mentions: ['conv-123', 'STOPPED'] },
    SecretNameTaken: { code: 'SECRET_NAME_TAKEN', mentions: ['DEPLOY_TOKEN', 'already exists'] },
    ProfileNotFound: { code: 'PROFILE_NOT_FOUND', mentions: ['fast', 'no LLM profile'] },
    ProfileNameTaken: { code: 'PROFILE_NAME_TAKEN', mentions: ['fast', 'already exists'] },
    ProfileLimitReached: { code: 'PROFILE_LIMIT_REACHED', mentions: ['10 LLM profiles', 'delete one'] },
    WorkspaceFileNotFound: { code: 'FILE_NOT_FOUND', mentions: ['src/missing.ts', 'conv-123'] },
    WorkspacePathIsDirectory: {
      code: 'PATH_IS_DIRECTORY',
      mentions: ['src', 'conv-123', 'is a directory', 'list its entries'],
    },
    ApiKeyNotFound: { code: 'API_KEY_NOT_FOUND', mentions: ['key-7'] },
    ApiKeyLimitReached: { code: 'API_KEY_LIMIT_REACHED', mentions: ['100 API keys', 'revoke one'] },
    DeviceTokenRefused: { code: 'SLOW_DOWN', mentions: ['10 seconds'] },
    DeviceAuthorizationsFull: { code: 'DEVICE_AUTHORIZATIONS_FULL', mentions: ['1000'] },
    DeviceAuthorizationsFromClientFull: {
      code: 'DEVICE_AUTHORIZATIONS_FROM_CLIENT_FULL',
      mentions: ['10 device sign-ins from your address'],
    },
    UserCodeNotFound: { code: 'USER_CODE_NOT_FOUND', mentions: ['WDJB-MJHT'] },
    UserCodeAttemptsExceeded: { code: 'USER_CODE_ATTEMPTS_EXCEEDED', mentions: ['10 within 15 minutes'] },
    DeviceAuthorizationAnswered: {
      code: 'DEVICE_AUTHORIZATION_ANSWERED',
      mentions: ['WDJB-MJHT', 'already been answered'],
    },
    GitProviderNotConnected: { code: 'GIT_PROVIDER_NOT_CONNECTED', mentions: ['GitLab token'] },
    GitRequestRefused: { code: 'GIT_PROVIDER_REJECTED_REQUEST', mentions: ['GitHub', 'Validation Failed'] },
    GitProviderRefused: {
      code: 'GIT_PROVIDER_TOKEN_INVALID',
      mentions: ['GitHub', 'Bad credentials', 'store a valid one'],
    },
    GitResourceNotFound: { code: 'GIT_RESOURCE_NOT_FOUND', mentions: ['GitLab', '404 Project Not Found'] },
    GitProviderRateLimited: { code: 'GIT_PROVIDER_RATE_LIMITED', mentions: ['GitHub', 'rate limit'] },
    GitProviderUnavailable: { code: 'GIT_PROVIDER_TIMEOUT', mentions: ['GitHub', 'in time'] },
    InvalidIds: { code: 'INVALID_IDS', mentions: ['ids', 'nope is not a UUID'] },
    TooManyPendingMessages: { code: 'TOO_MANY_PENDING_MESSAGES', mentions: ['conv-123', '10 messages'] },
    ExportTooLarge: { code: 'EXPORT_TOO_LARGE', mentions: ['conv-123', 'more than 10000 events'] },
    HostNotAllowed: {
      code: 'LLM_HOST_NOT_ALLOWED',
      mentions: ['llm_base_url', '10.0.0.5:8080', 'api.openai.com, litellm.internal:4000 (ACS_LLM_ALLOWED_HOSTS)'],
    },
    SandboxImageNotAllowed: {
      code: 'SANDBOX_IMAGE_NOT_ALLOWED',
      mentions: ['registry.internal/secret:1', 'ghcr.io/acme/*', 'ACS_ALLOWED_IMAGES'],
    },
    SecretsNotExposed: { code: 'SESSION_API_KEY_MISMATCH', mentions: ['X-Session-API-Key', 'another user'] },
    StoreUnavailable: { code: 'STORE_UNAVAILABLE', mentions: ['settings.save'] },
  };

  it.each(Object.values(EXAMPLES) as DomainError[])('explains $type with a stable code and a message', (error) => {
    const { code, message } = explainDomainError(error);
    expect(code).toBe(EXPECTED[error.type].code);
    expect(code).toMatch(/^[A-Z][A-Z_]+$/);
    expect(message.trim().length).toBeGreaterThan(10);
    for (const part of EXPECTED[error.type].mentions) expect(message).toContain(part);
    // Routes are the HTTP adapter's to name (it adds them: adapter-express http-error.test.ts).
    expect(message).not.toMatch(/\/api\/|\b(GET|POST|PATCH|DELETE) \//);
  });

  it('gives every variant its own code', () => {
    const codes = (Object.values(EXAMPLES) as DomainError[]).map((e) => explainDomainError(e).code);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it.each([
    ['settings', 'SETTINGS_REQUIRED'],
    ['llm_model', 'LLM_MODEL_REQUIRED'],
    ['llm_api_key', 'LLM_API_KEY_REQUIRED'],
  ] as const)('says which setting is missing (%s → %s)', (missing, code) => {
    const explained = explainDomainError({ type: 'SettingsRequired', missing });
    expect(explained.code).toBe(code);
    expect(explained.message).toContain(missing === 'settings' ? 'llm_model and llm_api_key' : missing);
  });

  it('does not leak the store failure cause into the message', () => {
    expect(explainDomainError(EXAMPLES.StoreUnavailable).message).not.toContain('connection refused');
  });

  it('validationFailed lists the field paths in its message, at most five', () => {
    const issues = Array.from({ length: 7 }, (_, i) => ({ path: `field${i}`, message: 'bad' }));
    const error = validationFailed(issues);
    expect(error).toMatchObject({ type: 'ValidationFailed', issues });
    const { message } = explainDomainError(error);
    expect(message).toContain('field0: bad');
    expect(message).toContain('field4: bad');
    expect(message).not.toContain('field5');
    expect(message).toContain('(and 2 more)');
  });
});
