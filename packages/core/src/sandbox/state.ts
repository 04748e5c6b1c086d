import { err, ok, type Result } from 'neverthrow';
import { match, P } from 'ts-pattern';
import type { SandboxLifecycleStatus } from './schema.js';
import type { RuntimeObservation } from './runtime.js';

/** `attach`: start a new conversation in an existing sandbox. */
export type SandboxAction = 'pause' | 'resume' | 'delete' | 'attach';

/** `noop` when the sandbox is already where the action would take it (pause and resume are idempotent). */
export type SandboxPlan = 'perform' | 'noop';

export interface IllegalSandboxAction {
  readonly from: SandboxLifecycleStatus;
  readonly action: SandboxAction;
}

/** Decides whether a user action is legal in the sandbox's current state. */
export function planSandboxAction(
  from: SandboxLifecycleStatus,
  action: SandboxAction,
): Result<SandboxPlan, IllegalSandboxAction> {
  return match<[SandboxLifecycleStatus, SandboxAction], Result<SandboxPlan, IllegalSandboxAction>>([from, action])
    .with(['RUNNING', 'pause'], () => ok('perform'))
    .with(['PAUSED', 'pause'], () => ok('noop'))
    .with(['PAUSED', 'resume'], () => ok('perform'))
    .with([P.union('RUNNING', 'STARTING'), 'resume'], () => ok('noop'))
    .with(['DELETED', 'delete'], () => err({ from, action }))
    .with([P.union('STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING'), 'delete'], () => ok('perform'))
    .with([P.union('STARTING', 'ERROR', 'MISSING', 'DELETED'), 'pause'], () => err({ from, action }))
    .with([P.union('ERROR', 'MISSING', 'DELETED'), 'resume'], () => err({ from, action }))
    .with([P.union('STARTING', 'RUNNING', 'PAUSED'), 'attach'], () => ok('perform'))
    .with([P.union('ERROR', 'MISSING', 'DELETED'), 'attach'], () => err({ from, action }))
    .exhaustive();
}

/** The status a runtime observation means. A deleted sandbox stays deleted whatever the runtime says. */
export function statusAfterObservation(
  from: SandboxLifecycleStatus,
  observed: RuntimeObservation['state'],
): SandboxLifecycleStatus {
  return match<[SandboxLifecycleStatus, RuntimeObservation['state']], SandboxLifecycleStatus>([from, observed])
    .with(['DELETED', P._], () => 'DELETED')
    .with([P._, 'starting'], () => 'STARTING')
    .with([P._, 'running'], () => 'RUNNING')
    .with([P._, 'paused'], () => 'PAUSED')
    .with([P._, 'error'], () => 'ERROR')
    .with([P._, 'missing'], () => 'MISSING')
    .exhaustive();
}

/** Whether a sandbox in this status can no longer run anything without being recreated. */
export const isSandboxLost = (status: SandboxLifecycleStatus): boolean =>
  status === 'ERROR' || status === 'MISSING' || status === 'DELETED';
