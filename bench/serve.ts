import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { AgentConversationService } from '@acs/core';
import { createAcsRouter } from '@acs/adapter-express';

/** Serves `service` on 127.0.0.1 at a free port; returns the base URL. Closing it is pushed onto `cleanups`. */
export async function serve(
  service: AgentConversationService,
  apiKeys: Readonly<Record<string, string>>,
  cleanups: (() => Promise<void>)[],
): Promise<string> {
  const app = express();
  app.disable('x-powered-by');
  app.use(createAcsRouter(service, { apiKeys }));
  const server: Server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(async () => {
    const closed = once(server, 'close');
    server.close();
    server.closeAllConnections();
    await closed;
    await service.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
