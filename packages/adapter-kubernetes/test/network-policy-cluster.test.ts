/**
 * The NetworkPolicy of an installation's sandbox pods on a real API server: made before the
 * first sandbox, selecting its pod, brought back when changed, and a warning (not a failure) when
 * the service's Role does not allow it, which the chart's Role (deploy/helm/acs) does. The
 * test cluster's bridge plugin does not enforce policies: this checks what the policy says.
 */
import { randomBytes } from 'node:crypto';
import { AuthorizationV1Api, KubeConfig, NetworkingV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { expectOk, fixtureId } from '@acs/core/testing';
import type { Logger } from '@acs/core/ports';
import { DEFAULT_EGRESS_EXCEPT, sandboxNetworkPolicy } from '@acs/adapter-kubernetes';
import { bookworm, clients, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';

/** A logger that keeps the warnings. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const ignore = () => {};
  return {
    warnings,
    debug: ignore,
    info: ignore,
    error: ignore,
    warn: (fields, message) => warnings.push(`${message} ${JSON.stringify(fields)}`),
  };
}

onCluster('sandbox NetworkPolicies on Kubernetes', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const { core } = clients(kubeConfig);

  it("applies the installation's policy before its first sandbox, selecting that sandbox's pod and no other installation's", async () => {
    const ns = await namespace;
    const logger = recordingLogger();
    const runtime = kubernetesRuntime(kubeConfig, ns, { logger });
    const installation = `inst-${randomBytes(4).toString('hex')}`;
    const id = fixtureId();
    try {
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: installation, spec: bookworm, env: {} }),
      );
      const policy = await networking.readNamespacedNetworkPolicy({
        name: `acs-sandboxes-${installation}`,
        namespace: ns,
      });
      const expected = sandboxNetworkPolicy(installation, { namePrefix: 'acs-', egressExcept: DEFAULT_EGRESS_EXCEPT });
      expect(policy.metadata?.labels).toEqual({ 'io.acs.managed': 'true', 'io.acs.installation-id': installation });
      expect(policy.spec?.podSelector).toEqual({
        matchLabels: { 'io.acs.managed': 'true', 'io.acs.installation-id': installation },
      });
      expect(policy.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
      // Nothing is let in (the API keeps an empty list as none).
      expect(policy.spec?.ingress ?? []).toEqual([]);
      expect(policy.spec?.egress).toEqual(expected.spec?.egress);
      expect(policy.spec?.egress?.[1]?.to?.[0]?.ipBlock?.except).toContain('169.254.0.0/16');

      // The API's own selection with the policy's selector finds the sandbox's pod, once the StatefulSet made it.
      const selector = Object.entries(policy.spec?.podSelector?.matchLabels ?? {})
        .map(([key, value]) => `${key}=${value}`)
        .join(',');
      const deadline = Date.now() + 60_000;
      let selected: string[] = [];
      while (selected.length === 0 && Date.now() < deadline) {
        selected = (await core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items.map(
          (pod) => pod.metadata?.name ?? '',
        );
        if (selected.length === 0) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(selected, `no pod matched ${selector} within 60 s`).toEqual([runtime.podName(id)]);
      const other = await core.listNamespacedPod({
        namespace: ns,
        labelSelector: `io.acs.managed=true,io.acs.installation-id=another-${installation}`,
      });
      expect(other.items).toEqual([]);
      expect(logger.warnings).toEqual([]);
    } finally {
      await runtime.delete(id);
    }
  });

  it('brings a policy changed by hand back to what it says when a service starts (its first list)', async () => {
    const ns = await namespace;
    const installation = `inst-${randomBytes(4).toString('hex')}`;
    const name = `acs-sandboxes-${installation}`;
    await expectOk(kubernetesRuntime(kubeConfig, ns).list(installation));
    // Someone lets everything out of the sandboxes.
    await networking.replaceNamespacedNetworkPolicy({
      name,
      namespace: ns,
      body: {
        ...(await networking.readNamespacedNetworkPolicy({ name, namespace: ns })),
        spec: { podSelector: {}, policyTypes: ['Egress'], egress: [{}] },
      },
    });
    // A service starting (a new runtime: a new process) applies it again.
    await expectOk(kubernetesRuntime(kubeConfig, ns).list(installation));
    const restored = await networking.readNamespacedNetworkPolicy({ name, namespace: ns });
    const expected = sandboxNetworkPolicy(installation, { namePrefix: 'acs-', egressExcept: DEFAULT_EGRESS_EXCEPT });
    expect(restored.spec?.podSelector).toEqual(expected.spec?.podSelector);
    expect(restored.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(restored.spec?.egress).toEqual(expected.spec?.egress);
  });

  it("warns and goes on when the service account may not apply it; acs.yaml's Role lets it", async () => {
    const ns = await namespace;
    const rbac = kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const account = 'acs-limited';
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: account } } });
    // A Role that lets it list StatefulSets (what `list` needs) and nothing about policies.
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'no-policies' },
        rules: [{ apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['get', 'list'] }],
      },
    });
    await bind(rbac, ns, account, 'no-policies');
    const token = await core.createNamespacedServiceAccountToken({
      name: account,
      namespace: ns,
      body: { spec: { expirationSeconds: 600 } },
    });
    const asAccount = withToken(kubeConfig, token.status?.token ?? '');

    const denied = recordingLogger();
    const installation = `inst-${randomBytes(4).toString('hex')}`;
    expect(await expectOk(kubernetesRuntime(asAccount, ns, { logger: denied }).list(installation))).toEqual([]);
    expect(denied.warnings).toHaveLength(1);
    expect(denied.warnings[0]).toMatch(
      new RegExp(`may not create or patch NetworkPolicies in namespace ${ns}.*"reason":"HTTP 403: .*forbidden`),
    );
    await expect(
      networking.readNamespacedNetworkPolicy({ name: `acs-sandboxes-${installation}`, namespace: ns }),
    ).rejects.toMatchObject({ code: 404 });

    // With the rule the chart's Role has for it (deploy/helm/acs; helm-chart.test.ts checks that
    // Role against every call of the runtime), the same account applies the policy, unwarned.
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'policies' },
        rules: [
          { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'create', 'patch'] },
        ],
      },
    });
    await bind(rbac, ns, account, 'policies');
    const granted = recordingLogger();
    await waitForPermission(asAccount, ns);
    await expectOk(kubernetesRuntime(asAccount, ns, { logger: granted }).list(installation));
    expect(granted.warnings).toEqual([]);
    const policy = await networking.readNamespacedNetworkPolicy({
      name: `acs-sandboxes-${installation}`,
      namespace: ns,
    });
    expect(policy.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
  });
});

function bind(rbac: RbacAuthorizationV1Api, namespace: string, account: string, role: string) {
  return rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: role },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
    },
  });
}

/** The admin kubeconfig's cluster, as a service account with this token. */
function withToken(admin: KubeConfig, token: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [cluster],
    users: [{ name: 'account', token }],
    contexts: [{ name: 'account', cluster: cluster?.name, user: 'account' }],
    currentContext: 'account',
  });
  return kubeConfig;
}

/** RBAC caches are per API server and quick, but not instant: waits (60 s) until the account may patch policies. */
async function waitForPermission(kubeConfig: KubeConfig, namespace: string): Promise<void> {
  const authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const review = await authorization.createSelfSubjectAccessReview({
      body: {
        spec: {
          resourceAttributes: { namespace, group: 'networking.k8s.io', resource: 'networkpolicies', verb: 'patch' },
        },
      },
    });
    if (review.status?.allowed) return;
    if (Date.now() > deadline)
      throw new Error(`the account may still not patch networkpolicies after 60 s: ${JSON.stringify(review.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
