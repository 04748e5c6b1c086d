import { describe, expect, it } from 'vitest';
import { ApiException, type NetworkingV1Api } from '@kubernetes/client-node';
import { KubeConfig } from '@kubernetes/client-node';
import { KubernetesSandboxRuntime } from '@acs/adapter-kubernetes';
import {
  checkEgressExcept,
  createSandboxNetworkPolicies,
  DEFAULT_EGRESS_EXCEPT,
  networkPolicyName,
  POLICY_RETRY_MS,
  sandboxNetworkPolicy,
} from '../src/network-policy.js';

// The NetworkPolicy of an installation's sandbox pods, and how the runtime applies it, without a
// cluster; network-policy-cluster.test.ts applies it to a real API server and reads it back.

describe("an installation's NetworkPolicy", () => {
  const policy = sandboxNetworkPolicy('inst-1', { namePrefix: 'acs-', egressExcept: DEFAULT_EGRESS_EXCEPT });

  it("selects the installation's sandbox pods and lets nothing in", () => {
    expect(policy).toMatchObject({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: {
        name: 'acs-sandboxes-inst-1',
        labels: { 'io.acs.managed': 'true', 'io.acs.installation-id': 'inst-1' },
        annotations: { 'io.acs/installation-id': 'inst-1' },
      },
    });
    expect(policy.spec?.podSelector).toEqual({
      matchLabels: { 'io.acs.managed': 'true', 'io.acs.installation-id': 'inst-1' },
    });
    expect(policy.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec?.ingress).toEqual([]);
  });

  it("lets out DNS to the cluster's DNS pods, and anything outside the excepted ranges, each family in its own block", () => {
    expect(policy.spec?.egress).toEqual([
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
      {
        to: [
          {
            ipBlock: {
              cidr: '0.0.0.0/0',
              except: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '169.254.0.0/16'],
            },
          },
          { ipBlock: { cidr: '::/0', except: ['fc00::/7', 'fe80::/10'] } },
        ],
      },
    ]);
    // No rule names a pod of the service's or a sandbox's: on no plugin is one of them let in by a selector.
    const peers = (policy.spec?.egress ?? []).flatMap((rule) => rule.to ?? []);
    expect(peers.filter((peer) => peer.podSelector).map((peer) => peer.podSelector)).toEqual([
      { matchLabels: { 'k8s-app': 'kube-dns' } },
    ]);
  });

  it("takes the operator's ranges, and leaves a family's block whole when none of them is of it", () => {
    const own = sandboxNetworkPolicy('inst-1', { namePrefix: 'acs-', egressExcept: ['10.96.0.0/12'] });
    expect(own.spec?.egress?.[1]?.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: ['10.96.0.0/12'] } },
      { ipBlock: { cidr: '::/0' } },
    ]);
  });

  it('is named by the installation id when that is a DNS label, else by its hash; labels hold any id', () => {
    expect(networkPolicyName('acs-', '0123456789abcdef0123456789abcdef')).toBe(
      'acs-sandboxes-0123456789abcdef0123456789abcdef',
    );
    const odd = sandboxNetworkPolicy('Inst_Ü', { namePrefix: 'acs-', egressExcept: [] });
    expect(odd.metadata?.name).toMatch(/^acs-sandboxes-h-[0-9a-f]{40}$/);
    expect(odd.metadata?.annotations).toEqual({ 'io.acs/installation-id': 'Inst_Ü' });
    expect(odd.spec?.podSelector?.matchLabels?.['io.acs.installation-id']).toMatch(/^h-[0-9a-f]{40}$/);
  });

  it('refuses ranges that are not CIDR, naming the entry', () => {
    expect(() => checkEgressExcept(DEFAULT_EGRESS_EXCEPT)).not.toThrow();
    for (const wrong of ['10.0.0.0', '10.0.0.0/33', 'fc00::/129', 'example.com/8', '10.0.0.0/8/1'])
      expect(() => checkEgressExcept([wrong])).toThrow(new RegExp(`"${wrong}" is not an address range`));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    expect(
      () => new KubernetesSandboxRuntime({ kubeConfig, namespace: 'acs', egressExcept: ['10.0.0.0/8', 'nope'] }),
    ).toThrow(/"nope" is not an address range/);
  });
});

describe('applying it', () => {
  /** A networking client whose apply answers with `answer` (an error to throw, or the applied body), counting the calls. */
  function fakeNetworking(answers: (ApiException<unknown> | Error | null)[]) {
    const calls: { name: string; namespace: string; fieldManager?: string; force?: boolean; body: unknown }[] = [];
    const networking = {
      patchNamespacedNetworkPolicy: (request: (typeof calls)[number]) => {
        calls.push(request);
        const answer = answers.shift() ?? null;
        return answer ? Promise.reject(answer) : Promise.resolve(request.body);
      },
    } as unknown as NetworkingV1Api;
    return { networking, calls };
  }

  function recordingLogger() {
    const warnings: { fields: Record<string, unknown>; message: string }[] = [];
    const ignore = () => {};
    return {
      warnings,
      logger: {
        debug: ignore,
        info: ignore,
        error: ignore,
        warn: (fields: Record<string, unknown>, message: string) => warnings.push({ fields, message }),
      },
    };
  }

  it('applies it server-side, once per installation however many ask at once', async () => {
    const { networking, calls } = fakeNetworking([]);
    const { logger, warnings } = recordingLogger();
    const policies = createSandboxNetworkPolicies({
      networking,
      namespace: 'acs',
      options: { namePrefix: 'acs-', egressExcept: DEFAULT_EGRESS_EXCEPT },
      logger,
      now: () => 0,
    });
    await Promise.all([policies.ensure('a'), policies.ensure('a'), policies.ensure('b')]);
    await policies.ensure('a');
    expect(calls.map((c) => [c.name, c.namespace, c.fieldManager, c.force])).toEqual([
      ['acs-sandboxes-a', 'acs', 'acs-sandbox-runtime', true],
      ['acs-sandboxes-b', 'acs', 'acs-sandbox-runtime', true],
    ]);
    expect(calls[0]?.body).toEqual(
      sandboxNetworkPolicy('a', { namePrefix: 'acs-', egressExcept: DEFAULT_EGRESS_EXCEPT }),
    );
    expect(warnings).toEqual([]);
  });

  it('warns, saying what to grant, when the Role does not allow it, goes on, and tries again (once) some minutes later', async () => {
    const forbidden = new ApiException(
      403,
      'Forbidden',
      JSON.stringify({ kind: 'Status', message: 'networkpolicies.networking.k8s.io "acs-sandboxes-a" is forbidden' }),
      {},
    );
    const { networking, calls } = fakeNetworking([forbidden, new Error('socket hang up')]);
    const { logger, warnings } = recordingLogger();
    const clock = { now: 1_000 };
    const policies = createSandboxNetworkPolicies({
      networking,
      namespace: 'acs',
      options: { namePrefix: 'acs-', egressExcept: [] },
      logger,
      now: () => clock.now,
    });
    await expect(policies.ensure('a')).resolves.toBeUndefined();
    // Every reconcile round lists: not a request, nor a warning, each time.
    clock.now += POLICY_RETRY_MS - 1;
    await expect(policies.ensure('a')).resolves.toBeUndefined();
    expect([calls.length, warnings.length]).toEqual([1, 1]);
    clock.now += 1;
    await policies.ensure('a');
    expect([calls.length, warnings.length]).toEqual([2, 2]);
    clock.now += POLICY_RETRY_MS;
    await policies.ensure('a');
    await policies.ensure('a');
    expect(calls).toHaveLength(3);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]?.message).toMatch(
      /may not create or patch NetworkPolicies in namespace acs, so its sandbox pods are not kept apart.*networkpolicies \(get, create, patch\)/,
    );
    expect(warnings[0]?.fields).toEqual({
      namespace: 'acs',
      policy: 'acs-sandboxes-a',
      installation: 'a',
      reason: 'HTTP 403: networkpolicies.networking.k8s.io "acs-sandboxes-a" is forbidden',
    });
    expect(warnings[1]?.message).toMatch(/could not apply the NetworkPolicy acs-sandboxes-a.*start without it/);
    expect(warnings[1]?.fields.reason).toBe('socket hang up');
  });
});
