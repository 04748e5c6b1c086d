import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runWithModuleLog } from '@acs/testing';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * Runs a router with its realtime channels attached in a fresh process, and says which of
 * socket.io's and engine.io's modules (of the server side) it had loaded before and after a V0
 * client came (`transport`: how that client connects).
 */
function serverModulesLoaded(transport: 'websocket' | 'polling'): { before: number; after: number; answer: string } {
  const program = `
    const count = () => loaded().length;
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
  return runWithModuleLog<{ before: number; after: number; answer: string }>(program, {
    cwd: packageDir,
    match: /node_modules\/(socket\.io|engine\.io)\//,
  });
}

describe('the V0 channel (socket.io) is loaded when a client first comes', () => {
  it.each(['websocket', 'polling'] as const)(
    'over %s: nothing of socket.io before, then it answers the client (here refusing a missing key)',
    (transport) => {
      const { before, after, answer } = serverModulesLoaded(transport);
      expect(before).toBe(0);
      expect(after).toBeGreaterThan(0);
      expect(answer).toMatch(/^refused: /);
    },
  );
});
