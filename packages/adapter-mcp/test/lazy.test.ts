import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/** The modules of @modelcontextprotocol/sdk a fresh Node process has loaded after running `script` (an ES module body). */
function sdkModulesLoadedBy(script: string): string[] {
  const program = `
    import { registerHooks } from 'node:module';
    const loaded = [];
    registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
    ${script}
    console.log(JSON.stringify(loaded.filter((url) => url.includes('@modelcontextprotocol'))));
  `;
  const child = spawnSync(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', '--input-type=module', '-e', program], { cwd: packageDir, encoding: 'utf8', timeout: 120_000 });
  if (child.status !== 0) throw new Error(`the child failed (${child.status ?? child.signal}):\n${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '[]') as string[];
}

describe('createLazyMcpConnector', () => {
  it('loads nothing of the MCP SDK until a connection is made; the eager entry does', () => {
    expect(sdkModulesLoadedBy(`const { createLazyMcpConnector } = await import('@acs/adapter-mcp/lazy'); createLazyMcpConnector();`)).toEqual([]);
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
