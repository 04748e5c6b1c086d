import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import {
  createAgentConversationService,
  unavailableSandboxRuntime,
  type AgentConversationService,
  type AgentConversationServicePorts,
  type SandboxRuntime,
} from '@acs/core';
import { createDockerRuntime } from '@acs/adapter-docker';
import { createAcsRouter } from '@acs/adapter-express';
import { createMcpConnector } from '@acs/adapter-mcp';
import { createOpenAiLlmClient } from '@acs/adapter-openai';
import { createMemoryPorts, FakeSandboxRuntime, StaticSandboxSpecCatalog } from '@acs/adapter-memory';
import { createPostgresStorage } from '@acs/adapter-postgres';
import type { SandboxConfig, StandaloneConfig } from './config.js';
import { loadCipher } from './secret-key.js';

export interface StandaloneServer {
  readonly service: AgentConversationService;
  readonly logger: PinoLogger;
  /** Starts listening; resolves with the base URL. */
  listen(): Promise<string>;
  /** Stops accepting requests, finishes background work, closes. */
  close(): Promise<void>;
}

interface Storage {
  ports: Partial<AgentConversationServicePorts>;
  description: Record<string, unknown>;
  close(): Promise<void>;
}

/** The configured storage, migrated and with its secret key verified; throws with a clear message otherwise. */
async function openStorage(config: StandaloneConfig): Promise<Storage> {
  if (config.storage.kind === 'memory') {
    return { ports: {}, description: { storage: 'memory (nothing survives a restart)' }, close: async () => {} };
  }
  const { cipher, source, keyFile } = await loadCipher(config);
  const keyInfo = { secretKey: source, secretKeyId: cipher.currentKeyId, ...(keyFile ? { secretKeyFile: keyFile } : {}) };
  if (config.storage.kind === 'postgres') {
    const storage = await createPostgresStorage({ db: config.storage.url, cipher, migrations: 'auto' });
    return { ports: storage, description: { storage: 'postgres', ...keyInfo }, close: () => storage.close() };
  }
  const directory = join(config.dataDir, 'pglite');
  const pglite = await PGlite.create(directory);
  try {
    const storage = await createPostgresStorage({ db: pglite, cipher, migrations: 'auto' });
    return { ports: storage, description: { storage: 'pglite', dataDir: directory, ...keyInfo }, close: () => pglite.close() };
  } catch (error) {
    await pglite.close();
    throw error;
  }
}

/** Docker when an engine answers; otherwise a runtime that answers 503 saying why (the server still starts). */
async function openSandboxRuntime(config: SandboxConfig): Promise<{ runtime: SandboxRuntime; description: string; unavailable: string | null }> {
  if (config.runtime === 'fake') return { runtime: new FakeSandboxRuntime(), description: 'fake (in memory, runs nothing)', unavailable: null };
  try {
    const runtime = await createDockerRuntime({
      limits: { memoryBytes: config.memoryMb * 1024 * 1024, cpus: config.cpus, pids: config.pids },
      networkMode: config.network,
    });
    return { runtime, description: `docker (engine ${runtime.connection.engineVersion}, API ${runtime.connection.apiVersion})`, unavailable: null };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { runtime: unavailableSandboxRuntime(reason), description: 'unavailable', unavailable: reason };
  }
}

/** Composes the example server: Express + storage (PGlite, PostgreSQL or memory) + sandboxes (Docker, or the fake). */
export async function createStandaloneServer(config: StandaloneConfig, destination?: DestinationStream): Promise<StandaloneServer> {
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
  const storage = await openStorage(config);
  const sandboxes = await openSandboxRuntime(config.sandboxes);
  if (sandboxes.unavailable) logger.warn({ reason: sandboxes.unavailable }, 'sandboxes are unavailable: sandbox routes will answer 503 until the server restarts with an engine');
  const service = createAgentConversationService(
    {
      ...createMemoryPorts(),
      ...storage.ports,
      sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
      runtime: sandboxes.runtime,
      llm: createOpenAiLlmClient({ timeoutMs: config.llm.timeoutMs, maxRetries: config.llm.maxRetries }),
      mcp: createMcpConnector({ logger: (message, fields) => logger.debug(fields, message) }),
      logger,
    },
    {
      agent: {
        defaultMaxIterations: config.llm.defaultMaxIterations,
        mcp: { connectTimeoutMs: config.llm.mcpConnectTimeoutMs, callTimeoutMs: config.llm.mcpCallTimeoutMs },
      },
      allowClientConversationIds: config.allowClientConversationIds,
      maxRunningSandboxesPerUser: config.sandboxes.maxRunningPerUser,
      atSandboxLimit: config.sandboxes.pauseOldestAtLimit ? 'pause_oldest' : 'refuse',
      ...(config.sandboxes.idlePauseMinutes > 0 ? { idlePauseAfterMs: config.sandboxes.idlePauseMinutes * 60_000 } : {}),
    },
  );
  if (!sandboxes.unavailable) {
    // Adopt the runtime's sandboxes, then resume the agents that were running when the last process stopped.
    const recovered = await service.recover();
    if (recovered.isErr()) logger.warn({ error: recovered.error.type }, 'could not reconcile sandboxes and resume agents');
    else if (recovered.value.resumed > 0) logger.info(recovered.value, 'resumed agents that were running before the restart');
  }
  const app = express();
  app.disable('x-powered-by');
  app.use(createAcsRouter(service, { apiKeys: config.apiKeys, logger }));
  let server: Server | undefined;

  return {
    service,
    logger,
    async listen() {
      server = app.listen(config.port, config.host);
      await once(server, 'listening');
      const { address, port } = server.address() as AddressInfo;
      const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
      logger.info(
        { url, ...storage.description, sandboxes: sandboxes.description, users: [...new Set(Object.values(config.apiKeys))] },
        'agent conversation service listening',
      );
      return url;
    },
    async close() {
      if (server) {
        const closed = once(server, 'close');
        server.close();
        server.closeIdleConnections();
        const force = setTimeout(() => server?.closeAllConnections(), 5_000);
        await closed;
        clearTimeout(force);
      }
      await service.close();
      await storage.close();
      logger.info({}, 'agent conversation service stopped');
    },
  };
}
