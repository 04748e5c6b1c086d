/**
 * Unauthenticated WebSocket frames hold no memory (issue 35, item 6), on the example server as a
 * process: 64 connections to `/sockets/events/<id>` without a key, each sending 16 frames of
 * 1 MiB, once raised the server's RSS by 608 MiB (each connection's frames were held while it
 * was refused and closed). Now a connection that has not authenticated may send one small
 * authentication frame and nothing more, and one address holds only a few such connections.
 * The server's peak RSS (VmHWM, reset just before) is read from /proc.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import WebSocket from 'ws';
import { describe, expect, it } from 'vitest';
import { startServer } from './process.js';

const KEY = 'tenant-key-0123456789abcdef';
const CONNECTIONS = 64;
const FRAMES = 16;
const FRAME_BYTES = 1024 * 1024;

const kib = (field: string, pid: number) =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);

/** One connection without a key that sends its frames as fast as it can; resolves with how it ended. */
function flood(url: string): Promise<'refused' | 'closed'> {
  const id = randomBytes(16).toString('hex');
  const ws = new WebSocket(`${url.replace('http', 'ws')}/sockets/events/${id}`);
  ws.on('error', () => {});
  return new Promise((resolve) => {
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      ws.terminate();
      resolve('refused');
    });
    ws.once('open', () => {
      const frame = Buffer.alloc(FRAME_BYTES, 0x61);
      for (let i = 0; i < FRAMES && ws.readyState === WebSocket.OPEN; i++) ws.send(frame);
    });
    // The server's close, or its dropping the connection; a client that never answers a close is
    // what the test plays, so a close frame from the server is not answered.
    ws.once('close', () => resolve('closed'));
  });
}

describe('unauthenticated WebSockets on the example server', () => {
  it('cost the server no memory in proportion to what they send', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory' });
    const pid = server.child.pid!;
    // "5" resets the peak (VmHWM) to the current RSS (Linux ≥ 4.0; the process is ours).
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    const before = kib('VmRSS', pid);
    const outcomes = await Promise.all(Array.from({ length: CONNECTIONS }, () => flood(server.url)));
    const peakGrowthMiB = (kib('VmHWM', pid) - before) / 1024;
    console.log(
      `${CONNECTIONS} connections × ${FRAMES} × 1 MiB without a key: RSS before ${Math.round(before / 1024)} MiB, peak growth ${peakGrowthMiB.toFixed(1)} MiB; ${outcomes.filter((o) => o === 'refused').length} refused at the upgrade`,
    );
    // Today's code grew by hundreds of MiB (608 measured); the bound leaves room for the
    // connections themselves and the garbage collector's pace, far below that.
    expect(peakGrowthMiB, server.stderr().slice(-2000)).toBeLessThan(100);
    // One address holds only a few connections that have not authenticated (8 by default); a
    // place freed when the server closes one of them (for its first large frame) may go to a
    // later connection, so a few more than 8 may be let in over the whole flood.
    const admitted = outcomes.filter((o) => o !== 'refused').length;
    expect(admitted).toBeGreaterThanOrEqual(1);
    expect(admitted).toBeLessThanOrEqual(16);
    // The server still answers.
    const health = await fetch(`${server.url}/api/settings`, { headers: { 'X-Session-API-Key': KEY } });
    expect([200, 404]).toContain(health.status);
  });
});
