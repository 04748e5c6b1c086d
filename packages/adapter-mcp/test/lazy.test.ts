import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runWithModuleLog } from '@acs/testing';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/** The modules of @modelcontextprotocol/sdk a fresh Node process has loaded after running `script` (an ES module body). */
const sdkModulesLoadedBy = (script: string): string[] =>
  runWithModuleLog<string[]>(`${script}\nconsole.log(JSON.stringify(loaded()));`, {
    cwd: packageDir,
    match: /@modelcontextprotocol/,
  });

describe('createLazyMcpConnector', () => {
  it('loads nothing of the MCP SDK until a connection is made; the eager entry does', () => {
    expect(
      sdkModulesLoadedBy(
        `const { createLazyMcpConnector } = await import('@acs/adapter-mcp/lazy'); createLazyMcpConnector();`,
      ),
    ).toEqual([]);
    expect(sdkModulesLoadedBy(`await import('@acs/adapter-mcp');`).length).toBeGreaterThan(0);
  });

  it('loads it at the first connection (here one to a closed port, which fails)', () => {
    const loaded = sdkModulesLoadedBy(`
      const { createLazyMcpConnector } = await import('@acs/adapter-mcp/lazy');
      const failure = await createLazyMcpConnector().connect({ transport: 'shttp', url: 'http://127.0.0.1:9/mcp', api_key: null }, { signal: new AbortController().signal, timeoutMs: 5000 });
      if (!failure.isErr()) throw new Error('connected to port 9');
    `);
    expect(loaded.length).toBeGreaterThan(0);
  });
});
