/**
 * What a sandbox's container is now, from the engine's inspection: its state, with "running"
 * only once it answers an exec and every exposed port with a health path answers it, and the
 * URLs of its exposed ports.
 */
import type Docker from 'dockerode';
import type { ExecResult, RuntimeObservation } from '@acs/core/ports';
import type { ExposedPort, ExposedUrl } from '@acs/core/schemas';
import { LABELS, type PortLabel } from './container-spec.js';

export interface ContainerWatch {
  /** The container's inspection; null when it does not exist. */
  inspect(sandboxId: string): Promise<Docker.ContainerInspectInfo | null>;
  /** Runs `true` in the container (within 10 s); null when it could not. */
  probe(sandboxId: string): Promise<ExecResult | null>;
  /** Sandboxes that have answered since this process started: they are up. */
  answered: Set<string>;
  /** The runtime's own exposed ports (what containers made before the ports label expose). */
  exposedPorts: readonly ExposedPort[];
}

export async function observeContainer(watch: ContainerWatch, sandboxId: string): Promise<RuntimeObservation> {
  const info = await watch.inspect(sandboxId);
  if (!info || info.State.Status === 'removing') {
    watch.answered.delete(sandboxId);
    return { state: 'missing', detail: 'its container no longer exists', exposed_urls: [] };
  }
  const state = info.State;
  if (state.Paused) return { state: 'paused', detail: null, exposed_urls: urlsOf(info, watch.exposedPorts) };
  if (state.Running) return observeRunning(watch, sandboxId, info);
  if (state.Status === 'created' || state.Status === 'restarting')
    return { state: 'starting', detail: null, exposed_urls: [] };
  watch.answered.delete(sandboxId);
  const why = [
    `its container ${state.Status === 'dead' ? 'is dead' : `exited with code ${state.ExitCode}`}`,
    state.OOMKilled ? 'killed for using more memory than its limit' : null,
    state.Error ? state.Error : null,
  ]
    .filter(Boolean)
    .join('; ');
  return { state: 'error', detail: why, exposed_urls: [] };
}

async function observeRunning(
  watch: ContainerWatch,
  sandboxId: string,
  info: Docker.ContainerInspectInfo,
): Promise<RuntimeObservation> {
  const running = (): RuntimeObservation => ({
    state: 'running',
    detail: null,
    exposed_urls: urlsOf(info, watch.exposedPorts),
  });
  if (watch.answered.has(sandboxId)) return running();
  const probe = await watch.probe(sandboxId);
  if (probe?.exit_code !== 0)
    return { state: 'starting', detail: 'waiting for the container to answer', exposed_urls: [] };
  const silent = await unansweredPort(info, watch.exposedPorts);
  if (silent)
    return {
      state: 'starting',
      detail: `waiting for ${silent.name} to answer ${silent.health_path ?? '/'}`,
      exposed_urls: [],
    };
  watch.answered.add(sandboxId);
  return running();
}

/** The container's exposed ports, from its label (containers made before the label: the runtime's own). */
function portsOf(info: Docker.ContainerInspectInfo, runtimePorts: readonly ExposedPort[]): PortLabel[] {
  const label = info.Config.Labels?.[LABELS.ports];
  if (label === undefined) return runtimePorts.map((p) => ({ ...p }));
  try {
    const parsed = JSON.parse(label) as unknown;
    return Array.isArray(parsed) ? (parsed as PortLabel[]) : [];
  } catch {
    return [];
  }
}

function urlsOf(info: Docker.ContainerInspectInfo, runtimePorts: readonly ExposedPort[]): ExposedUrl[] {
  const bindings = info.NetworkSettings?.Ports ?? {};
  return portsOf(info, runtimePorts).flatMap((p) => {
    if (p.host_port !== undefined) return [{ name: p.name, url: `http://127.0.0.1:${p.host_port}`, port: p.port }];
    const binding = bindings[`${p.port}/tcp`]?.find((b) => b.HostIp === '127.0.0.1') ?? bindings[`${p.port}/tcp`]?.[0];
    return binding ? [{ name: p.name, url: `http://127.0.0.1:${binding.HostPort}`, port: p.port }] : [];
  });
}

/** The first exposed port with a health path that does not answer it with 2xx yet (null: all answer). */
async function unansweredPort(
  info: Docker.ContainerInspectInfo,
  runtimePorts: readonly ExposedPort[],
): Promise<PortLabel | null> {
  const urls = urlsOf(info, runtimePorts);
  for (const port of portsOf(info, runtimePorts)) {
    if (!port.health_path) continue;
    const url = urls.find((u) => u.name === port.name)?.url;
    if (!url) return port;
    const answered = await fetch(`${url}${port.health_path}`, { signal: AbortSignal.timeout(2_000) }).then(
      async (response) => {
        await response.body?.cancel();
        return response.ok;
      },
      () => false,
    );
    if (!answered) return port;
  }
  return null;
}
