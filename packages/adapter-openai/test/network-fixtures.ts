/**
 * What the tests of the adapter's network paths share: servers on loopback closed after each
 * test, a real forward proxy (`proxy`, the one undici is tested against), a private CA made with
 * openssl, the environment set for a while, and a child Node that runs a script and must end by
 * itself (NODE_EXTRA_CA_CERTS is read only when a process starts).
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProxy } from 'proxy';

export const portOf = (server: Server) => (server.address() as AddressInfo).port;

/** Listens on a free loopback port; `cleanups` closes it (and its sockets) after the test. */
export async function listen(server: Server, cleanups: (() => Promise<void> | void)[]): Promise<Server> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return server;
}

/** A forward proxy; `seen` lists each request it was asked to make or tunnel ("POST http://…", "CONNECT host:port"). */
export async function forwardProxy(cleanups: (() => Promise<void> | void)[]): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  const proxy = createProxy(createServer());
  proxy.authenticate = (req: IncomingMessage) => {
    seen.push(`${req.method} ${req.url}`);
    return true;
  };
  await listen(proxy, cleanups);
  return { url: `http://127.0.0.1:${portOf(proxy)}`, seen };
}

/** Runs `fn` with these environment variables set (a transport reads them when it is made), then puts them back. */
export async function withEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [name, value] of Object.entries(before))
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
  }
}

/** A private CA (`ca.pem`) and a certificate it signed for localhost and 127.0.0.1 (`key`, `cert`). */
export function privateCa(): { caFile: string; key: Buffer; cert: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'acs-tls-'));
  const pem = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=ACS test CA',
    '-keyout',
    pem('ca.key'),
    '-out',
    pem('ca.pem'),
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    pem('server.key'),
    '-out',
    pem('server.csr'),
  );
  execFileSync('sh', [
    '-c',
    `printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ${pem('san.ext')} && openssl x509 -req -in ${pem('server.csr')} -CA ${pem('ca.pem')} -CAkey ${pem('ca.key')} -CAcreateserial -days 2 -extfile ${pem('san.ext')} -out ${pem('server.pem')} 2>/dev/null`,
  ]);
  return { caFile: pem('ca.pem'), key: readFileSync(pem('server.key')), cert: readFileSync(pem('server.pem')) };
}

/**
 * Runs an ES module `script` in a child Node (the package's sources through tsx) with only `env`
 * (and PATH, HOME); its last line of output, parsed as JSON. `onOutput` sees the output as it
 * comes. The child must end by itself: past 60 s it is killed and the test fails with its output.
 */
export async function runChild(
  script: string,
  env: Record<string, string>,
  onOutput: (output: string) => void = () => undefined,
): Promise<unknown> {
  const child = spawn(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', '--input-type=module', '-e', script],
    {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const read = (chunk: Buffer) => {
    output += chunk.toString();
    onOutput(output);
  };
  child.stdout.on('data', read);
  child.stderr.on('data', read);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const deadline = setTimeout(
        () => reject(new Error(`the child did not end within 60 s; its output:\n${output}`)),
        60_000,
      );
      child.on('exit', (exitCode) => {
        clearTimeout(deadline);
        resolve(exitCode);
      });
    });
    if (code !== 0) throw new Error(`the child exited with ${code}:\n${output}`);
    return JSON.parse(output.trim().split('\n').at(-1)!) as unknown;
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** The package's entry, for a child's script to import. */
export const SOURCE_ENTRY = JSON.stringify(new URL('../src/index.ts', import.meta.url).href);
