import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A Docker engine of a test's own, beside the machine's: its socket, and how to end it. */
export interface DockerEngineProcess {
  /** The engine's socket path (`unix://` + this for DOCKER_HOST or ACS_DOCKER_HOSTS). */
  readonly socket: string;
  /** With `tls`: where the engine also listens, `tcp://127.0.0.1:<port>`, verifying client certificates. */
  readonly tcp: string | null;
  /** With `tls`: a directory with the client's `ca.pem`, `cert.pem` and `key.pem` (as DOCKER_CERT_PATH). */
  readonly tlsDir: string | null;
  readonly pid: number;
  /** What the engine logged so far. */
  log(): string;
  /** Ends the engine (SIGTERM, then SIGKILL after 60 s) and removes its directories; its containers die with it. */
  stop(): Promise<void>;
}

/**
 * Starts a second `dockerd` (Debian's docker.io; needs root) with its own socket, data root,
 * exec root and network bridge, and no iptables rules, so it never touches the machine's engine
 * or network (its containers are meant to run with network mode `none`); copies `images` into it from the machine's engine (`docker save | docker load`,
 * nothing is pulled). Waits up to `deadlineMs` (90 s) for it to answer and fails with its log.
 */
export async function startDockerEngine(
  options: { images?: readonly string[]; deadlineMs?: number; tls?: boolean } = {},
): Promise<DockerEngineProcess> {
  const paths = enginePaths(randomBytes(3).toString('hex'), options.tls ?? false);
  await makeBridge(paths.bridge);
  mkdirSync(paths.root, { recursive: true });
  mkdirSync(paths.execRoot, { recursive: true });
  const tcp = paths.tlsDir ? `tcp://127.0.0.1:${await freePort()}` : null;
  if (paths.tlsDir) await makeCertificates(paths.tlsDir);
  const child = spawnDockerd(paths, tcp);
  const log = () => readLog(paths.logFile);
  const stop = engineStopper(child, paths);
  try {
    await waitForEngine(child, paths.socket, options.deadlineMs ?? 90_000, log);
    await copyImages(paths.socket, options.images ?? []);
  } catch (error) {
    await stop();
    throw error;
  }
  return { socket: paths.socket, tcp, tlsDir: paths.tlsDir, pid: child.pid!, log, stop };
}

/** Where one test engine keeps its things, each named from the engine's random tag. */
interface EnginePaths {
  /** Its data root. */
  readonly root: string;
  readonly execRoot: string;
  readonly socket: string;
  /** Where dockerd's output goes (read by `log()`). */
  readonly logFile: string;
  /** The name of its network bridge. */
  readonly bridge: string;
  /** With `tls`: the certificates' directory (server's and client's). */
  readonly tlsDir: string | null;
}

function enginePaths(tag: string, tls: boolean): EnginePaths {
  const root = `/var/lib/acs-test-engine-${tag}`;
  return {
    root,
    // Short: containerd's sockets live under the exec root, and a unix socket path has at most 107 bytes.
    execRoot: `/run/acs-te-${tag}`,
    socket: `/run/acs-te-${tag}.sock`,
    logFile: `/tmp/acs-test-engine-${tag}.log`,
    // A bridge of its own: with `--bridge none` a second dockerd deletes the machine's docker0
    // (the first engine's containers then fail to start: "could not find bridge docker0").
    bridge: `acsbr${tag}`,
    tlsDir: tls ? `${root}-tls` : null,
  };
}

/** Adds and brings up a network bridge `name` with an address in a random 10.254.x.0/24. */
async function makeBridge(name: string): Promise<void> {
  await run('sh', [
    '-c',
    `ip link add "$0" type bridge && ip addr add "$1" dev "$0" && ip link set "$0" up`,
    name,
    `10.254.${randomBytes(1)[0]!}.1/24`,
  ]).catch((error: unknown) => {
    throw new Error(
      `could not make a network bridge for a second dockerd (needs root and iproute2): ${(error as Error).message}`,
      { cause: error },
    );
  });
}

/** Starts dockerd on the engine's own paths and bridge, without iptables rules, its output into the log file. */
function spawnDockerd(paths: EnginePaths, tcp: string | null): ChildProcess {
  const output = openSync(paths.logFile, 'w');
  return spawn(
    'dockerd',
    [
      '--host',
      `unix://${paths.socket}`,
      ...(tcp && paths.tlsDir ? tlsArgs(tcp, paths.tlsDir) : []),
      '--data-root',
      paths.root,
      '--exec-root',
      paths.execRoot,
      '--pidfile',
      `${paths.execRoot}/dockerd.pid`,
      '--bridge',
      paths.bridge,
      '--iptables=false',
      '--ip6tables=false',
      '--ip-masq=false',
    ],
    { stdio: ['ignore', output, output] },
  );
}

/** dockerd's arguments to also listen on `tcp`, verifying client certificates against the CA in `tlsDir`. */
function tlsArgs(tcp: string, tlsDir: string): string[] {
  return [
    '--host',
    tcp,
    '--tlsverify',
    '--tlscacert',
    `${tlsDir}/ca.pem`,
    '--tlscert',
    `${tlsDir}/server-cert.pem`,
    '--tlskey',
    `${tlsDir}/server-key.pem`,
  ];
}

function readLog(logFile: string): string {
  try {
    return readFileSync(logFile, 'utf8');
  } catch {
    return '(no log)';
  }
}

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** The engine's `stop`: ends dockerd and removes what it was given, once however often it is called. */
function engineStopper(child: ChildProcess, paths: EnginePaths): () => Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    await endDockerd(child, exited);
    await removeEngine(paths);
  };
}

/** SIGTERM, then SIGKILL if it has not exited after 60 s; resolves once it has exited. */
async function endDockerd(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (hasExited(child)) return;
  child.kill('SIGTERM');
  const ended = await Promise.race([
    exited.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 60_000)),
  ]);
  if (!ended) child.kill('SIGKILL');
  await exited;
}

/** Deletes the engine's bridge and removes its socket, directories and log. */
async function removeEngine(paths: EnginePaths): Promise<void> {
  await run('ip', ['link', 'del', paths.bridge]).catch(() => undefined);
  rmSync(paths.socket, { force: true });
  rmSync(paths.execRoot, { recursive: true, force: true });
  rmSync(paths.root, { recursive: true, force: true });
  if (paths.tlsDir) rmSync(paths.tlsDir, { recursive: true, force: true });
  rmSync(paths.logFile, { force: true });
}

/** Polls `docker version` on the socket until it answers; throws with the log if dockerd exits or the deadline passes. */
async function waitForEngine(
  child: ChildProcess,
  socket: string,
  deadlineMs: number,
  log: () => string,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const answered = await run('docker', ['-H', `unix://${socket}`, 'version'], { timeout: 10_000 }).then(
      () => true,
      () => false,
    );
    if (answered) return;
    if (hasExited(child) || Date.now() > deadline) {
      throw new Error(
        `a second dockerd did not answer on ${socket} (${hasExited(child) ? `it exited: ${child.exitCode ?? child.signalCode}` : 'still starting after the deadline'}); its log:\n${log().slice(-3000)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Copies each image from the machine's engine into the one on `socket` (`docker save | docker load`). */
async function copyImages(socket: string, images: readonly string[]): Promise<void> {
  for (const image of images) {
    await run('sh', ['-c', `docker save "$0" | docker -H "unix://$1" load`, image, socket], {
      timeout: 300_000,
    }).catch((error: unknown) => {
      throw new Error(`could not copy ${image} into the second engine: ${(error as Error).message}`, {
        cause: error,
      });
    });
  }
}

/** A port nothing listens on now (on loopback). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, with openssl, for one day. */
async function makeCertificates(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const script = [
    'set -e',
    'openssl genrsa -out ca-key.pem 2048',
    'openssl req -new -x509 -days 1 -key ca-key.pem -sha256 -subj /CN=acs-test-ca -out ca.pem',
    'openssl genrsa -out server-key.pem 2048',
    'openssl req -new -subj /CN=127.0.0.1 -key server-key.pem -out server.csr',
    'printf "subjectAltName = IP:127.0.0.1\\nextendedKeyUsage = serverAuth\\n" > server.cnf',
    'openssl x509 -req -days 1 -sha256 -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -extfile server.cnf',
    'openssl genrsa -out key.pem 2048',
    'openssl req -new -subj /CN=acs-test-client -key key.pem -out client.csr',
    'printf "extendedKeyUsage = clientAuth\\n" > client.cnf',
    'openssl x509 -req -days 1 -sha256 -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -extfile client.cnf',
  ].join('\n');
  await run('sh', ['-c', script], { cwd: dir }).catch((error: unknown) => {
    throw new Error(`could not make TLS certificates with openssl: ${(error as Error).message}`, { cause: error });
  });
}
