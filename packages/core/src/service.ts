import type { AgentFactory, AgentPort, RecoveryReport } from './conversation/agent-port.js';
import { BackgroundTasks } from './background.js';
import { EventLog } from './events/log.js';
import type { LlmClient } from './llm/client.js';
import type { McpConnector } from './mcp/port.js';
import { systemClock, type Clock } from './clock.js';
import {
  createConversationService,
  type ConversationService,
  type ConversationServiceOptions,
} from './conversation/service.js';
import type { ConversationStore, StartTaskStore } from './conversation/store.js';
import type { EventNotifier } from './events/notifier.js';
import type { ConversationLeaseStore } from './events/lease.js';
import { ConversationOwnership, type OwnershipOptions } from './conversation/ownership.js';
import { sandboxUseOf } from './conversation/sandbox-use.js';
import type { EventStore } from './events/store.js';
import type { InstallationStore } from './installation.js';
import { InProcessLocks, type Locks } from './locks.js';
import { randomIdGenerator, type IdGenerator } from './ids.js';
import { silentLogger, type Logger } from './logger.js';
import type { SandboxRuntime } from './sandbox/runtime.js';
import { createSandboxService, type SandboxService, type SandboxServiceOptions } from './sandbox/service.js';
import type { SandboxSpecCatalog, SandboxStore } from './sandbox/store.js';
import type { SandboxSpec } from './sandbox/schema.js';
import type { Page, PageRequest } from './pagination.js';
import { errAsync, ResultAsync } from 'neverthrow';
import { type DomainError, type DomainErrorOf, type DomainErrorType, type ErrorsOf } from './errors.js';
import { createSettingsService, type SettingsService } from './settings/service.js';
import { createWorkspaceService, type WorkspaceService } from './workspace/files.js';
import { createGitService, type GitService } from './git/service.js';
import type { GitProviders } from './git/port.js';
import type { SettingsStore } from './settings/store.js';
import { limitedSettingsStore, resolveUserSettingLimits, type UserSettingLimits } from './settings/limits.js';
import { checkImage } from './sandbox/images.js';
import { createApiKeyService, type ApiKeyService } from './access/api-keys.js';
import {
  createDeviceAuthorizationService,
  type DeviceAuthorizationOptions,
  type DeviceAuthorizationService,
} from './access/device-authorization.js';
import type { ApiKeyStore, DeviceGrantStore } from './access/store.js';

/** Everything the service needs from the outside world. Adapters provide these. */
export interface AgentConversationServicePorts {
  settings: SettingsStore;
  /** The API keys users make (the console, a device sign-in); only their hashes are kept. */
  apiKeys: ApiKeyStore;
  /** Device sign-ins waiting to be answered (the OpenHands CLI's `login`), shared by every replica. */
  deviceGrants: DeviceGrantStore;
  conversations: ConversationStore;
  startTasks: StartTaskStore;
  events: EventStore;
  /**
   * For several processes on one event store: carries "this conversation's log grew" between
   * them, so a live stream in one follows appends made in another (`createPostgresEventNotifier`).
   * One process needs none.
   */
  eventNotifier?: EventNotifier;
  /**
   * For several processes on one store: which process runs each conversation's agent
   * (`createPostgresStorage` gives one). With it, a process that dies is taken over by another
   * and a stale owner's appends are refused. One process needs none.
   */
  conversationLeases?: ConversationLeaseStore;
  /**
   * For several processes on one store: the per-user sandbox limit is held under these locks,
   * and one process leads sandbox maintenance (`createPostgresStorage` gives them). Default: in
   * this process only.
   */
  locks?: Locks;
  sandboxes: SandboxStore;
  sandboxSpecs: SandboxSpecCatalog;
  /** This installation's identity, kept with its data: only sandboxes labelled with it are listed, adopted, counted and paused. */
  installation: InstallationStore;
  runtime: SandboxRuntime;
  /** The model the agents call (an OpenAI-compatible adapter, or a scripted one in tests). */
  llm: LlmClient;
  /** Speaks to the MCP servers users configure (`@acs/adapter-mcp`). Without it, MCP servers in settings get a warning event and no tools. */
  mcp?: McpConnector;
  /**
   * Reaches git providers (GitHub, GitLab) with users' stored tokens, for the git searches and
   * the user's git account (`@acs/adapter-git-providers`). Without it those answer that this
   * server has no client for the provider.
   */
  gitProviders?: GitProviders;
  /** The agent that runs conversations: `createAgent(options)` from `@acs/agent`. */
  agent: AgentFactory;
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
}

/** Limits and timings of the domain services (the agent's own options go to `createAgent`). */
export interface AgentConversationServiceOptions
  extends ConversationServiceOptions, SandboxServiceOptions, OwnershipOptions, DeviceAuthorizationOptions {
  /** API keys one user may hold (default 100). */
  maxApiKeysPerUser?: number;
  /**
   * The most each setting that scales what the server spends for a user may be (resource
   * factor 1, condenser 1,000 events, 500 iterations, no budget cap by default): what is applied,
   * and what every read of the settings shows, is at most these (settings/limits.ts).
   */
  userSettingLimits?: UserSettingLimits;
}

/** What each sandbox spec operation can fail with (the compiler holds the implementation to it). */
export const SandboxSpecServiceErrors = {
  /** SandboxSpecNotFound: a page id naming a spec the catalog does not have (any page id of the documented form is taken, so it is a missing record, not bad input). */
  search: ['SandboxSpecNotFound', 'StoreUnavailable'],
  getMany: ['StoreUnavailable'],
} as const satisfies Record<string, readonly DomainErrorType[]>;

export interface SandboxSpecService {
  search(page: PageRequest): ResultAsync<Page<SandboxSpec>, ErrorsOf<typeof SandboxSpecServiceErrors.search>>;
  getMany(
    ids: readonly string[],
  ): ResultAsync<(SandboxSpec | null)[], ErrorsOf<typeof SandboxSpecServiceErrors.getMany>>;
}

/** The whole domain, ready to be bound to HTTP (or anything else). */
export interface AgentConversationService {
  readonly settings: SettingsService;
  /** Each user's named API keys: make, list, revoke, and find whose a presented key is. */
  readonly apiKeys: ApiKeyService;
  /** Device sign-ins (RFC 8628): a device asks, the user approves in a signed-in browser, the device gets a new API key. */
  readonly deviceAuthorization: DeviceAuthorizationService;
  readonly conversations: ConversationService;
  readonly sandboxes: SandboxService;
  readonly sandboxSpecs: SandboxSpecService;
  /** A running conversation's files and repository changes, for a UI's panels. */
  readonly workspace: WorkspaceService;
  /** The user's git providers: installations, repositories, branches, suggested tasks, their account. */
  readonly git: GitService;
  /** The agent (mostly driven through `conversations`). */
  readonly agent: AgentPort;
  /**
   * Call once at start-up: adopts the runtime's sandboxes, then resumes the agents that were
   * running when the last process stopped (tool calls it cut short get an error observation).
   */
  recover(): ResultAsync<RecoveryReport, DomainError>;
  /** Resolves when no background work (sandbox start-up, start pipelines) is left. */
  idle(): Promise<void>;
  /** What background work is running now, by name (`sandbox <id>`, `start conversation <id>`…): what `idle()` and `close()` wait for. */
  pendingWork(): string[];
  /** Stops background waits and drains them. Call on shutdown. */
  close(): Promise<void>;
}

export function createAgentConversationService(
  ports: AgentConversationServicePorts,
  options: AgentConversationServiceOptions = {},
): AgentConversationService {
  const clock = ports.clock ?? systemClock;
  const ids = ports.ids ?? randomIdGenerator;
  const logger = ports.logger ?? silentLogger;
  const background = new BackgroundTasks(logger);
  // Every part reads users' settings capped by the operator's limits (settings/limits.ts).
  const settingsStore = limitedSettingsStore(ports.settings, resolveUserSettingLimits(options.userSettingLimits));
  const settings = createSettingsService({
    store: settingsStore,
    ids,
    egress: options.egress,
    checkImage: (image) => checkImage(ports.sandboxSpecs, options.sandboxImages ?? {}, image),
  });
  const apiKeys = createApiKeyService({
    store: ports.apiKeys,
    clock,
    ids,
    ...(options.maxApiKeysPerUser !== undefined ? { maxPerUser: options.maxApiKeysPerUser } : {}),
  });
  const deviceAuthorization = createDeviceAuthorizationService({ store: ports.deviceGrants, apiKeys, clock, options });

  const ownership = new ConversationOwnership({ store: ports.conversationLeases, clock, logger }, options);
  // The two services refer to each other: a lost sandbox stops its conversations.
  // The callback runs only after both exist. The sandbox side learns what a sandbox's
  // conversations are doing (to pause finished ones) from the conversation store.
  const sandboxes = createSandboxService({
    sandboxes: ports.sandboxes,
    installation: ports.installation,
    specs: ports.sandboxSpecs,
    runtime: ports.runtime,
    clock,
    ids,
    logger,
    background,
    locks: ports.locks ?? new InProcessLocks(),
    replica: ownership.owner,
    shared: ownership.shared,
    options,
    onSandboxGone: (userId, sandboxId, reason) => conversations.handleSandboxGone(userId, sandboxId, reason),
    resourceFactorOf: (userId) => resourceFactorOf(settingsStore, userId),
    useOf: (userId, sandboxId) => ports.conversations.listBySandbox(userId, sandboxId).map(sandboxUseOf),
  });
  // With neither a notifier nor leases this service is the only one appending to its logs (one process).
  const log = new EventLog(ports.events, ports.eventNotifier, {
    soleWriter: !ports.eventNotifier && !ports.conversationLeases,
  });
  const agent = ports.agent({
    ownership,
    conversations: ports.conversations,
    log,
    sandboxes,
    runtime: ports.runtime,
    settings,
    llm: ports.llm,
    clock,
    logger,
    background,
    ...(ports.mcp ? { mcp: ports.mcp } : {}),
  });
  const conversations: ConversationService = createConversationService({
    conversations: ports.conversations,
    startTasks: ports.startTasks,
    log,
    agent,
    sandboxStore: ports.sandboxes,
    sandboxes,
    settings,
    clock,
    ids,
    logger,
    background,
    options,
  });

  return {
    settings,
    apiKeys,
    deviceAuthorization,
    conversations,
    sandboxes,
    sandboxSpecs: createSandboxSpecService(ports.sandboxSpecs),
    workspace: createWorkspaceService({ conversations: ports.conversations, sandboxes, runtime: ports.runtime }),
    git: createGitService({ settings: settingsStore, providers: ports.gitProviders ?? null, logger }),
    agent,
    recover: () => sandboxes.reconcile().andThen(() => agent.recover()),
    idle: () => background.idle(),
    pendingWork: () => background.pending(),
    close: async () => {
      sandboxes.stop();
      // Agents stop where they are and stay "running" in the store: the next process resumes them.
      await agent.shutdown();
      log.close();
      return background.close();
    },
  };
}

/** The user's `remote_runtime_resource_factor` (1 when unset or the settings cannot be read). */
async function resourceFactorOf(settings: SettingsStore, userId: string): Promise<number> {
  return (await settings.get(userId)).unwrapOr(null)?.remote_runtime_resource_factor ?? 1;
}

/** The sandbox specs the catalog offers, read straight from it. */
function createSandboxSpecService(catalog: SandboxSpecCatalog): SandboxSpecService {
  return {
    search: (page) => searchSpecs(catalog, page),
    getMany: (idList) => ResultAsync.combine(idList.map((id) => catalog.get(id))),
  };
}

/** A page of specs; spec pages follow the catalog's order, so a cursor must name a spec that exists. */
function searchSpecs(
  catalog: SandboxSpecCatalog,
  page: PageRequest,
): ResultAsync<Page<SandboxSpec>, ErrorsOf<typeof SandboxSpecServiceErrors.search>> {
  const after = page.after;
  if (!after) return catalog.list(page);
  return catalog.get(after.id).andThen((spec) =>
    spec
      ? catalog.list(page)
      : errAsync<Page<SandboxSpec>, DomainErrorOf<'SandboxSpecNotFound'>>({
          type: 'SandboxSpecNotFound',
          specId: after.id,
        }),
  );
}
