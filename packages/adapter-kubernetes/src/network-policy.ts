import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type NetworkingV1Api,
  type V1NetworkPolicy,
  type V1NetworkPolicyPeer,
} from '@kubernetes/client-node';
import type { Logger } from '@acs/core/ports';
import { ANNOTATIONS, LABELS, labelValue } from './manifest.js';

/**
 * The addresses sandbox pods may not reach by default: the private ranges (RFC 1918), the shared
 * range (RFC 6598, which some clusters use for pods), link-local (the cloud metadata address
 * 169.254.169.254), and IPv6's unique-local and link-local ranges. The pods, services and nodes
 * of nearly every cluster are in them; a namespaced Role cannot read the cluster's own ranges.
 */
export const DEFAULT_EGRESS_EXCEPT: readonly string[] = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10',
  '169.254.0.0/16',
  'fc00::/7',
  'fe80::/10',
];

/** Who applies the policy (server-side apply's field manager). */
const FIELD_MANAGER = 'acs-sandbox-runtime';
/** After a failure, how long before the next create or list tries again (and warns again): not every reconcile round. */
export const POLICY_RETRY_MS = 10 * 60_000;

export interface NetworkPolicyOptions {
  /** Objects of this runtime are named with it (`acs-`): the policy is `<prefix>sandboxes-<installation>`. */
  namePrefix: string;
  /** Address ranges (CIDR) sandbox pods may not reach; everything else outside the cluster they may. */
  egressExcept: readonly string[];
}

/** The policy's name: the installation id when it is a DNS label, else the start of its SHA-256. */
export function networkPolicyName(namePrefix: string, installationId: string): string {
  const id = /^[a-z0-9]([-a-z0-9]{0,39}[a-z0-9])?$/.test(installationId)
    ? installationId
    : `h-${createHash('sha256').update(installationId).digest('hex').slice(0, 40)}`;
  return `${namePrefix}sandboxes-${id}`;
}

/**
 * The NetworkPolicy of an installation's sandbox pods (those with its `io.acs.installation-id`
 * label). Ingress: none (commands and files reach a pod through the API server and the kubelet,
 * which no policy governs; the runtime addresses no pod's IP). Egress: DNS to the cluster's DNS
 * pods (`k8s-app: kube-dns` in `kube-system`), and any address outside `egressExcept`. A policy
 * only allows, so "everything but the cluster" is an ipBlock of everything with the cluster's
 * ranges excepted: on plugins whose ipBlocks also match pod IPs (Calico), the exception is what
 * keeps sandboxes off other pods and the service's; on those where they match only addresses
 * outside the cluster (Cilium), no rule allows other pods at all. Either way no sandbox pod
 * accepts a connection from another, as none is allowed in.
 */
export function sandboxNetworkPolicy(installationId: string, options: NetworkPolicyOptions): V1NetworkPolicy {
  const selected = { [LABELS.managed]: 'true', [LABELS.installation]: labelValue(installationId) };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: networkPolicyName(options.namePrefix, installationId),
      labels: { ...selected },
      annotations: { [ANNOTATIONS.installation]: installationId },
    },
    spec: {
      podSelector: { matchLabels: selected },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [
        {
          to: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
              podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
            },
          ],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        { to: outsideOf(options.egressExcept) },
      ],
    },
  };
}

/** Every IPv4 and IPv6 address but the ranges given (each family's exceptions in its own block, as the API wants). */
function outsideOf(except: readonly string[]): V1NetworkPolicyPeer[] {
  const block = (cidr: string, family: 4 | 6): V1NetworkPolicyPeer => {
    const mine = except.filter((range) => isIP(range.split('/')[0] ?? '') === family);
    return { ipBlock: { cidr, ...(mine.length > 0 ? { except: [...mine] } : {}) } };
  };
  return [block('0.0.0.0/0', 4), block('::/0', 6)];
}

/** Throws an Error naming the first entry that is not an IPv4 or IPv6 range in CIDR notation (a bad option, found at start). */
export function checkEgressExcept(except: readonly string[]): void {
  for (const range of except) {
    const [address = '', bits = '', extra] = range.split('/');
    const family = isIP(address);
    const max = family === 6 ? 128 : 32;
    if (family === 0 || extra !== undefined || !/^\d{1,3}$/.test(bits) || Number(bits) > max)
      throw new Error(`egressExcept: "${range}" is not an address range in CIDR notation (10.0.0.0/8, fc00::/7)`);
  }
}

export interface SandboxNetworkPoliciesDeps {
  networking: NetworkingV1Api;
  namespace: string;
  options: NetworkPolicyOptions;
  logger: Logger;
  /** Milliseconds now (Date.now): when a failed application is tried again. */
  now: () => number;
}

export interface SandboxNetworkPolicies {
  /**
   * Applies the installation's policy (server-side apply: made, or brought back to what it
   * should say), once per process; after a failure, again on a call {@link POLICY_RETRY_MS}
   * later. Never rejects: a policy that cannot be applied (the Role does not allow it, say) is a
   * warning, and sandboxes start without it.
   */
  ensure(installationId: string): Promise<void>;
}

/** Per installation, its policy's application (done, failed or in flight), and when a failed one is tried again. */
interface Applied {
  byInstallation: Map<string, { applying: Promise<void>; retryAt: number | null }>;
}

export function createSandboxNetworkPolicies(deps: SandboxNetworkPoliciesDeps): SandboxNetworkPolicies {
  const applied: Applied = { byInstallation: new Map() };
  return { ensure: (installationId) => ensureOnce(deps, applied, installationId) };
}

function ensureOnce(deps: SandboxNetworkPoliciesDeps, applied: Applied, installationId: string): Promise<void> {
  const known = applied.byInstallation.get(installationId);
  if (known && (known.retryAt === null || deps.now() < known.retryAt)) return known.applying;
  const entry: { applying: Promise<void>; retryAt: number | null } = { applying: Promise.resolve(), retryAt: null };
  entry.applying = applyPolicy(deps, installationId).then((done) => {
    if (!done) entry.retryAt = deps.now() + POLICY_RETRY_MS;
  });
  applied.byInstallation.set(installationId, entry);
  return entry.applying;
}

async function applyPolicy(deps: SandboxNetworkPoliciesDeps, installationId: string): Promise<boolean> {
  const body = sandboxNetworkPolicy(installationId, deps.options);
  const name = body.metadata?.name ?? '';
  try {
    await deps.networking.patchNamespacedNetworkPolicy(
      { name, namespace: deps.namespace, body, fieldManager: FIELD_MANAGER, force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    return true;
  } catch (error) {
    const forbidden = error instanceof ApiException && error.code === 403;
    deps.logger.warn(
      { namespace: deps.namespace, policy: name, installation: installationId, reason: reasonOf(error) },
      forbidden
        ? `the service may not create or patch NetworkPolicies in namespace ${deps.namespace}, so its sandbox pods are not kept apart on the network; grant networkpolicies (get, create, patch) in its Role (as the Helm chart deploy/helm/acs does); tried again in ${POLICY_RETRY_MS / 60_000} minutes`
        : `could not apply the NetworkPolicy ${name} of the sandbox pods in namespace ${deps.namespace}; they start without it (tried again in ${POLICY_RETRY_MS / 60_000} minutes)`,
    );
    return false;
  }
}

/** The API's words (its Status message, the body being JSON text or parsed), or the error's. */
function reasonOf(error: unknown): string {
  if (!(error instanceof ApiException)) return error instanceof Error ? error.message : String(error);
  const raw: unknown = error.body;
  let body = raw;
  if (typeof raw === 'string') {
    try {
      body = JSON.parse(raw) as unknown;
    } catch {
      return `HTTP ${error.code}: ${raw.slice(0, 500)}`;
    }
  }
  const message = (body as { message?: unknown } | null)?.message;
  return `HTTP ${error.code}: ${typeof message === 'string' ? message : error.message}`;
}
