import { describe, expect, it } from 'vitest';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { specFixture } from '@acs/core/testing';
import { exitCodeOf } from '../src/exec-channel.js';
import { labelValue, resourcesFor, sandboxStatefulSet } from '../src/manifest.js';
import { readPod } from '../src/observe.js';

// What the runtime makes of what the API says, without a cluster: pod readings, exec statuses,
// manifests. The cluster tests (contracts, service, pods, conversation) check the same against a real one.

const NOW = Date.parse('2026-01-01T00:10:00Z');
const pod = (status: V1Pod['status'], metadata: V1Pod['metadata'] = {}): V1Pod => ({
  metadata: { name: 'acs-x-0', ...metadata },
  status,
});
const scheduled = { type: 'PodScheduled', status: 'True' };

describe('reading a sandbox pod', () => {
  it('is ready when its container runs and is Ready; starting while the container is not ready yet', () => {
    expect(
      readPod(
        pod({
          phase: 'Running',
          conditions: [scheduled],
          containerStatuses: [
            { name: 'sandbox', ready: true, restartCount: 0, image: 'i', imageID: '', state: { running: {} } },
          ],
        }),
        [],
        NOW,
        60_000,
      ),
    ).toEqual({ state: 'ready' });
    expect(
      readPod(
        pod({
          phase: 'Running',
          containerStatuses: [
            { name: 'sandbox', ready: false, restartCount: 0, image: 'i', imageID: '', state: { running: {} } },
          ],
        }),
        [],
        NOW,
        60_000,
      ),
    ).toMatchObject({ state: 'starting' });
  });

  it("says which step a pending pod is at, in the latest event's words", () => {
    const events = [
      {
        metadata: {},
        involvedObject: {},
        reason: 'Scheduled',
        message: 'Successfully assigned ns/acs-x-0 to localhost',
        lastTimestamp: new Date('2026-01-01T00:09:00Z'),
      },
      {
        metadata: {},
        involvedObject: {},
        reason: 'Pulling',
        message: 'Pulling image "python:3.12"',
        lastTimestamp: new Date('2026-01-01T00:09:30Z'),
      },
    ] as CoreV1Event[];
    expect(
      readPod(
        pod({
          phase: 'Pending',
          conditions: [scheduled],
          containerStatuses: [
            {
              name: 'sandbox',
              ready: false,
              restartCount: 0,
              image: 'i',
              imageID: '',
              state: { waiting: { reason: 'ContainerCreating' } },
            },
          ],
        }),
        events,
        NOW,
        60_000,
      ),
    ).toEqual({
      state: 'starting',
      detail: 'Pulling: Pulling image "python:3.12"',
    });
    expect(readPod(pod({ phase: 'Pending' }), [], NOW, 60_000)).toEqual({
      state: 'starting',
      detail: 'waiting to be scheduled',
    });
    expect(
      readPod(
        pod({
          phase: 'Pending',
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.',
            },
          ],
        }),
        [],
        NOW,
        0,
      ),
    ).toEqual({
      state: 'starting',
      detail: 'waiting for its workspace claim to be bound',
    });
    expect(readPod(pod({ phase: 'Running' }, { deletionTimestamp: new Date(NOW) }), [], NOW, 60_000)).toMatchObject({
      state: 'starting',
      detail: expect.stringMatching(/last run to end/) as unknown,
    });
  });

  it('is an error, with the reason Kubernetes gives, for a missing image, a crash loop, an eviction, and a pod unschedulable for too long', () => {
    const waiting = (reason: string, message: string, lastState?: object) =>
      pod({
        phase: 'Pending',
        conditions: [scheduled],
        containerStatuses: [
          {
            name: 'sandbox',
            ready: false,
            restartCount: 1,
            image: 'i',
            imageID: '',
            state: { waiting: { reason, message } },
            ...(lastState ? { lastState } : {}),
          },
        ],
      });
    expect(
      readPod(
        waiting('ErrImageNeverPull', 'Container image "nope:1" is not present with pull policy of Never'),
        [],
        NOW,
        60_000,
      ),
    ).toEqual({
      state: 'error',
      detail:
        'the pod cannot start (ErrImageNeverPull): Container image "nope:1" is not present with pull policy of Never',
    });
    expect(
      readPod(
        waiting('CrashLoopBackOff', 'back-off 10s restarting failed container', {
          terminated: { exitCode: 3, reason: 'Error' },
        }),
        [],
        NOW,
        60_000,
      ),
    ).toEqual({
      state: 'error',
      detail:
        'the pod cannot start (CrashLoopBackOff): back-off 10s restarting failed container: it exited with code 3',
    });
    expect(
      readPod(
        pod({ phase: 'Failed', reason: 'Evicted', message: 'The node was low on resource: memory.' }),
        [],
        NOW,
        60_000,
      ),
    ).toEqual({
      state: 'error',
      detail: 'its pod failed: Evicted: The node was low on resource: memory.',
    });
    const unschedulable = pod({
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
          lastTransitionTime: new Date(NOW - 30_000),
        },
      ],
    });
    expect(readPod(unschedulable, [], NOW, 60_000)).toEqual({
      state: 'starting',
      detail: "waiting to be scheduled: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    });
    expect(readPod(unschedulable, [], NOW, 20_000)).toEqual({
      state: 'error',
      detail:
        "the pod cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    });
  });
});

describe('the exec status channel', () => {
  it('reads the exit code: 0 for Success, the ExitCode cause for NonZeroExitCode, null and the message otherwise', () => {
    expect(exitCodeOf('{"metadata":{},"status":"Success"}')).toEqual({ exitCode: 0, message: null });
    expect(
      exitCodeOf(
        '{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}',
      ),
    ).toEqual({ exitCode: 3, message: null });
    expect(
      exitCodeOf('{"status":"Failure","message":"container not found (\\"sandbox\\")","reason":"InternalError"}'),
    ).toEqual({ exitCode: null, message: 'container not found ("sandbox")' });
    expect(exitCodeOf('not json')).toMatchObject({
      exitCode: null,
      message: expect.stringMatching(/could not be read/) as unknown,
    });
  });
});

describe('the sandbox manifest', () => {
  const spec = specFixture({
    id: 'bookworm',
    image: 'acs-sandbox:bookworm',
    working_dir: '/workspace',
    command: null,
    initial_env: {},
  });
  const options = {
    namePrefix: 'acs-',
    resources: { cpus: 1, memoryBytes: 2 * 1024 ** 3, requestShare: 0.25, workspaceSize: '10Gi' },
    storageClassName: 'fast',
    imagePullPolicy: 'IfNotPresent' as const,
    readOnlyRootFilesystem: true,
    writablePaths: ['/tmp', '/workspace'],
    placement: { runtimeClassName: 'gvisor', nodeSelector: { pool: 'sandboxes' } },
  };

  it('labels what a label can hold and keeps the exact ids in annotations', () => {
    expect(labelValue('alice')).toBe('alice');
    expect(labelValue('acs:sandbox-pool')).toMatch(/^h-[0-9a-f]{40}$/);
    expect(labelValue('a'.repeat(64))).toMatch(/^h-/);
    const set = sandboxStatefulSet(
      {
        sandbox_id: 'f'.repeat(32),
        user_id: 'alice@example.com',
        installation_id: 'inst-1',
        spec,
        env: { A: '1' },
        resource_factor: 2,
      },
      options,
    );
    expect(set.metadata?.labels).toMatchObject({
      'io.acs.managed': 'true',
      'io.acs.installation-id': 'inst-1',
      'io.acs.sandbox-id': 'f'.repeat(32),
      'io.acs.user-id': labelValue('alice@example.com'),
    });
    expect(set.metadata?.annotations).toMatchObject({
      'io.acs/user-id': 'alice@example.com',
      'io.acs/working-dir': '/workspace',
    });
    expect(set.spec?.template.metadata?.labels).toEqual(set.metadata?.labels);
  });

  it('asks for no token, no privilege, a read-only root with writable scratch, the placement, and limits scaled by the factor', () => {
    const set = sandboxStatefulSet(
      {
        sandbox_id: 'f'.repeat(32),
        user_id: 'alice',
        installation_id: 'inst-1',
        spec,
        env: { A: '1' },
        resource_factor: 2,
      },
      options,
    );
    const pod = set.spec!.template.spec!;
    expect(pod).toMatchObject({
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      runtimeClassName: 'gvisor',
      nodeSelector: { pool: 'sandboxes' },
    });
    const container = pod.containers[0]!;
    expect(container.securityContext).toMatchObject({
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.resources).toEqual({
      limits: { cpu: '2000m', memory: `${4 * 1024 ** 2}Ki` },
      requests: { cpu: '500m', memory: `${1024 ** 2}Ki` },
    });
    expect(container.env).toEqual([{ name: 'A', value: '1' }]);
    // The workspace is the claim, not a scratch directory, even when listed among the writable paths.
    expect(container.volumeMounts).toEqual([
      { name: 'workspace', mountPath: '/workspace' },
      { name: 'writable-0', mountPath: '/tmp' },
    ]);
    expect(set.spec?.volumeClaimTemplates?.[0]?.spec).toMatchObject({
      storageClassName: 'fast',
      resources: { requests: { storage: '10Gi' } },
    });
    expect(set.spec?.persistentVolumeClaimRetentionPolicy).toBeUndefined();
    expect(set.spec?.updateStrategy).toEqual({ type: 'OnDelete' });
    expect(resourcesFor(options.resources, 1).limits).toEqual({ cpu: '1000m', memory: `${2 * 1024 ** 2}Ki` });
  });
});
