/**
 * The Helm chart deploy/helm/acs, with helm itself (scripts/helm.sh builds it once per machine):
 * `helm lint`, what it renders with its defaults, without the in-cluster PostgreSQL and with every
 * option, its values documented alike in values.yaml, values.schema.json and its README, and a
 * Role that grants exactly what this package's runtime calls. On the test cluster
 * (scripts/k8s-cluster.sh): `helm install --dry-run=server`, every object it would make accepted
 * by the API server (a dry-run create), and a sandbox's whole life run as the chart's service
 * account with the chart's Role.
 *
 * Without helm the suite fails in CI and is skipped elsewhere, saying how to build it; without a
 * cluster, its cluster part does the same (cluster.ts).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ApiException,
  AuthorizationV1Api,
  KubeConfig,
  KubernetesObjectApi,
  loadAllYaml,
  loadYaml,
  type KubernetesObject,
  type V1Deployment,
  type V1EnvVar,
  type V1Ingress,
  type V1Job,
  type V1PolicyRule,
  type V1Role,
  type V1RoleBinding,
  type V1Secret,
  type V1Service,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { expectOk, fixtureId } from '@acs/core/testing';
import type { Logger } from '@acs/core/ports';
import { bookworm, clients, KUBECONFIG_PATH, kubernetesRuntime, onCluster, testNamespace } from './cluster.js';
import { CHART, onHelm, runHelm, type HelmRun } from './helm.js';

const SOURCES = fileURLToPath(new URL('../src/', import.meta.url));

/** A rendered object; `one` gives it the type of its kind. */
type Manifest = KubernetesObject;
interface Kinds {
  Deployment: V1Deployment;
  StatefulSet: V1StatefulSet;
  Service: V1Service;
  Secret: V1Secret;
  Role: V1Role;
  RoleBinding: V1RoleBinding;
  Ingress: V1Ingress;
  ServiceAccount: KubernetesObject;
  Job: V1Job;
}

/** `helm template` of the chart as release `t` in namespace `acs`, with these --set pairs; fails with helm's words. */
async function render(helm: string, sets: string[] = [], extra: string[] = []): Promise<Manifest[]> {
  const result = await runHelm(helm, [
    'template',
    't',
    CHART,
    '-n',
    'acs',
    ...sets.flatMap((s) => ['--set', s]),
    ...extra,
  ]);
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return (loadAllYaml(result.stdout) as (Manifest | null)[]).filter((d): d is Manifest => d !== null);
}

function one<K extends keyof Kinds>(docs: Manifest[], kind: K, name?: string): Kinds[K] {
  const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  expect(found, `one ${kind}${name ? ` ${name}` : ''}`).toHaveLength(1);
  return found[0] as Kinds[K];
}
const podSpecOf = (workload: V1Deployment | V1StatefulSet) => workload.spec!.template.spec!;
const podLabelsOf = (workload: V1Deployment | V1StatefulSet) => workload.spec!.template.metadata?.labels ?? {};
const containerOf = (workload: V1Deployment | V1StatefulSet) => podSpecOf(workload).containers[0]!;
const envOf = (deployment: V1Deployment): Map<string, V1EnvVar> =>
  new Map((containerOf(deployment).env ?? []).map((e) => [e.name, e]));
const selects = (service: V1Service, labels: Record<string, string>) =>
  Object.entries(service.spec?.selector ?? {}).every(([k, v]) => labels[k] === v);

/** The Role's rules as `group/resource verb` lines, sorted. */
const grants = (rules: V1PolicyRule[] = []) =>
  rules
    .flatMap((r) =>
      (r.apiGroups ?? []).flatMap((g) => (r.resources ?? []).flatMap((res) => r.verbs.map((v) => `${g}/${res} ${v}`))),
    )
    .sort();

/**
 * What this package's runtime calls, read from its source: each `<verb>Namespaced<Kind>` call of
 * the client and the exec path, as `group/resource verb`. Server-side apply (the policy's patch)
 * creates the object the first time. A call not in the table fails, asking for its rule.
 */
function callsOfTheRuntime(): string[] {
  const resources: Record<string, string> = {
    StatefulSet: 'apps/statefulsets',
    StatefulSetScale: 'apps/statefulsets/scale',
    Pod: '/pods',
    PodResize: '/pods/resize',
    PersistentVolumeClaim: '/persistentvolumeclaims',
    Event: '/events',
    NetworkPolicy: 'networking.k8s.io/networkpolicies',
  };
  const verbs: Record<string, string> = {
    read: 'get',
    list: 'list',
    create: 'create',
    patch: 'patch',
    delete: 'delete',
  };
  const calls = new Set<string>();
  for (const file of readdirSync(SOURCES).filter((f) => f.endsWith('.ts'))) {
    const source = readFileSync(`${SOURCES}${file}`, 'utf8');
    for (const [, verb, kind] of source.matchAll(/\.(\w+?)Namespaced(\w+)\(/g)) {
      const resource = resources[kind!];
      if (!resource || !verbs[verb!])
        throw new Error(`${file} calls ${verb}Namespaced${kind}: give it a rule here and in the chart's Role`);
      calls.add(`${resource} ${verbs[verb!]}`);
      if (kind === 'NetworkPolicy' && verb === 'patch') calls.add(`${resource} create`);
    }
    // Exec over a WebSocket: a GET that the API server authorizes as create too.
    if (source.includes('/exec?')) ['get', 'create'].forEach((v) => calls.add(`/pods/exec ${v}`));
  }
  return [...calls].sort();
}

/** The keys of values.yaml, values.schema.json and the README's table, each down to the schema's free-form objects. */
function documentedKeys() {
  const values = loadYaml<Record<string, unknown>>(readFileSync(`${CHART}/values.yaml`, 'utf8'));
  const schema = JSON.parse(readFileSync(`${CHART}/values.schema.json`, 'utf8')) as SchemaNode;
  const readme = readFileSync(`${CHART}/README.md`, 'utf8');
  const fromSchema: string[] = [];
  const fromValues: string[] = [];
  const walk = (node: SchemaNode, value: unknown, prefix: string) => {
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      const path = `${prefix}${key}`;
      if (child.properties) walk(child, (value as Record<string, unknown> | undefined)?.[key], `${path}.`);
      else fromSchema.push(path);
    }
    for (const key of Object.keys((value as Record<string, unknown> | undefined) ?? {}))
      if (!node.properties?.[key]?.properties) fromValues.push(`${prefix}${key}`);
  };
  walk(schema, values, '');
  const section = readme.slice(readme.indexOf('## Values'));
  const fromReadme = [...section.matchAll(/^\| `([\w.]+)` \|/gm)].map((m) => m[1]!);
  return { fromSchema: fromSchema.sort(), fromValues: fromValues.sort(), fromReadme: fromReadme.sort() };
}
interface SchemaNode {
  properties?: Record<string, SchemaNode>;
}

onHelm('the Helm chart deploy/helm/acs', (helm) => {
  it('passes helm lint --strict with its defaults and without the in-cluster PostgreSQL', async () => {
    for (const sets of [[], ['postgresql.enabled=false', 'database.existingSecret=acs-database']]) {
      const lint = await runHelm(helm, ['lint', '--strict', CHART, ...sets.flatMap((s) => ['--set', s])]);
      expect(lint.code, lint.stdout + lint.stderr).toBe(0);
      expect(lint.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    }
  });

  it('renders the service as a Deployment of acs-server on PostgreSQL, probed on /alive and /health, with its Service, account, Role and keys', async () => {
    const docs = await render(helm);
    const deployment = one(docs, 'Deployment', 't-acs');
    expect(deployment.spec?.replicas).toBe(2);
    const container = containerOf(deployment);
    expect(container.image).toBe(
      `acs-server:${loadYaml<{ appVersion: string }>(readFileSync(`${CHART}/Chart.yaml`, 'utf8')).appVersion}`,
    );
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/alive', port: 'http' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/health', port: 'http' });
    const env = envOf(deployment);
    expect(env.get('ACS_SANDBOXES')?.value).toBe('kubernetes');
    expect(env.get('ACS_KUBERNETES_NAMESPACE')?.value).toBe('acs');
    expect(env.get('ACS_KUBERNETES_NETWORK_POLICY')?.value).toBe('true');
    expect(env.get('DATABASE_URL')?.value).toBe(
      'postgres://acs:$(POSTGRESQL_PASSWORD)@t-acs-postgresql.acs.svc:5432/acs',
    );
    expect(env.get('POSTGRESQL_PASSWORD')?.valueFrom?.secretKeyRef).toEqual({
      name: 't-acs-postgresql',
      key: 'password',
    });
    expect(env.get('ACS_SECRET_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 't-acs-keys', key: 'secret-key' });
    expect(env.get('SESSION_API_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 't-acs-keys', key: 'session-api-key' });
    // The password variable comes before the URL that names it ($(VAR) expands only earlier ones).
    const names = [...env.keys()];
    expect(names.indexOf('POSTGRESQL_PASSWORD')).toBeLessThan(names.indexOf('DATABASE_URL'));

    const keys = one(docs, 'Secret', 't-acs-keys');
    expect(keys.metadata?.annotations?.['helm.sh/resource-policy']).toBe('keep');
    expect(Buffer.from(Buffer.from(keys.data!['secret-key']!, 'base64').toString(), 'base64')).toHaveLength(32);
    expect(Buffer.from(keys.data!['session-api-key']!, 'base64').toString()).toMatch(/^[A-Za-z0-9]{40}$/);

    // The Service reaches the service's pods and not PostgreSQL's; PostgreSQL's reaches its own.
    const podLabels = podLabelsOf(deployment);
    const database = one(docs, 'StatefulSet', 't-acs-postgresql');
    expect(containerOf(database).image).toBe('acs-postgres:15');
    expect(selects(one(docs, 'Service', 't-acs'), podLabels)).toBe(true);
    expect(selects(one(docs, 'Service', 't-acs'), podLabelsOf(database))).toBe(false);
    expect(selects(one(docs, 'Service', 't-acs-postgresql'), podLabelsOf(database))).toBe(true);

    // The account the pods run as is the one the Role is bound to, in the release's namespace.
    const binding = one(docs, 'RoleBinding', 't-acs-sandboxes');
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 't-acs', namespace: 'acs' }]);
    expect(podSpecOf(deployment).serviceAccountName).toBe(one(docs, 'ServiceAccount').metadata?.name);
    expect(docs.filter((d) => d.kind?.startsWith('Cluster'))).toEqual([]);
  });

  it("grants exactly what the runtime calls, in the sandboxes' namespace, and no NetworkPolicy rule when the service applies none", async () => {
    const role = one(await render(helm), 'Role', 't-acs-sandboxes');
    expect(grants(role.rules)).toEqual(callsOfTheRuntime());
    const without = one(await render(helm, ['kubernetes.networkPolicy=false']), 'Role', 't-acs-sandboxes');
    expect(grants(without.rules)).toEqual(callsOfTheRuntime().filter((g) => !g.includes('networkpolicies')));
  });

  it('takes DATABASE_URL from a Secret without the in-cluster PostgreSQL, and refuses to render with no database', async () => {
    const docs = await render(helm, ['postgresql.enabled=false', 'database.existingSecret=acs-database']);
    expect(docs.filter((d) => d.metadata?.name?.includes('postgresql'))).toEqual([]);
    const env = envOf(one(docs, 'Deployment'));
    expect(env.get('DATABASE_URL')?.valueFrom?.secretKeyRef).toEqual({ name: 'acs-database', key: 'url' });
    expect(env.has('POSTGRESQL_PASSWORD')).toBe(false);

    const refused = await runHelm(helm, ['template', 't', CHART, '--set', 'postgresql.enabled=false']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('The service needs PostgreSQL');
  });

  it("renders every option: the Ingress with the sandboxes' wildcard, another sandbox namespace, your Secrets, extra variables", async () => {
    const docs = await render(helm, [
      'ingress.enabled=true',
      'config.sandboxUrlHost=sandboxes.example.com:8443',
      'config.trustProxy=true',
      'kubernetes.namespace=acs-sandboxes',
      'kubernetes.storageClass=fast',
      'kubernetes.runtimeClass=gvisor',
      'kubernetes.sandboxEgressExcept={10.0.0.0/8,fc00::/7}',
      'secrets.existingSecret=acs-keys-of-mine',
      'secrets.keys.apiKeys=api-keys',
      'postgresql.auth.existingSecret=acs-db-password',
      'extraEnv[0].name=ACS_SANDBOX_POOL',
      'extraEnv[0].value=none',
      'replicaCount=3',
    ]);
    const ingress = one(docs, 'Ingress');
    expect(ingress.spec?.rules?.map((r) => r.host)).toEqual(['acs.example.local', '*.sandboxes.example.com']);
    for (const kind of ['Role', 'RoleBinding'] as const)
      expect(one(docs, kind, 't-acs-sandboxes').metadata?.namespace).toBe('acs-sandboxes');
    expect(one(docs, 'RoleBinding', 't-acs-sandboxes').subjects?.[0]?.namespace).toBe('acs');
    const deployment = one(docs, 'Deployment');
    expect(deployment.spec?.replicas).toBe(3);
    const env = envOf(deployment);
    expect(
      Object.fromEntries([...env].filter(([, e]) => e.value !== undefined).map(([n, e]) => [n, e.value])),
    ).toMatchObject({
      ACS_SANDBOX_URL_HOST: 'sandboxes.example.com:8443',
      ACS_TRUST_PROXY: 'true',
      ACS_KUBERNETES_NAMESPACE: 'acs-sandboxes',
      ACS_KUBERNETES_STORAGE_CLASS: 'fast',
      ACS_KUBERNETES_RUNTIME_CLASS: 'gvisor',
      ACS_KUBERNETES_SANDBOX_EGRESS_EXCEPT: '10.0.0.0/8,fc00::/7',
      ACS_SANDBOX_POOL: 'none',
    });
    expect(env.get('ACS_API_KEYS')?.valueFrom?.secretKeyRef).toEqual({ name: 'acs-keys-of-mine', key: 'api-keys' });
    expect(env.get('ACS_SECRET_KEY')?.valueFrom?.secretKeyRef?.name).toBe('acs-keys-of-mine');
    expect(env.get('POSTGRESQL_PASSWORD')?.valueFrom?.secretKeyRef?.name).toBe('acs-db-password');
    // Your Secrets are yours: the chart makes none.
    expect(docs.filter((d) => d.kind === 'Secret')).toEqual([]);
  });

  it('refuses unknown keys and values of the wrong type (values.schema.json)', async () => {
    for (const [set, words] of [
      ['replicaCount=two', "at '/replicaCount'"],
      ['postgresql.enabeld=false', "additional properties 'enabeld' not allowed"],
      ['kubernetes.imagePullPolicy=Sometimes', "at '/kubernetes/imagePullPolicy'"],
    ] as const) {
      const refused = await runHelm(helm, ['template', 't', CHART, '--set', set]);
      expect(refused.code, set).not.toBe(0);
      expect(refused.stderr).toContain(words);
    }
  });

  it('documents every value: values.yaml, values.schema.json and the README list the same keys', () => {
    const { fromSchema, fromValues, fromReadme } = documentedKeys();
    expect(fromValues).toEqual(fromSchema);
    expect(fromReadme).toEqual(fromSchema);
  });

  onCluster('the Helm chart on the test cluster', (kubeConfig) => {
    const namespace = testNamespace(kubeConfig);

    it('installs with --dry-run=server (with and without the in-cluster PostgreSQL), and the API server takes every object it would make', async () => {
      const ns = await namespace;
      const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
      for (const sets of [[], ['postgresql.enabled=false', 'database.existingSecret=acs-database']]) {
        const install = await runHelm(helm, [
          'install',
          't',
          CHART,
          '-n',
          ns,
          '--kubeconfig',
          KUBECONFIG_PATH,
          '--dry-run=server',
          '-o',
          'json',
          ...sets.flatMap((s) => ['--set', s]),
        ]);
        expect(install.code, install.stderr).toBe(0);
        const release = JSON.parse(install.stdout) as { manifest: string; hooks: { manifest: string }[] };
        const docs = (
          loadAllYaml(
            [release.manifest, ...release.hooks.map((h) => h.manifest)].join('\n---\n'),
          ) as (Manifest | null)[]
        ).filter((d): d is Manifest => d !== null);
        expect(docs.map((d) => d.kind).sort()).toEqual(
          [
            'Deployment',
            'Job',
            'Role',
            'Role',
            'RoleBinding',
            'RoleBinding',
            'Secret',
            'Service',
            'ServiceAccount',
            ...(sets.length === 0 ? ['Secret', 'Service', 'StatefulSet'] : []),
          ].sort(),
        );
        for (const doc of docs) {
          doc.metadata = { ...doc.metadata, namespace: doc.metadata?.namespace ?? ns };
          await objects.create(doc, undefined, 'All').catch((error: unknown) => {
            throw new Error(`the API server refuses ${doc.kind} ${doc.metadata?.name}: ${(error as Error).message}`);
          });
        }
      }
    });

    it("lets the runtime run a sandbox's whole life as the chart's service account, and nothing else", async () => {
      const ns = await namespace;
      const docs = await render(
        helm,
        [],
        ['-n', ns, '--show-only', 'templates/serviceaccount.yaml', '--show-only', 'templates/rbac.yaml'],
      );
      const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
      for (const doc of docs) await objects.create({ ...doc, metadata: { ...doc.metadata, namespace: ns } });
      const { core, apps } = clients(kubeConfig);
      const token = await core.createNamespacedServiceAccountToken({
        name: 't-acs',
        namespace: ns,
        body: { spec: { expirationSeconds: 900 } },
      });
      const account = withToken(kubeConfig, token.status?.token ?? '');
      await waitUntilAllowed(account, ns);

      const warnings: string[] = [];
      const runtime = kubernetesRuntime(account, ns, { logger: recordingLogger(warnings) });
      const installation = `helm-${randomBytes(4).toString('hex')}`;
      const id = fixtureId();
      await expectOk(runtime.ping());
      expect(await expectOk(runtime.list(installation))).toEqual([]);
      await expectOk(
        runtime.create({ sandbox_id: id, user_id: 'alice', installation_id: installation, spec: bookworm, env: {} }),
      );
      try {
        await until(runtime, id, 'running');
        expect((await expectOk(runtime.exec(id, { command: ['echo', 'from the chart'] }))).stdout).toBe(
          'from the chart\n',
        );
        await expectOk(runtime.resize(id, 2));
        await expectOk(runtime.pause(id));
        await until(runtime, id, 'paused');
        await expectOk(runtime.resume(id));
        await until(runtime, id, 'running');
      } finally {
        await expectOk(runtime.delete(id));
      }
      expect(warnings).toEqual([]);
      const left = await apps.listNamespacedStatefulSet({ namespace: ns, labelSelector: `io.acs.sandbox-id=${id}` });
      expect(left.items).toEqual([]);

      // Nothing beyond the Role: no Secrets, no pods of its own making, nothing in another namespace.
      for (const attributes of [
        { namespace: ns, resource: 'secrets', verb: 'get' },
        { namespace: ns, resource: 'pods', verb: 'create' },
        { namespace: ns, resource: 'configmaps', verb: 'list' },
        { namespace: 'default', group: 'apps', resource: 'statefulsets', verb: 'list' },
        { namespace: ns, group: 'rbac.authorization.k8s.io', resource: 'roles', verb: 'create' },
      ])
        expect(await allowed(account, attributes), JSON.stringify(attributes)).toBe(false);
    });

    it('the uninstall hook stops the replicas with its own Role and waits for their pods to end', async () => {
      const ns = await namespace;
      const shown = ['serviceaccount', 'deployment', 'sandbox-cleanup'].flatMap((t) => [
        '--show-only',
        `templates/${t}.yaml`,
      ]);
      const docs = await render(helm, ['image.pullPolicy=Never'], ['-n', ns, ...shown]);
      const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
      // The chart's Deployment: its pods need not run (no Secrets here), only exist.
      for (const doc of docs.filter((d) => d.kind !== 'Job'))
        await objects.create({ ...doc, metadata: { ...doc.metadata, namespace: ns } }).catch((error: unknown) => {
          if (!(error instanceof ApiException && error.code === 409)) throw error;
        });
      const { core, apps } = clients(kubeConfig);
      const selector = 'app.kubernetes.io/name=acs,app.kubernetes.io/instance=t';
      const deadline = Date.now() + 60_000;
      while ((await core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items.length === 0) {
        if (Date.now() > deadline) throw new Error('the Deployment has no pod after 60 s');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const token = await core.createNamespacedServiceAccountToken({
        name: 't-acs',
        namespace: ns,
        body: { spec: { expirationSeconds: 900 } },
      });
      const stopped = await runScaleDown(one(docs, 'Job'), kubeConfig, token.status?.token ?? '');
      expect(stopped.code, stopped.stdout + stopped.stderr).toBe(0);
      expect(stopped.stdout).toContain('no replica left');
      expect((await apps.readNamespacedDeployment({ name: 't-acs', namespace: ns })).spec?.replicas).toBe(0);
      expect((await core.listNamespacedPod({ namespace: ns, labelSelector: selector })).items).toEqual([]);
      await apps.deleteNamespacedDeployment({ name: 't-acs', namespace: ns });
    });
  });
});

/** Runs the uninstall hook's scale-down script (its first container) from this machine, as the given account. */
async function runScaleDown(job: V1Job, kubeConfig: KubeConfig, token: string): Promise<HelmRun> {
  const container = job.spec!.template.spec!.initContainers![0]!;
  const env = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? '']));
  const cluster = kubeConfig.getCurrentCluster()!;
  const server = new URL(cluster.server);
  const dir = mkdtempSync(join(tmpdir(), 'acs-helm-hook-'));
  try {
    writeFileSync(join(dir, 'token'), token);
    writeFileSync(
      join(dir, 'ca.crt'),
      cluster.caData ? Buffer.from(cluster.caData, 'base64') : readFileSync(cluster.caFile!),
    );
    return await new Promise<HelmRun>((resolve) => {
      execFile(
        process.execPath,
        container.command!.slice(1),
        {
          timeout: 120_000,
          killSignal: 'SIGKILL',
          env: {
            PATH: process.env.PATH ?? '',
            ...env,
            KUBERNETES_SERVICE_HOST: server.hostname,
            KUBERNETES_SERVICE_PORT: server.port,
            SERVICEACCOUNT_DIR: dir,
            NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt'),
          },
        },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
      );
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function recordingLogger(warnings: string[]): Logger {
  const ignore = () => {};
  return {
    debug: ignore,
    info: ignore,
    error: ignore,
    warn: (fields, message) => warnings.push(`${message} ${JSON.stringify(fields)}`),
  };
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

async function allowed(
  kubeConfig: KubeConfig,
  resourceAttributes: { namespace: string; group?: string; resource: string; verb: string },
): Promise<boolean> {
  const review = await kubeConfig
    .makeApiClient(AuthorizationV1Api)
    .createSelfSubjectAccessReview({ body: { spec: { resourceAttributes } } });
  return review.status?.allowed === true;
}

/** RBAC caches are quick but not instant: waits (60 s at most) until the Role applies. */
async function waitUntilAllowed(kubeConfig: KubeConfig, namespace: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await allowed(kubeConfig, { namespace, group: 'apps', resource: 'statefulsets', verb: 'create' }))) {
    if (Date.now() > deadline)
      throw new Error(`the chart's Role does not let its account create StatefulSets in ${namespace} after 60 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Until the sandbox is in `state` (120 s at most), failing with its last observation. */
async function until(runtime: ReturnType<typeof kubernetesRuntime>, id: string, state: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const seen = await expectOk(runtime.inspect(id));
    if (seen.state === state) return;
    if (Date.now() > deadline) throw new Error(`sandbox ${id} is not ${state} after 120 s: ${JSON.stringify(seen)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
