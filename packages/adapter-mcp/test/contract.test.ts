import { describeMcpConnectorContract } from '@acs/core/testing';
import { createMcpConnector } from '../src/index.js';
import { closedPort } from '@acs/testing';
import { startShttpServer, startSseServer } from './servers.js';

for (const [transport, start] of [
  ['shttp', startShttpServer],
  ['sse', startSseServer],
] as const) {
  describeMcpConnectorContract(`MCP SDK connector over ${transport}`, async () => {
    const server = await start();
    const port = await closedPort();
    return {
      connector: createMcpConnector({ clientName: 'contract-tests' }),
      echoServer: { transport, url: server.url, api_key: null },
      unreachable: { transport, url: `http://127.0.0.1:${port}/mcp`, api_key: null },
      close: () => server.stop(),
    };
  });
}
