import { execFile, spawn } from 'node:child_process';
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
  const tag = randomBytes(3).toString('hex');
  const root = `/var/lib/acs-test-engine-${tag}`;
  // Short: containerd's sockets live under the exec root, and a unix socket path has at most 107 bytes.
  const execRoot = `/run/acs-te-${tag}`;
  const socket = `/run/acs-te-${tag}.sock`;
  const logFile = `/tmp/acs-test-engine-${tag}.log`;
  // A bridge of its own: with `--bridge none` a second dockerd deletes the machine's docker0
  // (the first engine's containers then fail to start: "could not find bridge docker0").
  const bridge = `acsbr${tag}`;
  await run('sh', [
    '-c',
    `ip link add "$0" type bridge && ip addr add "$1" dev "$0" && ip link set "$0" up`,
    bridge,
    `10.254.${randomBytes(1)[0]!}.1/24`,
  ]).catch((error: unknown) => {
    throw new Error(
      `could not make a network bridge for a second dockerd (needs root and iproute2): ${(error as Error).message}`,
      { cause: error },
    );
  });
  mkdirSync(root, { recursive: true });
  mkdirSync(execRoot, { recursive: true });
  const tlsDir = options.tls ? `${root}-tls` : null;
  const tcp = options.tls ? `tcp://127.0.0.1:${await freePort()}` : null;
  if (tlsDir) await makeCertificates(tlsDir);
  const output = openSync(logFile, 'w');
  const child = spawn(
    'dockerd',
    [
      '--host',
      `unix://${socket}`,
      ...(tcp && tlsDir
        ? [
            '--host',
            tcp,
            '--tlsverify',
            '--tlscacert',
            `${tlsDir}/ca.pem`,
            '--tlscert',
            `${tlsDir}/server-cert.pem`,
            '--tlskey',
            `${tlsDir}/server-key.pem`,
          ]
        : []),
      '--data-root',
      root,
      '--exec-root',
      execRoot,
      '--pidfile',
      `${execRoot}/dockerd.pid`,
      '--bridge',
      bridge,
      '--iptables=false',
      '--ip6tables=false',
      '--ip-masq=false',
    ],
    { stdio: ['ignore', output, output] },
  );
  const log = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '(no log)';
    }
  };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const ended = await Promise.race([
        exited.then(() => true),
        new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 60_000)),
      ]);
      if (!ended) child.kill('SIGKILL');
      await exited;
    }
    await run('ip', ['link', 'del', bridge]).catch(() => undefined);
    rmSync(socket, { force: true });
    rmSync(execRoot, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
    if (tlsDir) rmSync(tlsDir, { recursive: true, force: true });
    rmSync(logFile, { force: true });
  };
  try {
    const deadline = Date.now() + (options.deadlineMs ?? 90_000);
    for (;;) {
      if (
        await run('docker', ['-H', `unix://${socket}`, 'version'], { timeout: 10_000 }).then(
          () => true,
          () => false,
        )
      )
        break;
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        throw new Error(
          `a second dockerd did not answer on ${socket} (${child.exitCode !== null || child.signalCode !== null ? `it exited: ${child.exitCode ?? child.signalCode}` : 'still starting after the deadline'}); its log:\n${log().slice(-3000)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    for (const image of options.images ?? []) {
      await run('sh', ['-c', `docker save "$0" | docker -H "unix://$1" load`, image, socket], {
        timeout: 300_000,
      }).catch((error: unknown) => {
        throw new Error(`could not copy ${image} into the second engine: ${(error as Error).message}`, {
          cause: error,
        });
      });
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { socket, tcp, tlsDir, pid: child.pid!, log, stop };
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
