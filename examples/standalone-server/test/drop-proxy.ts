/**
 * A TCP proxy on 127.0.0.1 in front of a server, whose network can be cut: `down()` ends every
 * connection through it and refuses new ones until `up()`. A browser pointed at it sees what a
 * dropped network looks like to a page (the connections break, reconnects fail, then work).
 */
import { createConnection, createServer, type Socket } from 'node:net';
import { once } from 'node:events';

export interface DropProxy {
  url: string;
  down(): void;
  up(): void;
  close(): Promise<void>;
}

export async function startDropProxy(target: string): Promise<DropProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let cut = false;
  const server = createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: hostname, port: Number(port) });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    down: () => {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    up: () => {
      cut = false;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
