/**
 * The test cluster of scripts/k8s-cluster.sh runs applications, not only sandboxes: from a pod,
 * cluster DNS (CoreDNS as kube-dns) resolves the API server's Service and another pod's Service by
 * name, kube-proxy routes that Service's ClusterIP to the pod behind it, the pod's service-account
 * token (in-cluster config) reaches the API server, and traffic leaves the pod through the node
 * (to a server of this test on the bridge's own address: nothing here leaves the node).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { clients, onCluster, testNamespace } from './cluster.js';

/** The address of the pods' bridge on the node (BRIDGE_ADDRESS of scripts/k8s-cluster.sh). */
const BRIDGE_ADDRESS = '10.89.0.1';
const IMAGE = 'acs-sandbox:bookworm';

/** Run in the checking pod: each check retried for up to 60 s, results printed as one JSON line. */
const CHECKS = String.raw`
import json, os, socket, ssl, time, urllib.request

def retry(check):
    deadline = time.time() + 60
    while True:
        try:
            return check()
        except Exception as error:
            if time.time() > deadline:
                return "error: %r" % (error,)
            time.sleep(0.5)

def get(url, **headers):
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5, context=tls).read().decode()

accounts = "/var/run/secrets/kubernetes.io/serviceaccount"
tls = ssl.create_default_context(cafile=accounts + "/ca.crt")
token = open(accounts + "/token").read()
namespace = open(accounts + "/namespace").read()
# What an in-cluster client configures itself from.
api = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])

def who_am_i():
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
    request = urllib.request.Request(api + "/apis/authentication.k8s.io/v1/selfsubjectreviews", data=body,
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"}, method="POST")
    return json.load(urllib.request.urlopen(request, timeout=5, context=tls))["status"]["userInfo"]["username"]

print(json.dumps({
    "kubernetes": retry(lambda: socket.gethostbyname("kubernetes.default.svc.cluster.local")),
    "web": retry(lambda: socket.gethostbyname("web")),
    "webFqdn": retry(lambda: socket.gethostbyname("web.%s.svc.cluster.local" % namespace)),
    "webBody": retry(lambda: get("http://web/hello.txt")),
    "version": retry(lambda: json.loads(get(api + "/version", Authorization="Bearer " + token))["gitVersion"]),
    "versionByName": retry(lambda: json.loads(get("https://kubernetes.default.svc/version"))["gitVersion"]),
    "user": retry(who_am_i),
    "node": retry(lambda: get(os.environ["NODE_URL"])),
}))
`;

interface Results {
  kubernetes: string;
  web: string;
  webFqdn: string;
  webBody: string;
  version: string;
  versionByName: string;
  user: string;
  node: string;
}

/** A server of this test on the bridge's address only: what a pod reaches through the node. */
async function nodeServer(body: string): Promise<{ server: Server; url: string; peers: string[] }> {
  const peers: string[] = [];
  const server = createServer((request, response) => {
    peers.push(request.socket.remoteAddress ?? '');
    response.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(
        new Error(
          `cannot listen on ${BRIDGE_ADDRESS} (is the cluster of scripts/k8s-cluster.sh up?): ${error.message}`,
        ),
      ),
    );
    server.listen(0, BRIDGE_ADDRESS, resolve);
  });
  return { server, url: `http://${BRIDGE_ADDRESS}:${(server.address() as AddressInfo).port}/`, peers };
}

function pod(name: string, labels: Record<string, string>, command: string[], env: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, labels },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: IMAGE,
          imagePullPolicy: 'Never',
          command,
          env: Object.entries(env).map(([key, value]) => ({ name: key, value })),
        },
      ],
    },
  };
}

onCluster('applications on the test cluster: DNS, Services, the API from a pod, egress', (kubeConfig) => {
  const namespace = testNamespace(kubeConfig);
  const { core } = clients(kubeConfig);
  const servers: Server[] = [];
  afterAll(() => {
    for (const server of servers) server.close();
  });

  it("resolves Services by name, reaches one's ClusterIP, the API server with the pod's token, and the node", async () => {
    const ns = await namespace;
    const marker = `node-${randomBytes(6).toString('hex')}`;
    const node = await nodeServer(marker);
    servers.push(node.server);

    await core.createNamespacedPod({
      namespace: ns,
      body: pod('web', { app: 'web' }, [
        'sh',
        '-c',
        'mkdir -p /tmp/www && echo hello-from-web >/tmp/www/hello.txt && cd /tmp/www && exec python3 -m http.server 8000',
      ]),
    });
    const service = await core.createNamespacedService({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8000 }] },
      },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: pod('checks', { app: 'checks' }, ['python3', '-c', CHECKS], { NODE_URL: node.url }),
    });

    const phase = await finished(core, ns, 'checks');
    const log = await core.readNamespacedPodLog({ name: 'checks', namespace: ns });
    expect(phase, log).toBe('Succeeded');
    const results = JSON.parse(log.trim().split('\n').at(-1) ?? '{}') as Results;
    expect(results).toEqual({
      kubernetes: '10.96.0.1',
      web: service.spec?.clusterIP,
      webFqdn: service.spec?.clusterIP,
      webBody: 'hello-from-web\n',
      version: 'v1.34.4',
      versionByName: 'v1.34.4',
      user: `system:serviceaccount:${ns}:default`,
      node: marker,
    });
    // The request came from the pod's own address (on the bridge), not from the node.
    const checks = await core.readNamespacedPod({ name: 'checks', namespace: ns });
    expect(node.peers).toContain(checks.status?.podIP);
  });
});

/** The pod's final phase (Succeeded or Failed), waiting up to 120 s (its checks take up to 60 s each). */
async function finished(core: ReturnType<typeof clients>['core'], namespace: string, name: string): Promise<string> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const found = await core.readNamespacedPod({ name, namespace });
    const phase = found.status?.phase ?? '';
    if (phase === 'Succeeded' || phase === 'Failed') return phase;
    if (Date.now() > deadline)
      throw new Error(`pod ${name} is ${phase} after 120 s: ${JSON.stringify(found.status?.containerStatuses)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
