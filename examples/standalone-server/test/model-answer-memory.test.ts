/**
 * A user's model server cannot take the process's memory (issue 35, item 1): a server at the
 * user's `llm_base_url` that answers 200, chunked, in millions of one-byte chunks costs the
 * example server (a real process, fake sandboxes) memory in proportion to the body's bytes, not
 * to the number of pieces they came in. Before, each piece kept a Buffer of its own (about 100
 * bytes of heap for one byte of body): 4 million of them raised the RSS by about 500 MiB, and it
 * stayed there.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { body, call, startServer, waitFor, type Running } from './process.js';

const KEY = 'model-answer-memory-key-01234567';
/** The chunks of the flood: 4 million one-byte chunks are 24 MB on the wire and 4 MB of body. */
const FLOOD_CHUNKS = 4_000_000;

/** A model server that answers every request 200, chunked, with `chunks` chunks of one byte each, then ends. */
interface ChunkServer {
  baseUrl: string;
  /** Requests answered so far. */
  answered: () => number;
  close: () => Promise<void>;
}

async function startChunkServer(chunks: number): Promise<ChunkServer> {
  const flood = Buffer.from('1\r\nx\r\n'.repeat(chunks), 'latin1');
  const head = Buffer.from(
    'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n',
    'latin1',
  );
  let answered = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let received = '';
    socket.on('data', (data: Buffer) => {
      if (received.includes('\r\n\r\n')) return;
      received += data.toString('latin1');
      if (!received.includes('\r\n\r\n')) return;
      answered++;
      socket.write(head);
      socket.write(flood);
      socket.end('0\r\n\r\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    answered: () => answered,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const servers: ChunkServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

/** Starts counting the process's peak resident memory from now (the kernel resets VmHWM to VmRSS). */
function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
}

/** The process's resident memory now and at its peak, in MiB (from /proc). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

interface AppConversation {
  execution_status: string | null;
}

/** Stores the model server as the user's, starts a conversation, and waits until its agent has failed. */
async function conversationAgainst(server: Running, model: ChunkServer): Promise<void> {
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/flood',
      llm_api_key: 'sk-flood',
      llm_base_url: model.baseUrl,
    }),
  );
  const { conversation_id: id } = await body<{ conversation_id: string }>(
    call(server.url, '/api/conversations', KEY, { initial_user_msg: 'say something' }),
  );
  await waitFor(
    `the agent of ${id} to fail on the answer`,
    async () => {
      const [c] = await body<(AppConversation | null)[]>(call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY));
      return c?.execution_status === 'error' ? c : undefined;
    },
    120_000,
  ).catch((error: unknown) => {
    throw new Error(
      `${String(error)}; the model server answered ${model.answered()} requests.\n--- stderr ---\n${server.stderr()}\n--- stdout (tail) ---\n${server.stdout().slice(-4000)}`,
    );
  });
  expect(model.answered()).toBe(1);
}

describe('a model answer in millions of one-byte chunks', () => {
  it('costs the server memory in proportion to its bytes, not to its pieces', { timeout: 300_000 }, async () => {
    const server = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'fake',
      ACS_LLM_MAX_RETRIES: '0',
    });
    const pid = server.child.pid!;
    // A first conversation against a short answer of the same shape loads everything a conversation uses.
    const small = await startChunkServer(1000);
    servers.push(small);
    await conversationAgainst(server, small);

    const flood = await startChunkServer(FLOOD_CHUNKS);
    servers.push(flood);
    const before = memoryOf(pid);
    resetPeak(pid);
    await conversationAgainst(server, flood);
    const after = memoryOf(pid);
    const growth = { peak: after.peak - before.rss, kept: after.rss - before.rss };
    console.log(
      `RSS before ${before.rss.toFixed(0)} MiB; after ${JSON.stringify(after)}; growth ${JSON.stringify(growth)}`,
    );
    // 4 MB of body, read once into one buffer and once into a string; before, about 500 MiB.
    expect(
      growth.peak,
      `RSS grew from ${before.rss.toFixed(0)} to a peak of ${after.peak.toFixed(0)} MiB`,
    ).toBeLessThan(150);
  });
});
