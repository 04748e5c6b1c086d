import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { createAcsRouter } from '@acs/adapter-express';
import { createMemoryPorts } from '@acs/adapter-memory';
import type { StandaloneConfig } from './config.js';

export interface StandaloneServer {
  readonly service: AgentConversationService;
  readonly logger: PinoLogger;
  /** Starts listening; resolves with the base URL. */
  listen(): Promise<string>;
  /** Stops accepting requests, finishes background work, closes. */
  close(): Promise<void>;
}

/** Composes the example server: Express + the in-memory adapters, from a config. */
export function createStandaloneServer(config: StandaloneConfig, destination?: DestinationStream): StandaloneServer {
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
  const ports = createMemoryPorts();
  const service = createAgentConversationService({ ...ports, logger }, { allowClientConversationIds: config.allowClientConversationIds });
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
      logger.info({ url, storage: 'memory', sandboxes: 'memory (fake runtime)', users: [...new Set(Object.values(config.apiKeys))] }, 'agent conversation service listening');
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
      logger.info({}, 'agent conversation service stopped');
    },
  };
}
