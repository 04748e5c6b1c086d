import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { answerClientErrors, createAcsRouter, serveUi } from '@acs/adapter-express';
import { createWebConsole } from '@acs/web-console';
import { createLazyMcpConnector } from '@acs/adapter-mcp/lazy';
import { createGitProviders } from '@acs/adapter-git-providers';
import { createOpenAiLlmClient, knownModels } from '@acs/adapter-openai';
import { StaticSandboxSpecCatalog } from '@acs/adapter-memory';
import { createAgent } from '@acs/agent';
import { loadOrCreateApiKey, type GeneratedApiKey } from './api-key.js';
import { commonSandboxSettings, type StandaloneConfig } from './config.js';
import { openStorage, type StartPhase, type Storage } from './storage.js';

export interface StandaloneServer {
  readonly service: AgentConversationService;
  readonly logger: PinoLogger;
  /** The key of user `default` when it was generated (SESSION_API_KEY unset); kept in the data directory. */
  readonly generatedKey: GeneratedApiKey | null;
  /** Starts listening; resolves with the base URL. */
  listen(): Promise<string>;
  /** Ends event streams, stops accepting requests, stops the agents, closes storage. */
  close(): Promise<void>;
  /** What close() is waiting for right now (for a shutdown that takes too long), or null. */
  waitingFor(): string | null;
}

/** The server's logger: the configured level, and the fields that could hold secrets redacted. */
function createLogger(config: StandaloneConfig, destination: DestinationStream | undefined): PinoLogger {
  return pino(
    {
      level: config.logLevel,
      // Nothing logs headers or bodies, but a redaction list guards against mistakes.
      redact: {
        paths: [
          '*.llm_api_key',
          '*.search_api_key',
          '*.sandbox_api_key',
          '*.token',
          '*.secret',
          '*.api_key',
          'headers["x-session-api-key"]',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/** The sandbox runtime the configuration names, opened: only it is loaded (src/sandbox-runtimes.ts). */
type OpenedRuntime = Awaited<ReturnType<StandaloneConfig['sandboxes']['runtime']['open']>>;

/** The service over the storage's ports, the runtime, the OpenAI adapter, MCP, git providers and the agent, with the configuration's limits. */
function composeService(
  config: StandaloneConfig,
  storage: Storage,
  sandboxes: OpenedRuntime,
  logger: PinoLogger,
): AgentConversationService {
  return createAgentConversationService(
    {
      ...storage.ports,
      sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
      runtime: sandboxes.runtime,
      llm: createOpenAiLlmClient({
        timeoutMs: config.llm.timeoutMs,
        maxRetries: config.llm.maxRetries,
        allowedHosts: config.llm.allowedHosts,
        allowedHostsName: 'ACS_LLM_ALLOWED_HOSTS',
      }),
      mcp: createLazyMcpConnector({
        logger: (message, fields) => logger.debug(fields, message),
        allowedHosts: config.llm.mcpAllowedHosts,
        allowedHostsName: 'ACS_MCP_ALLOWED_HOSTS',
      }),
      gitProviders: createGitProviders({
        github: { apiUrl: config.git.githubApiUrl },
        gitlab: { apiUrl: config.git.gitlabApiUrl },
        allowedHosts: config.git.allowedHosts,
        allowHttp: config.git.allowHttp,
        timeoutMs: config.git.timeoutMs,
      }),
      agent: createAgent({
        defaultMaxIterations: config.llm.defaultMaxIterations,
        maxModelCallsPerUser: config.llm.maxModelCallsPerUser,
        mcp: { connectTimeoutMs: config.llm.mcpConnectTimeoutMs, callTimeoutMs: config.llm.mcpCallTimeoutMs },
      }),
      logger,
    },
    {
      userSettingLimits: {
        maxResourceFactor: config.userLimits.maxResourceFactor,
        maxCondenserSize: config.userLimits.maxCondenserSize,
        maxIterations: config.userLimits.maxIterations,
        maxBudgetPerTask: config.userLimits.maxBudgetPerTask,
      },
      sandboxImages: { allowed: config.userLimits.allowedImages, listName: 'ACS_ALLOWED_IMAGES' },
      allowClientConversationIds: config.allowClientConversationIds,
      deviceKeyLifetimeMs: config.deviceKeyTtlDays === null ? null : config.deviceKeyTtlDays * 24 * 3600_000,
      // Checked when a URL is stored; the adapters check again before they connect.
      egress: {
        llmAllowedHosts: config.llm.allowedHosts && { hosts: config.llm.allowedHosts, name: 'ACS_LLM_ALLOWED_HOSTS' },
        mcpAllowedHosts: config.llm.mcpAllowedHosts && {
          hosts: config.llm.mcpAllowedHosts,
          name: 'ACS_MCP_ALLOWED_HOSTS',
        },
      },
      maxRunningSandboxesPerUser: config.sandboxes.maxRunningPerUser,
      atSandboxLimit: config.sandboxes.atLimit,
      ...(config.sandboxes.standaloneSpec ? { standaloneSpecId: config.sandboxes.standaloneSpec } : {}),
      ...(config.sandboxes.idlePauseMinutes > 0
        ? { idlePauseAfterMs: config.sandboxes.idlePauseMinutes * 60_000 }
        : {}),
      idlePauseFinishedAfterMs: config.sandboxes.finishedIdlePauseMinutes * 60_000,
      // No engine: nothing to keep warm (every start answers 503 anyway).
      ...(sandboxes.unavailable ? {} : { sandboxPool: config.sandboxes.pool }),
    },
  );
}

/** Adopts the runtime's sandboxes, then resumes the agents that were running when the last process stopped. */
async function recover(service: AgentConversationService, logger: PinoLogger): Promise<void> {
  const recovered = await service.recover();
  if (recovered.isErr())
    logger.warn({ error: recovered.error.type }, 'could not reconcile sandboxes and resume agents');
  else if (recovered.value.resumed > 0)
    logger.info(recovered.value, 'resumed agents that were running before the restart');
}

/**
 * The Express app: the service's router, our console at /console, and at / a user's UI build
 * when ACS_UI_DIR names one (the API, /socket.io and /sockets stay the router's), else a
 * redirect to the console.
 */
function createApp(
  config: StandaloneConfig,
  service: AgentConversationService,
  storage: Storage,
  apiKeys: Record<string, string>,
  logger: PinoLogger,
  streams: AbortSignal,
) {
  const app = express();
  app.disable('x-powered-by');
  const models = [...knownModels(), ...config.extraModels];
  const router = createAcsRouter(service, {
    apiKeys,
    logger,
    shutdownSignal: streams,
    models: () => models,
    trustProxy: config.trustProxy,
    ...(config.sandboxUrlHost ? { sandboxUrlHost: config.sandboxUrlHost } : {}),
    // Clients on loopback get sandbox URLs that resolve without `*.localhost` (ACS_SANDBOX_LOOPBACK_PORTS).
    loopbackSandboxPorts: config.sandboxLoopbackPorts,
    ...(storage.signingSecret ? { secret: storage.signingSecret } : {}),
  });
  app.use(router);
  app.use('/console', createWebConsole());
  if (config.uiDir) app.use(serveUi(config.uiDir));
  else app.get('/', (_req, res) => res.redirect(302, 'console/'));
  return { app, router };
}

/** Composes the example server: Express + storage (SQLite, PGlite, PostgreSQL or memory) + sandboxes (the runtime ACS_SANDBOXES names). */
export async function createStandaloneServer(
  config: StandaloneConfig,
  destination?: DestinationStream,
  onPhase: (phase: StartPhase) => void = () => {},
): Promise<StandaloneServer> {
  const logger = createLogger(config, destination);
  const storage = await openStorage(config, onPhase, (fields, message) => logger.warn(fields, message));
  let service: AgentConversationService | undefined;
  try {
    const generatedKey = config.generateDefaultKey ? await loadOrCreateApiKey(config.dataDir) : null;
    const apiKeys = { ...config.apiKeys, ...(generatedKey ? { [generatedKey.key]: 'default' } : {}) };
    onPhase('connecting to the sandbox runtime');
    // One whose engine does not answer is `unavailable`: the server still starts, and sandbox routes answer 503 saying why.
    const sandboxes = await config.sandboxes.runtime.open(commonSandboxSettings(config.sandboxes));
    if (sandboxes.unavailable)
      logger.warn(
        { reason: sandboxes.unavailable },
        'sandboxes are unavailable: sandbox routes will answer 503 until the server restarts with an engine',
      );
    // Logged at start: the id its sandboxes are labelled with (`npm run sandboxes -- list`).
    const identity = await storage.ports.installation.identity();
    if (identity.isErr()) throw new Error(`cannot read this installation's id from storage: ${identity.error.message}`);
    service = composeService(config, storage, sandboxes, logger);
    sandboxes.prepare?.(logger);
    if (!sandboxes.unavailable) {
      onPhase('recovering sandboxes and agents');
      await recover(service, logger);
    }
    const streams = new AbortController();
    const { app, router } = createApp(config, service, storage, apiKeys, logger, streams.signal);
    const startLog = {
      ...storage.description,
      installation: identity.value,
      sandboxes: sandboxes.description,
      ui: config.uiDir,
      users: [...new Set(Object.values(apiKeys))],
    };
    return serve({
      config,
      service,
      storage,
      logger,
      generatedKey,
      app,
      attach: (server) => router.attach(server),
      streams,
      startLog,
    });
  } catch (error) {
    await service?.close();
    await storage.close();
    throw error;
  }
}

/** What `serve` runs: the composed server's parts. */
interface Composed {
  config: StandaloneConfig;
  service: AgentConversationService;
  storage: Storage;
  logger: PinoLogger;
  generatedKey: GeneratedApiKey | null;
  app: express.Express;
  /** Hands the HTTP server to the router's realtime channels (socket.io, the agent-server event socket). */
  attach: (server: Server) => void;
  /** Aborted first at close: event streams end (clients resume with Last-Event-ID). */
  streams: AbortController;
  /** The fields of the "listening" log line. */
  startLog: Record<string, unknown>;
}

/** Listening and closing: the HTTP server, its connections, and what a slow close waits for. */
function serve(c: Composed): StandaloneServer {
  let server: Server | undefined;
  const connections = new Set<Socket>();
  let waiting: (() => string) | null = null;
  return {
    service: c.service,
    logger: c.logger,
    generatedKey: c.generatedKey,
    waitingFor: () => waiting?.() ?? null,
    async listen() {
      server = c.app.listen(c.config.port, c.config.host);
      server.on('connection', (socket: Socket) => {
        connections.add(socket);
        socket.once('close', () => connections.delete(socket));
      });
      await once(server, 'listening');
      // A request line or headers over Node's limit get 431 with the JSON error body the document names.
      answerClientErrors(server);
      c.attach(server);
      const { address, port } = server.address() as AddressInfo;
      const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
      c.logger.info({ url, ...c.startLog }, 'agent conversation service listening');
      return url;
    },
    async close() {
      // Event streams end first, so the HTTP server closes at once.
      c.streams.abort();
      if (server) {
        const http = server;
        waiting = () =>
          `HTTP requests in progress to finish (${connections.size} connection${connections.size === 1 ? '' : 's'} open)`;
        const closed = once(http, 'close');
        http.close();
        http.closeIdleConnections();
        await closed;
      }
      waiting = () =>
        `the agents to stop and background work to end (${c.service.pendingWork().join(', ') || 'nothing left'})`;
      await c.service.close();
      waiting = () => 'storage to close';
      await c.storage.close();
      waiting = null;
      c.logger.info({}, 'agent conversation service stopped');
    },
  };
}
