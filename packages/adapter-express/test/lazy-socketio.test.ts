import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a router with its realtime channels attached in a fresh process, and says which of
 * socket.io's and engine.io's modules (of the server side) it had loaded before and after a V0
 * client came (`transport`: how that client connects).
 */
function serverModulesLoaded(transport: 'websocket' | 'polling'): { before: number; after: number; answer: string } {
  const program = `
    import { registerHooks } from 'node:module';
    const loaded = new Set();
    registerHooks({ load(url, context, next) { loaded.add(url); return next(url, context); } });
    const count = () => [...loaded].filter((url) => /node_modules\\/(socket\\.io|engine\\.io)\\//.test(url)).length;
    const { startHarness } = await import('./test/harness.ts');
    const { io } = await import('socket.io-client');
    const h = await startHarness({ realtime: true });
    const before = count();
    const socket = io(h.baseUrl, { path: '/socket.io', transports: ['${transport}'], reconnection: false, query: { conversation_id: 'no-such-conversation' } });
    const answer = await new Promise((resolve) => {
      socket.on('connect_error', (error) => resolve('refused: ' + error.message));
      socket.on('connect', () => resolve('connected'));
    });
    socket.close();
    console.log(JSON.stringify({ before, after: count(), answer }));
    await h.close();
  `;
  const child = spawnSync(process.execPath, ['--conditions=@acs/source', '--import', 'tsx', '--input-type=module', '-e', program], { cwd: packageDir, encoding: 'utf8', timeout: 120_000 });
  if (child.status !== 0) throw new Error(`the child failed (${child.status ?? child.signal}):\n${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '{}') as { before: number; after: number; answer: string };
}

describe('the V0 channel (socket.io) is loaded when a client first comes', () => {
  it.each(['websocket', 'polling'] as const)('over %s: nothing of socket.io before, then it answers the client (here refusing a missing key)', (transport) => {
    const { before, after, answer } = serverModulesLoaded(transport);
    expect(before).toBe(0);
    expect(after).toBeGreaterThan(0);
    expect(answer).toMatch(/^refused: /);
  });
});
