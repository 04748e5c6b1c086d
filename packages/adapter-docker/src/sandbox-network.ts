import type Docker from 'dockerode';

/**
 * The bridge network every sandbox of an engine joins (network mode `bridge`), one per engine and
 * shared by every installation on it: inter-container traffic is off on it, so no sandbox opens a
 * connection to another, whoever's it is, while each still reaches the outside (masqueraded, as on
 * Docker's default bridge) and publishes its exposed ports on 127.0.0.1. One network, not one per
 * sandbox: each network takes one of the engine's address pools (about 30 with Docker's defaults).
 */
export const SANDBOX_NETWORK = 'acs-sandboxes';

/** The driver option that turns inter-container traffic off on a bridge network. */
const ICC_OPTION = 'com.docker.network.bridge.enable_icc';
/** The MTU of a network's interfaces; the engine's `mtu` setting gives it to its default bridge only. */
const MTU_OPTION = 'com.docker.network.driver.mtu';

export interface SandboxNetworkDeps {
  docker: Docker;
  /** The network's name on the engine (default {@link SANDBOX_NETWORK}). */
  name: string;
  /** Labels the network is made with (`io.acs.managed=true`). */
  labels: Readonly<Record<string, string>>;
}

export interface SandboxNetwork {
  /**
   * The id of the engine's sandbox network, made when the engine has none. Rejects, saying what
   * to do, when the networks of that name all let containers reach each other.
   */
  ensure(): Promise<string>;
}

/** The one look-up (and making) in flight, shared by the sandboxes that start meanwhile. */
interface Ensuring {
  current: Promise<string> | null;
}

/** Thrown when no network of the name can be used; its message says why and what to do. */
export class SandboxNetworkFailure extends Error {}

export function createSandboxNetwork(deps: SandboxNetworkDeps): SandboxNetwork {
  const ensuring: Ensuring = { current: null };
  return { ensure: () => ensureOnce(deps, ensuring) };
}

function ensureOnce(deps: SandboxNetworkDeps, ensuring: Ensuring): Promise<string> {
  ensuring.current ??= ensureNetwork(deps).finally(() => {
    ensuring.current = null;
  });
  return ensuring.current;
}

/**
 * Looked up on every call (one request), so a network removed meanwhile (`docker network prune`
 * while no sandbox ran) is made again. Made with the name checked by the engine; two services
 * making it at the same moment may still both succeed on engines before API 1.44, whose check is
 * best effort, and each may take its own (it lists before the other's is stored). Both keep their
 * sandboxes apart, and from then on every caller takes the oldest; the other stays, unused once
 * its sandboxes are gone, until `docker network prune`.
 */
async function ensureNetwork(deps: SandboxNetworkDeps): Promise<string> {
  const found = await networksNamed(deps);
  if (found.length > 0) return chooseNetwork(deps.name, found);
  const mtu = await defaultBridgeMtu(deps.docker);
  await deps.docker
    .createNetwork({
      Name: deps.name,
      CheckDuplicate: true,
      Driver: 'bridge',
      Options: { [ICC_OPTION]: 'false', ...(mtu ? { [MTU_OPTION]: mtu } : {}) },
      Labels: { ...deps.labels },
    })
    .catch((error: { statusCode?: number; message?: string; json?: { message?: string } | null }) => {
      // Made by another service (or another call of this one) since the look-up.
      if (error.statusCode === 409) return;
      // The engine's answer (no address pool left, say), with what was being done; a connection error as it is.
      if (error.statusCode === undefined) throw error;
      throw new SandboxNetworkFailure(
        `the Docker network ${deps.name} for sandboxes could not be made: ${error.json?.message ?? error.message}`,
      );
    });
  return chooseNetwork(deps.name, await networksNamed(deps));
}

/**
 * The MTU of the engine's default bridge, where it has one: sandboxes keep the MTU they had there
 * (an engine set to 1450 under a VPN or an overlay, say).
 */
async function defaultBridgeMtu(docker: Docker): Promise<string | undefined> {
  const bridge = await docker
    .getNetwork('bridge')
    .inspect()
    .catch(() => null);
  return bridge?.Options?.[MTU_OPTION];
}

/** The engine's networks of exactly this name (its filter matches parts of names). */
async function networksNamed(deps: SandboxNetworkDeps): Promise<Docker.NetworkInspectInfo[]> {
  const networks = await deps.docker.listNetworks({ filters: { name: [deps.name] } });
  return networks.filter((network) => network.Name === deps.name);
}

/** The oldest of the networks that keep containers apart (ties: the smaller id), so every caller takes the same. */
function chooseNetwork(name: string, networks: readonly Docker.NetworkInspectInfo[]): string {
  const apart = networks
    .filter((network) => network.Driver === 'bridge' && network.Options?.[ICC_OPTION] === 'false')
    .sort((a, b) => Date.parse(a.Created) - Date.parse(b.Created) || (a.Id < b.Id ? -1 : a.Id > b.Id ? 1 : 0));
  const chosen = apart[0];
  if (chosen) return chosen.Id;
  if (networks.length === 0)
    throw new SandboxNetworkFailure(
      `the Docker network ${name} for sandboxes could not be made: the engine lists none`,
    );
  throw new SandboxNetworkFailure(
    `the Docker network ${name} lets containers reach each other (it is not a bridge network with ${ICC_OPTION}=false), so sandboxes would not be kept apart; remove it (docker network rm ${name}) and the service makes its own, or make it with -o ${ICC_OPTION}=false`,
  );
}
