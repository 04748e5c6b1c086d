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
import { openStorage, type StartPhase } from './storage.js';

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

/** Composes the example server: Express + storage (SQLite, PGlite, PostgreSQL or memory) + sandboxes (the runtime ACS_SANDBOXES names). */
export async function createStandaloneServer(
  config: StandaloneConfig,
  destination?: DestinationStream,
  onPhase: (phase: StartPhase) => void = () => {},
): Promise<StandaloneServer> {
  const logger = pino(
    {
      level: config.logLevel,
      // Nothing logs headers or bodies, but a redaction list guards against mistakes.
      redact: {
        paths: ['*.llm_api_key', '*.search_api_key', '*.sandbox_api_key', '*.token', '*.secret', '*.api_key', 'headers["x-session-api-key"]'],
        censor: '[redacted]',
      },
    },
    destination,
  );
  const storage = await openStorage(config, onPhase, (fields, message) => logger.warn(fields, message));
  let service: AgentConversationService | undefined;
  try {
    const generatedKey = config.generateDefaultKey ? await loadOrCreateApiKey(config.dataDir) : null;
    const apiKeys = { ...config.apiKeys, ...(generatedKey ? { [generatedKey.key]: 'default' } : {}) };
    onPhase('connecting to the sandbox runtime');
    // Only the runtime named is loaded (src/sandbox-runtimes.ts); one whose engine does not answer is
    // `unavailable`: the server still starts, and sandbox routes answer 503 saying why.
    const sandboxes = await config.sandboxes.runtime.open(commonSandboxSettings(config.sandboxes));
    if (sandboxes.unavailable) logger.warn({ reason: sandboxes.unavailable }, 'sandboxes are unavailable: sandbox routes will answer 503 until the server restarts with an engine');
    const ports = storage.ports;
    // Logged at start: the id its sandboxes are labelled with (`npm run sandboxes -- list`).
    const installation = (await ports.installation.identity()).match(
      (id) => id,
      (e) => {
        throw new Error(`cannot read this installation's id from storage: ${e.message}`);
      },
    );
    service = createAgentConversationService(
      {
        ...ports,
        sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
        runtime: sandboxes.runtime,
        llm: createOpenAiLlmClient({ timeoutMs: config.llm.timeoutMs, maxRetries: config.llm.maxRetries }),
        mcp: createLazyMcpConnector({ logger: (message, fields) => logger.debug(fields, message) }),
        gitProviders: createGitProviders({
          github: { apiUrl: config.git.githubApiUrl },
          gitlab: { apiUrl: config.git.gitlabApiUrl },
          allowedHosts: config.git.allowedHosts,
          allowHttp: config.git.allowHttp,
          timeoutMs: config.git.timeoutMs,
        }),
        agent: createAgent({
          defaultMaxIterations: config.llm.defaultMaxIterations,
          mcp: { connectTimeoutMs: config.llm.mcpConnectTimeoutMs, callTimeoutMs: config.llm.mcpCallTimeoutMs },
        }),
        logger,
      },
      {
        allowClientConversationIds: config.allowClientConversationIds,
        maxRunningSandboxesPerUser: config.sandboxes.maxRunningPerUser,
        atSandboxLimit: config.sandboxes.atLimit,
        ...(config.sandboxes.standaloneSpec ? { standaloneSpecId: config.sandboxes.standaloneSpec } : {}),
        ...(config.sandboxes.idlePauseMinutes > 0 ? { idlePauseAfterMs: config.sandboxes.idlePauseMinutes * 60_000 } : {}),
        idlePauseFinishedAfterMs: config.sandboxes.finishedIdlePauseMinutes * 60_000,
        // No engine: nothing to keep warm (every start answers 503 anyway).
        ...(sandboxes.unavailable ? {} : { sandboxPool: config.sandboxes.pool }),
      },
    );
    sandboxes.prepare?.(logger);
    if (!sandboxes.unavailable) {
      onPhase('recovering sandboxes and agents');
      // Adopt the runtime's sandboxes, then resume the agents that were running when the last process stopped.
      const recovered = await service.recover();
      if (recovered.isErr()) logger.warn({ error: recovered.error.type }, 'could not reconcile sandboxes and resume agents');
      else if (recovered.value.resumed > 0) logger.info(recovered.value, 'resumed agents that were running before the restart');
    }
    const streams = new AbortController();
    const app = express();
    app.disable('x-powered-by');
    const models = [...knownModels(), ...config.extraModels];
    const router = createAcsRouter(service, {
      apiKeys,
      logger,
      shutdownSignal: streams.signal,
      models: () => models,
      trustProxy: config.trustProxy,
      ...(config.sandboxUrlHost ? { sandboxUrlHost: config.sandboxUrlHost } : {}),
      ...(storage.signingSecret ? { secret: storage.signingSecret } : {}),
    });
    app.use(router);
    // Our console at /console, always; / is a user's UI build when ACS_UI_DIR names one (the API,
    // /socket.io and /sockets stay the router's), else it leads to the console.
    app.use('/console', createWebConsole());
    if (config.uiDir) app.use(serveUi(config.uiDir));
    else app.get('/', (_req, res) => res.redirect(302, 'console/'));
    let server: Server | undefined;
    const connections = new Set<Socket>();
    let waiting: (() => string) | null = null;
    const running = service;

    return {
      service: running,
      logger,
      generatedKey,
      waitingFor: () => waiting?.() ?? null,
      async listen() {
        server = app.listen(config.port, config.host);
        server.on('connection', (socket: Socket) => {
          connections.add(socket);
          socket.once('close', () => connections.delete(socket));
        });
        await once(server, 'listening');
        // A request line or headers over Node's limit get 431 with the JSON error body the document names.
        answerClientErrors(server);
        // The realtime channels of the OpenHands UI (socket.io and the agent-server event socket).
        router.attach(server);
        const { address, port } = server.address() as AddressInfo;
        const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
        logger.info(
          { url, ...storage.description, installation, sandboxes: sandboxes.description, ui: config.uiDir, users: [...new Set(Object.values(apiKeys))] },
          'agent conversation service listening',
        );
        return url;
      },
      async close() {
        // Event streams end first (clients resume with Last-Event-ID), so the HTTP server closes at once.
        streams.abort();
        if (server) {
          const http = server;
          waiting = () => `HTTP requests in progress to finish (${connections.size} connection${connections.size === 1 ? '' : 's'} open)`;
          const closed = once(http, 'close');
          http.close();
          http.closeIdleConnections();
          await closed;
        }
        waiting = () => `the agents to stop and background work to end (${running.pendingWork().join(', ') || 'nothing left'})`;
        await running.close();
        waiting = () => 'storage to close';
        await storage.close();
        waiting = null;
        logger.info({}, 'agent conversation service stopped');
      },
    };
  } catch (error) {
    await service?.close();
    await storage.close();
    throw error;
  }
}
