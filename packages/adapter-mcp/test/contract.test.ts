import { describeMcpConnectorContract } from '@acs/core/testing';
import { createMcpConnector } from '../src/index.js';
import { createLazyMcpConnector } from '../src/lazy.js';
import { closedPort } from '@acs/testing';
import { startShttpServer, startSseServer } from './servers.js';

for (const [transport, start, name, create] of [
  ['shttp', startShttpServer, 'MCP SDK connector', createMcpConnector],
  ['sse', startSseServer, 'MCP SDK connector', createMcpConnector],
  ['shttp', startShttpServer, 'lazy MCP connector', createLazyMcpConnector],
] as const) {
  describeMcpConnectorContract(`${name} over ${transport}`, async () => {
    const server = await start();
    const port = await closedPort();
    return {
      connector: create({ clientName: 'contract-tests' }),
      echoServer: { transport, url: server.url, api_key: null },
      unreachable: { transport, url: `http://127.0.0.1:${port}/mcp`, api_key: null },
      close: () => server.stop(),
    };
  });
}
