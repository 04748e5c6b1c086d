import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { CONTAINER } from './manifest.js';

/** What a sandbox's pod says about it: a state for the port, or `ready` (running and Ready: an exec decides). */
export type PodReading = { state: 'starting' | 'error'; detail: string } | { state: 'ready' };

/** Waiting reasons of a container that will not start without a change (image, configuration) or keeps crashing. */
const CANNOT_START = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'ErrImageNeverPull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'CrashLoopBackOff',
  'PreCreateHookError',
  'PreStartHookError',
]);

/** A scheduler message that only means "not yet": the workspace claim is still being bound. */
const WAITING_FOR_CLAIM =
  /unbound immediate PersistentVolumeClaims|persistentvolumeclaim "[^"]+" not found|waiting for (first consumer|volume)/i;

const sentence = (...parts: (string | null | undefined)[]) =>
  parts
    .map((p) => p?.trim())
    .filter(Boolean)
    .join(': ');

/**
 * Reads a sandbox's pod the way a person would in `kubectl describe`: Pending with the step it is
 * at (scheduling, the claim, pulling the image, creating the container: the latest event's
 * words), or an error with the reason Kubernetes gives (image missing, unschedulable for longer
 * than `unschedulableAfterMs`, crash loop, evicted).
 */
export function readPod(
  pod: V1Pod,
  events: readonly CoreV1Event[],
  now: number,
  unschedulableAfterMs: number,
): PodReading {
  if (pod.metadata?.deletionTimestamp)
    return { state: 'starting', detail: 'waiting for the pod of its last run to end' };
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') {
    return {
      state: 'error',
      detail: sentence(`its pod ${phase === 'Failed' ? 'failed' : 'ended'}`, pod.status?.reason, pod.status?.message),
    };
  }
  const container = pod.status?.containerStatuses?.find((c) => c.name === CONTAINER);
  const waiting = container?.state?.waiting;
  if (waiting?.reason && CANNOT_START.has(waiting.reason)) {
    const last = container?.lastState?.terminated;
    const exited = last
      ? `it exited with code ${last.exitCode}${last.reason && last.reason !== 'Error' ? ` (${last.reason})` : ''}`
      : null;
    return { state: 'error', detail: sentence(`the pod cannot start (${waiting.reason})`, waiting.message, exited) };
  }
  const terminated = container?.state?.terminated;
  if (terminated) {
    return {
      state: 'error',
      detail: sentence(
        `its container exited with code ${terminated.exitCode}${terminated.reason && terminated.reason !== 'Error' ? ` (${terminated.reason})` : ''}`,
        terminated.message,
      ),
    };
  }
  if (container?.state?.running) {
    return container.ready
      ? { state: 'ready' }
      : { state: 'starting', detail: 'waiting for the container to be ready' };
  }
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status !== 'True') {
    if (scheduled?.reason === 'Unschedulable') {
      const message = scheduled.message ?? 'no node can take it';
      if (WAITING_FOR_CLAIM.test(message))
        return { state: 'starting', detail: 'waiting for its workspace claim to be bound' };
      const since = scheduled.lastTransitionTime ? new Date(scheduled.lastTransitionTime).getTime() : now;
      if (now - since >= unschedulableAfterMs)
        return { state: 'error', detail: sentence('the pod cannot be scheduled (Unschedulable)', message) };
      return { state: 'starting', detail: sentence('waiting to be scheduled', message) };
    }
    return { state: 'starting', detail: 'waiting to be scheduled' };
  }
  const latest = latestEvent(events);
  return {
    state: 'starting',
    detail: latest
      ? sentence(`${latest.reason ?? 'starting'}`, latest.message)
      : sentence('creating the container', waiting?.reason),
  };
}

/** The most recent of a pod's events (by last time seen). */
export function latestEvent(events: readonly CoreV1Event[]): CoreV1Event | null {
  const when = (e: CoreV1Event) =>
    new Date(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata.creationTimestamp ?? 0).getTime();
  let latest: CoreV1Event | null = null;
  for (const event of events) if (!latest || when(event) >= when(latest)) latest = event;
  return latest;
}
