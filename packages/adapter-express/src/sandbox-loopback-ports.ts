import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import ipaddr from 'ipaddr.js';
import type { Logger } from '@acs/core/ports';

/**
 * A sandbox's exposed URL as a loopback port of this server: `http://127.0.0.1:<port>`, for a
 * client that reached the service on loopback. A host name of its own
 * (`agent-server-<id>.localhost`) resolves only where the resolver knows `*.localhost` (browsers,
 * systemd-resolved, glibc with `libnss-myhostname`; not Debian as shipped, nor Python on macOS),
 * and the OpenHands SDK needs the URL at the root of a server (sandbox-proxy.ts). An address
 * resolves everywhere; each URL then needs a port of its own, served on the address the client
 * reached, by the same proxy as the host name (sandbox-proxy.ts), whatever Host a request says.
 *
 * Ports are opened when a URL is first given out, kept while the sandbox exists (paused, a port
 * answers 503 as the host name does), and closed when the sandbox is deleted (`forget`), found
 * gone (by a request, or the periodic check), or everything closes. At most `maxPorts` are open;
 * past that a URL is the host-name form (null here), with a warning logged once.
 *
 * A port belongs to this process: a URL given out by one replica of a service names a port on
 * that replica's machine.
 */
export interface LoopbackSandboxPorts {
  /** The URL serving sandbox `sandboxId`'s port `name` on loopback `address`, its port opened now if needed; null: use the host name. */
  urlOf(sandboxId: string, name: string, address: string): Promise<string | null>;
  /** The sandbox is gone: its ports close, and the WebSockets through them end. */
  forget(sandboxId: string): void;
  /** How many ports are open or opening. */
  size(): number;
  /** Closes every port and stops the periodic check; later `urlOf` calls answer null. */
  close(): void;
}

/** What a loopback port serves: one sandbox's exposed URL by name (e.g. AGENT_SERVER). */
export interface PortTarget {
  sandboxId: string;
  name: string;
}

export interface LoopbackPortsDeps {
  /** Serves a request on a port as the sandbox's host name would (sandbox-proxy.ts). */
  http(target: PortTarget, req: IncomingMessage, res: ServerResponse): void;
  upgrade(target: PortTarget, req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Whether the sandbox still exists (false: deleted or missing; null: cannot tell now). */
  exists(target: PortTarget): Promise<boolean | null>;
  logger: Logger;
  /** The most ports open at once. */
  maxPorts: number;
  /** How often every port's sandbox is checked, so a sandbox deleted elsewhere (another replica) frees its port. */
  checkIntervalMs: number;
}

/** One open (or opening) port. */
interface Port {
  readonly target: PortTarget;
  readonly server: Server;
  /** WebSockets taken on it: an upgraded socket is no longer the server's to close. */
  readonly upgraded: Set<Duplex>;
  /** Its URL once listening; null when it could not listen. */
  url: Promise<string | null>;
  closed: boolean;
}

interface PortsState {
  readonly deps: LoopbackPortsDeps;
  /** By `<sandbox id> <name> <address>`. */
  readonly ports: Map<string, Port>;
  closed: boolean;
  warnedFull: boolean;
  timer: NodeJS.Timeout | null;
  checking: boolean;
}

export function createLoopbackPorts(deps: LoopbackPortsDeps): LoopbackSandboxPorts {
  const state: PortsState = { deps, ports: new Map(), closed: false, warnedFull: false, timer: null, checking: false };
  return {
    urlOf: (sandboxId, name, address) => urlOf(state, { sandboxId, name }, address),
    forget: (sandboxId) => {
      for (const port of [...state.ports.values()]) if (port.target.sandboxId === sandboxId) closePort(state, port);
    },
    size: () => state.ports.size,
    close: () => {
      state.closed = true;
      if (state.timer) clearInterval(state.timer);
      state.timer = null;
      for (const port of [...state.ports.values()]) closePort(state, port);
    },
  };
}

/**
 * The loopback address a client reached, when a sandbox's URL for it may be a loopback port:
 * the origin it sees is a loopback host (`localhost`, `127.x.x.x`, `[::1]`) and its connection
 * came in on a loopback address of this server (so the client is on this machine). Null
 * otherwise (a proxy in front saying another host, a client elsewhere sending `Host: localhost`).
 */
export function loopbackAddressOf(origin: string, localAddress: string | null): string | null {
  if (localAddress === null || !ipaddr.isValid(localAddress)) return null;
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    return null;
  }
  if (!/^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/i.test(host)) return null;
  // An IPv4 client of a dual-stack listener shows as ::ffff:127.0.0.1.
  const address = ipaddr.process(localAddress);
  return address.range() === 'loopback' ? address.toString() : null;
}

async function urlOf(state: PortsState, target: PortTarget, address: string): Promise<string | null> {
  if (state.closed) return null;
  const key = `${target.sandboxId} ${target.name} ${address}`;
  const open = state.ports.get(key);
  if (open) return open.url;
  if (state.ports.size >= state.deps.maxPorts) {
    if (!state.warnedFull)
      state.deps.logger.warn(
        { maxPorts: state.deps.maxPorts },
        'every loopback port for sandbox URLs is in use: further sandbox URLs are host names (*.localhost), which not every resolver knows',
      );
    state.warnedFull = true;
    return null;
  }
  const port = openPort(state, target, key, address);
  state.ports.set(key, port);
  startChecks(state);
  return port.url;
}

function openPort(state: PortsState, target: PortTarget, key: string, address: string): Port {
  const { deps } = state;
  const server = createServer((req, res) => {
    withoutForwarding(req);
    deps.http(target, req, res);
  });
  const port: Port = { target, server, upgraded: new Set(), url: Promise.resolve(null), closed: false };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A reset while the upgrade is looked at must not become an unhandled 'error'.
    socket.on('error', (error: Error) => deps.logger.debug({ err: error.message }, 'sandbox port: socket error'));
    if (port.closed) {
      socket.destroy();
      return;
    }
    port.upgraded.add(socket);
    socket.once('close', () => port.upgraded.delete(socket));
    withoutForwarding(req);
    deps.upgrade(target, req, socket, head);
  });
  port.url = new Promise((resolve) => {
    const failed = (error: Error) => {
      deps.logger.warn(
        { sandboxId: target.sandboxId, address, err: error.message },
        'could not open a loopback port for a sandbox URL: its URL is a host name',
      );
      if (state.ports.get(key) === port) state.ports.delete(key);
      port.closed = true;
      resolve(null);
    };
    server.once('error', failed);
    server.listen({ port: 0, host: address }, () => {
      server.off('error', failed);
      server.on('error', (error: Error) => deps.logger.warn({ err: error.message }, 'sandbox port error'));
      if (port.closed) {
        server.close();
        resolve(null);
        return;
      }
      const { port: number } = server.address() as AddressInfo;
      resolve(`http://${address.includes(':') ? `[${address}]` : address}:${number}`);
    });
    // The service's own server keeps the process alive; a port must never be what does.
    server.unref();
  });
  return port;
}

/**
 * No proxy stands in front of a port (its clients are on this machine and connect to it), so
 * forwarding headers on its requests are the client's own claims: dropped, so `trustProxy`
 * cannot make them count (who the client is for the per-address limits, the origin it sees).
 */
function withoutForwarding(req: IncomingMessage): void {
  delete req.headers['x-forwarded-for'];
  delete req.headers['x-forwarded-host'];
  delete req.headers['x-forwarded-proto'];
  delete req.headers.forwarded;
}

function closePort(state: PortsState, port: Port): void {
  port.closed = true;
  for (const [key, open] of state.ports) if (open === port) state.ports.delete(key);
  // A port still opening closes once it listens (`openPort`).
  if (port.server.listening) {
    port.server.close();
    port.server.closeAllConnections();
  }
  for (const socket of port.upgraded) socket.destroy();
  port.upgraded.clear();
}

/** Checks every port's sandbox now and then (not overlapping), closing the ports of the ones gone. */
function startChecks(state: PortsState): void {
  if (state.timer || state.closed) return;
  state.timer = setInterval(() => {
    if (state.checking) return;
    state.checking = true;
    void checkPorts(state).finally(() => {
      state.checking = false;
    });
  }, state.deps.checkIntervalMs);
  state.timer.unref();
}

async function checkPorts(state: PortsState): Promise<void> {
  const targets = new Map<string, PortTarget>();
  for (const port of state.ports.values()) targets.set(`${port.target.sandboxId} ${port.target.name}`, port.target);
  for (const target of targets.values()) {
    const exists = await state.deps.exists(target).catch(() => null);
    if (exists === false)
      for (const port of [...state.ports.values()])
        if (port.target.sandboxId === target.sandboxId) closePort(state, port);
  }
}
