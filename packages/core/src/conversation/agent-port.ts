import type { ResultAsync } from 'neverthrow';
import type { BackgroundTasks } from '../background.js';
import type { Clock } from '../clock.js';
import type { DomainError, DomainErrorOf } from '../errors.js';
import type { EventLog } from '../events/log.js';
import type { ConfirmationEvent } from '../events/schema.js';
import type { LlmClient } from '../llm/client.js';
import type { Logger } from '../logger.js';
import type { McpConnector } from '../mcp/port.js';
import type { SandboxRuntime } from '../sandbox/runtime.js';
import type { SandboxService } from '../sandbox/service.js';
import type { GitProvider, StoredSettings } from '../settings/schema.js';
import type { SettingsService } from '../settings/service.js';
import type { ConversationOwnership } from './ownership.js';
import type { ConversationStore } from './store.js';
import type { ConversationWorkspace } from './workspace.js';

/**
 * Where the domain meets the agent. Core owns conversations, sandboxes, settings and the event
 * log; the agent (`@acs/agent`, or anything else that honours these two interfaces) owns the
 * loop that reads the log, calls the model and runs tools. The conversation service asks the
 * agent for five things (`AgentPort`); the agent gets what it needs from the domain through
 * `AgentHost`. A host wires them by passing a factory: `agent: createAgent(options)`.
 */

/** The user's answer to actions waiting for confirmation. */
export interface ConfirmationDecision {
  accept: boolean;
  /** Shown to the model with a rejection. */
  reason?: string | null;
}

/** What recording a confirmation decision can fail with. */
export type ConfirmationFailure = DomainErrorOf<'ConversationNotFound' | 'ConfirmationNotPending' | 'StoreUnavailable'>;

export interface RecoveryReport {
  /** Conversations found running in the log, now resumed (or waiting for their sandbox). */
  resumed: number;
  /** Tool calls a crash interrupted, now closed with an error observation. */
  interrupted_calls: number;
}

/** A step of workspace setup, shown on the conversation's start task while it runs. */
export type SetupStep = 'PREPARING_REPOSITORY' | 'RUNNING_SETUP_SCRIPT';

/** What a setup step printed, recorded as a `setup` event. */
export interface SetupReport {
  step: 'repository' | 'setup_script';
  summary: string;
  output: string;
  exit_code: number | null;
  timed_out: boolean;
  duration_ms: number;
}

/** A conversation's repository, to be put into its running sandbox before the agent starts. */
export interface WorkspaceRequest {
  sandboxId: string;
  workingDir: string;
  conversationId: string;
  repository: string;
  branch: string | null;
  provider: GitProvider | null;
  /** The user's settings with secrets (the provider token, the git identity). */
  settings: StoredSettings | null;
  /** Called as the work moves on (the start task shows it). */
  onStep?: (step: SetupStep) => Promise<void>;
  /** Called with each step's outcome (recorded as events). */
  onReport?: (report: SetupReport) => Promise<void>;
}

export type WorkspaceResult = { ok: true; workspace: ConversationWorkspace } | { ok: false; reason: string };

/** What the conversation service asks of the agent. */
export interface AgentPort {
  /** Prepares a conversation's workspace (clone, setup script, guidance) in its running sandbox. */
  prepareWorkspace(request: WorkspaceRequest): Promise<WorkspaceResult>;
  /** Start: the conversation can run (its sandbox is up, or a message arrived); run its loop if there is work. */
  wake(userId: string, conversationId: string): void;
  /**
   * Confirm: accepts or rejects the actions waiting for confirmation; accepted ones run, rejected
   * ones get an observation saying so. ConfirmationNotPending when nothing waits.
   */
  respondToConfirmation(
    userId: string,
    conversationId: string,
    decision: ConfirmationDecision,
  ): ResultAsync<ConfirmationEvent, ConfirmationFailure>;
  /** Stop: halts the agent between (or in the middle of) steps and waits for it; status paused if it was running. */
  pause(userId: string, conversationId: string, reason: string): Promise<void>;
  /** Stops the agent and forgets it (the conversation is being deleted). */
  forget(userId: string, conversationId: string): Promise<void>;
  /**
   * Recover, after a restart: closes tool calls the crash cut short and resumes conversations that
   * were running. With a lease store it also starts taking over, from then on, the conversations
   * of processes that died.
   */
  recover(): ResultAsync<RecoveryReport, DomainError>;
  /** How many agent loops are running now. */
  activeLoops(): number;
  /** What the agent does when a setting is unset: the limits it applies then (the V1 settings show them as the values in force). */
  readonly settingsDefaults: AgentSettingsDefaults;
  /** Stops every loop for a shutdown, leaving their status `running` so the next process's `recover()` resumes them. */
  shutdown(): Promise<void>;
}

/** The agent's own values for settings a user left unset. */
export interface AgentSettingsDefaults {
  /** Model calls per user message (`max_iterations`). */
  max_iterations: number;
  /** Events shown to the model before the condenser summarises older ones (`condenser_max_size`). */
  condenser_max_size: number;
}

/** What the agent needs from the domain (and the ports that are its own: the model, MCP). */
export interface AgentHost {
  conversations: Pick<ConversationStore, 'get' | 'update' | 'listByExecutionStatus'>;
  log: EventLog;
  /**
   * Which conversations this process may run: take the lease before a loop runs, append with its
   * fence (`log.appendAsOwner`), give it up after; `start` hears of leases lost and stop requests.
   * Without a lease store every conversation is this process's.
   */
  ownership: ConversationOwnership;
  sandboxes: Pick<SandboxService, 'liveRecords' | 'touch'>;
  runtime: SandboxRuntime;
  settings: Pick<SettingsService, 'loadWithSecrets'>;
  llm: LlmClient;
  /** Speaks to MCP servers; without it, a conversation with MCP servers configured gets a warning event and no MCP tools. */
  mcp?: McpConnector;
  clock: Clock;
  logger: Logger;
  /** Where the agent runs its loops, so `idle()` and `close()` wait for them. */
  background: BackgroundTasks;
}

/** Builds the agent for one service; `@acs/agent`'s `createAgent(options)` returns one. */
export type AgentFactory = (host: AgentHost) => AgentPort;
