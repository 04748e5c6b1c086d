import { describe, expect, it } from 'vitest';
import {
  effectiveConversationStatus,
  nextConversationStatus,
  type ConversationStatusEvent,
} from '../src/conversation/state.js';
import { isSandboxLost, planSandboxAction, statusAfterObservation, type SandboxAction } from '../src/sandbox/state.js';
import {
  CONVERSATION_STATUSES,
  SANDBOX_STATUSES,
  type ConversationStatus,
  type SandboxLifecycleStatus,
} from '../src/schemas.js';
import type { RuntimeObservation } from '../src/ports.js';

const CONVERSATION_EVENTS = [
  'sandbox_ready',
  'start_failed',
  'sandbox_lost',
  'stop',
  'start',
] as const satisfies readonly ConversationStatusEvent[];
const LIFECYCLE: readonly SandboxLifecycleStatus[] = [...SANDBOX_STATUSES, 'DELETED'];
const ACTIONS = ['pause', 'resume', 'delete', 'attach'] as const satisfies readonly SandboxAction[];
const OBSERVED = [
  'starting',
  'running',
  'paused',
  'error',
  'missing',
] as const satisfies readonly RuntimeObservation['state'][];

/** Every (state, event) pair spelled out: the next status, or 'error'. */
const CONVERSATION_TABLE: Record<ConversationStatus, Record<ConversationStatusEvent, ConversationStatus | 'error'>> = {
  STARTING: {
    sandbox_ready: 'RUNNING',
    start_failed: 'STOPPED',
    sandbox_lost: 'STOPPED',
    stop: 'STOPPED',
    start: 'STARTING',
  },
  RUNNING: {
    sandbox_ready: 'RUNNING',
    start_failed: 'error',
    sandbox_lost: 'STOPPED',
    stop: 'STOPPED',
    start: 'RUNNING',
  },
  STOPPED: {
    sandbox_ready: 'error',
    start_failed: 'STOPPED',
    sandbox_lost: 'STOPPED',
    stop: 'STOPPED',
    start: 'STARTING',
  },
};

const conversationPairs = CONVERSATION_STATUSES.flatMap((from) =>
  CONVERSATION_EVENTS.map((event) => ({ from, event, expected: CONVERSATION_TABLE[from][event] })),
);

describe('nextConversationStatus', () => {
  it('the table covers every status and event', () => {
    expect(CONVERSATION_STATUSES).toEqual(['STARTING', 'RUNNING', 'STOPPED']);
    expect(conversationPairs).toHaveLength(15);
  });

  it.each(conversationPairs)('$from + $event → $expected', ({ from, event, expected }) => {
    const result = nextConversationStatus(from, event);
    if (expected === 'error') {
      expect(result.isErr()).toBe(true);
      expect(result._unsafeUnwrapErr()).toEqual({ from, event });
    } else {
      expect(result.isOk()).toBe(true);
      expect(result._unsafeUnwrap()).toBe(expected);
    }
  });

  it('repeating where the conversation already is returns the same status (no-op)', () => {
    expect(nextConversationStatus('STARTING', 'start')._unsafeUnwrap()).toBe('STARTING');
    expect(nextConversationStatus('RUNNING', 'start')._unsafeUnwrap()).toBe('RUNNING');
    expect(nextConversationStatus('RUNNING', 'sandbox_ready')._unsafeUnwrap()).toBe('RUNNING');
    expect(nextConversationStatus('STOPPED', 'stop')._unsafeUnwrap()).toBe('STOPPED');
  });

  it('follows the documented lifecycle STARTING → RUNNING → STOPPED → STARTING', () => {
    const walk = (['sandbox_ready', 'stop', 'start', 'sandbox_ready', 'sandbox_lost'] as const).reduce<
      ConversationStatus[]
    >(
      (trail, event) => [...trail, nextConversationStatus(trail.at(-1) ?? 'STARTING', event)._unsafeUnwrap()],
      ['STARTING'],
    );
    expect(walk).toEqual(['STARTING', 'RUNNING', 'STOPPED', 'STARTING', 'RUNNING', 'STOPPED']);
  });
});

/** What a client sees: stored status × sandbox status (null = no sandbox). */
const EFFECTIVE_TABLE: Record<ConversationStatus, Record<SandboxLifecycleStatus | 'none', ConversationStatus>> = {
  STARTING: {
    STARTING: 'STARTING',
    RUNNING: 'STARTING',
    PAUSED: 'STARTING',
    ERROR: 'STARTING',
    MISSING: 'STARTING',
    DELETED: 'STARTING',
    none: 'STARTING',
  },
  RUNNING: {
    STARTING: 'STARTING',
    RUNNING: 'RUNNING',
    PAUSED: 'STOPPED',
    ERROR: 'STOPPED',
    MISSING: 'STOPPED',
    DELETED: 'STOPPED',
    none: 'STOPPED',
  },
  STOPPED: {
    STARTING: 'STOPPED',
    RUNNING: 'STOPPED',
    PAUSED: 'STOPPED',
    ERROR: 'STOPPED',
    MISSING: 'STOPPED',
    DELETED: 'STOPPED',
    none: 'STOPPED',
  },
};

describe('effectiveConversationStatus', () => {
  const pairs = CONVERSATION_STATUSES.flatMap((stored) =>
    [...LIFECYCLE, 'none' as const].map((sandbox) => ({ stored, sandbox, expected: EFFECTIVE_TABLE[stored][sandbox] })),
  );

  it('the table covers every pair', () => {
    expect(pairs).toHaveLength(21);
  });

  it.each(pairs)('stored $stored with sandbox $sandbox shows $expected', ({ stored, sandbox, expected }) => {
    expect(effectiveConversationStatus(stored, sandbox === 'none' ? null : sandbox)).toBe(expected);
  });
});

type Plan = 'perform' | 'noop' | 'error';

/** Every (sandbox status, action) pair spelled out. */
const SANDBOX_TABLE: Record<SandboxLifecycleStatus, Record<SandboxAction, Plan>> = {
  STARTING: { pause: 'error', resume: 'noop', delete: 'perform', attach: 'perform' },
  RUNNING: { pause: 'perform', resume: 'noop', delete: 'perform', attach: 'perform' },
  PAUSED: { pause: 'noop', resume: 'perform', delete: 'perform', attach: 'perform' },
  ERROR: { pause: 'error', resume: 'error', delete: 'perform', attach: 'error' },
  MISSING: { pause: 'error', resume: 'error', delete: 'perform', attach: 'error' },
  DELETED: { pause: 'error', resume: 'error', delete: 'error', attach: 'error' },
};

describe('planSandboxAction', () => {
  const pairs = LIFECYCLE.flatMap((from) =>
    ACTIONS.map((action) => ({ from, action, expected: SANDBOX_TABLE[from][action] })),
  );

  it('the table covers every status and action', () => {
    expect(LIFECYCLE).toEqual(['STARTING', 'RUNNING', 'PAUSED', 'ERROR', 'MISSING', 'DELETED']);
    expect(pairs).toHaveLength(24);
  });

  it.each(pairs)('$action from $from → $expected', ({ from, action, expected }) => {
    const result = planSandboxAction(from, action);
    if (expected === 'error') {
      expect(result.isErr()).toBe(true);
      expect(result._unsafeUnwrapErr()).toEqual({ from, action });
    } else {
      expect(result.isOk()).toBe(true);
      expect(result._unsafeUnwrap()).toBe(expected);
    }
  });

  it.each(['DELETED', 'ERROR', 'MISSING'] as const)('resume of %s is an error', (from) => {
    expect(planSandboxAction(from, 'resume').isErr()).toBe(true);
  });

  it('pause and resume are idempotent', () => {
    expect(planSandboxAction('PAUSED', 'pause')._unsafeUnwrap()).toBe('noop');
    expect(planSandboxAction('RUNNING', 'resume')._unsafeUnwrap()).toBe('noop');
  });

  it('attach is allowed from STARTING, RUNNING and PAUSED only', () => {
    expect(LIFECYCLE.filter((s) => planSandboxAction(s, 'attach').isOk())).toEqual(['STARTING', 'RUNNING', 'PAUSED']);
  });
});

/** Observation × stored status: the resulting status. Only DELETED ignores the runtime. */
const OBSERVATION_RESULT: Record<RuntimeObservation['state'], SandboxLifecycleStatus> = {
  starting: 'STARTING',
  running: 'RUNNING',
  paused: 'PAUSED',
  error: 'ERROR',
  missing: 'MISSING',
};

describe('statusAfterObservation', () => {
  const pairs = LIFECYCLE.flatMap((from) =>
    OBSERVED.map((observed) => ({
      from,
      observed,
      expected: from === 'DELETED' ? 'DELETED' : OBSERVATION_RESULT[observed],
    })),
  );

  it('the table covers every pair', () => {
    expect(pairs).toHaveLength(30);
  });

  it.each(pairs)('$from observed $observed → $expected', ({ from, observed, expected }) => {
    expect(statusAfterObservation(from, observed)).toBe(expected);
  });

  it.each(OBSERVED)('never resurrects a DELETED sandbox (observed %s)', (observed) => {
    expect(statusAfterObservation('DELETED', observed)).toBe('DELETED');
  });
});

describe('isSandboxLost', () => {
  it('is true for ERROR, MISSING and DELETED only', () => {
    expect(LIFECYCLE.filter(isSandboxLost)).toEqual(['ERROR', 'MISSING', 'DELETED']);
  });
});
