import express from 'express';
import { createAgentConversationService } from '@acs/core';
import { createMemoryPorts } from '@acs/testing';
import { createAgent } from '@acs/agent';
import { createAcsRouter } from '@acs/adapter-express';

/** Stand-in for the host's own session store: bearer token → user id. */
const sessions = new Map([
  ['alice-session-token', 'alice'],
  ['bob-session-token', 'bob'],
]);

/** An existing app: its own routes and auth, with the agent service mounted under /agents. */
export function createHostApp() {
  const app = express();
  app.get('/', (_req, res) => {
    res.json({ app: 'host', agents: '/agents/api/openapi.json' });
  });

  const service = createAgentConversationService({ ...createMemoryPorts(), agent: createAgent() });
  app.use(
    '/agents',
    createAcsRouter(service, {
      // The host decides who is calling; the library scopes every record to that user.
      authenticate: (req) => sessions.get(req.get('authorization')?.replace(/^Bearer /, '') ?? '') ?? null,
    }),
  );
  return { app, service };
}
