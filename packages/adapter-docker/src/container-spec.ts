/**
 * What a sandbox's container is made of: its labels (how a restarted service finds it), its
 * limits, its capabilities and mounts, and the ports it exposes (with the variables that tell
 * the container which to listen on).
 */
import { createServer } from 'node:net';
import type Docker from 'dockerode';
import { SANDBOX_CAPABILITIES, SANDBOX_LABELS, type RuntimeCreateRequest } from '@acs/core/ports';
import type { ExposedPort } from '@acs/core/schemas';

export { SANDBOX_CAPABILITIES } from '@acs/core/ports';

/**
 * Labels on every container this runtime creates, so a restarted service finds them: core's
 * (containers made before the installation label existed have none), and what a container
 * keeps on itself.
 */
export const LABELS = {
  ...SANDBOX_LABELS,
  workingDir: 'io.acs.working-dir',
  /** The container's exposed ports (JSON: name, port, health_path, and host_port on the host network), for its URLs after a restart too. */
  ports: 'io.acs.exposed-ports',
} as const;

export interface DockerResourceLimits {
  /** Memory limit in bytes (default 2 GiB). */
  memoryBytes?: number;
  /** CPUs (default 1). */
  cpus?: number;
  /** Maximum number of processes (default 512). */
  pids?: number;
}

export type NetworkMode = 'bridge' | 'none' | 'host';

/** An exposed port as the container's label keeps it. */
export interface PortLabel extends ExposedPort {
  /** On the host network: the host port the service listens on (given to it as ACS_PORT_<NAME>). */
  host_port?: number;
}

/** The limits with their defaults filled in. */
export const limitsWithDefaults = (limits: DockerResourceLimits = {}): Required<DockerResourceLimits> => ({
  memoryBytes: limits.memoryBytes ?? 2 * 1024 ** 3,
  cpus: limits.cpus ?? 1,
  pids: limits.pids ?? 512,
});

/** The engine's limits of a sandbox of this resource factor. */
export function containerLimits(limits: Required<DockerResourceLimits>, factor: number) {
  return {
    Memory: Math.round(limits.memoryBytes * factor),
    NanoCpus: Math.round(limits.cpus * factor * 1e9),
    PidsLimit: Math.round(limits.pids * factor),
  };
}

export interface ContainerPlan {
  name: string;
  volume: string;
  ports: readonly PortLabel[];
  networkMode: NetworkMode;
  /** What the engine is given as the network: on a bridge, the sandbox network's id. */
  network: string;
  limits: Required<DockerResourceLimits>;
  factor: number;
}

/** The labels that tie an engine object to its sandbox and installation. */
export const ownerLabels = (request: RuntimeCreateRequest): Record<string, string> => ({
  [LABELS.managed]: 'true',
  [LABELS.installation]: request.installation_id,
  [LABELS.sandbox]: request.sandbox_id,
});

/** The container of a new sandbox: never privileged, capabilities dropped to SANDBOX_CAPABILITIES, its workspace on a volume. */
export function containerOptions(request: RuntimeCreateRequest, plan: ContainerPlan): Docker.ContainerCreateOptions {
  const { spec } = request;
  const { ports } = plan;
  return {
    name: plan.name,
    Image: spec.image,
    ...(spec.command ? { Cmd: [...spec.command] } : {}),
    WorkingDir: spec.working_dir,
    Env: Object.entries({ ...portVariables(ports, plan.networkMode === 'host'), ...request.env }).map(
      ([k, v]) => `${k}=${v}`,
    ),
    Labels: {
      ...ownerLabels(request),
      [LABELS.user]: request.user_id,
      [LABELS.spec]: spec.id,
      [LABELS.workingDir]: spec.working_dir,
      [LABELS.ports]: JSON.stringify(ports),
    },
    ExposedPorts: Object.fromEntries(ports.map((p) => [`${p.port}/tcp`, {}])),
    HostConfig: {
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [...SANDBOX_CAPABILITIES],
      SecurityOpt: ['no-new-privileges'],
      Init: true,
      ...containerLimits(plan.limits, plan.factor),
      NetworkMode: plan.network,
      PortBindings:
        plan.networkMode === 'bridge'
          ? Object.fromEntries(ports.map((p) => [`${p.port}/tcp`, [{ HostIp: '127.0.0.1', HostPort: '' }]]))
          : {},
      Mounts: [{ Type: 'volume', Source: plan.volume, Target: spec.working_dir }],
      RestartPolicy: { Name: 'no' },
    },
  };
}

/**
 * The ports a new sandbox exposes: the runtime's and its spec's. On the host network each gets
 * a free port of this host, since every sandbox shares the host's ports.
 */
export async function portsFor(
  request: RuntimeCreateRequest,
  runtimePorts: readonly ExposedPort[],
  networkMode: NetworkMode,
): Promise<PortLabel[]> {
  const declared: ExposedPort[] = [...runtimePorts, ...(request.spec.exposed_ports ?? [])];
  const unique = declared.filter((p, i) => declared.findIndex((q) => q.name === p.name) === i);
  if (networkMode !== 'host') return unique.map((p) => ({ ...p }));
  const ports: PortLabel[] = [];
  for (const p of unique) ports.push({ ...p, host_port: await freeLoopbackPort() });
  return ports;
}

/**
 * What a container is told about its exposed ports: `ACS_PORT_<NAME>` (the port to listen on:
 * the declared one, or on the host network the host port it was given) and `ACS_BIND_HOST`
 * (on the host network only loopback, so nothing outside this host reaches it).
 */
function portVariables(ports: readonly PortLabel[], hostNetwork: boolean): Record<string, string> {
  if (ports.length === 0) return {};
  return {
    ACS_BIND_HOST: hostNetwork ? '127.0.0.1' : '0.0.0.0',
    ...Object.fromEntries(ports.map((p) => [`ACS_PORT_${p.name}`, String(p.host_port ?? p.port)])),
  };
}

/** A port of 127.0.0.1 nothing listens on now (the kernel's choice). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
