import { describe, expect, it } from 'vitest';
import { nextExecutionStatus, type ExecutionEvent } from '../src/index.js';
import { EXECUTION_STATUSES, type ExecutionStatus } from '../src/schemas.js';

const EVENTS = [
  'ready',
  'run',
  'finish',
  'fail',
  'stuck',
  'pause',
  'await_confirmation',
  'reject',
  'await_message',
] as const satisfies readonly ExecutionEvent[];
type From = ExecutionStatus | 'null';

/** Every (status, event) pair spelled out: the next status, or 'ILLEGAL'. */
const TABLE: Record<From, Record<ExecutionEvent, ExecutionStatus | 'ILLEGAL'>> = {
  null: {
    ready: 'idle',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'idle',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
  idle: {
    ready: 'idle',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'idle',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
  running: {
    ready: 'running',
    run: 'running',
    finish: 'finished',
    fail: 'error',
    stuck: 'stuck',
    pause: 'paused',
    await_confirmation: 'waiting_for_confirmation',
    reject: 'ILLEGAL',
    await_message: 'idle',
  },
  paused: {
    ready: 'paused',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'paused',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
  waiting_for_confirmation: {
    ready: 'waiting_for_confirmation',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'paused',
    await_confirmation: 'ILLEGAL',
    reject: 'idle',
    await_message: 'ILLEGAL',
  },
  finished: {
    ready: 'finished',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'finished',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
  error: {
    ready: 'error',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'error',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
  stuck: {
    ready: 'stuck',
    run: 'running',
    finish: 'ILLEGAL',
    fail: 'ILLEGAL',
    stuck: 'ILLEGAL',
    pause: 'stuck',
    await_confirmation: 'ILLEGAL',
    reject: 'ILLEGAL',
    await_message: 'ILLEGAL',
  },
};

const pairs = (['null', ...EXECUTION_STATUSES] as From[]).flatMap((from) =>
  EVENTS.map((event) => ({ from, event, expected: TABLE[from][event] })),
);

describe('nextExecutionStatus', () => {
  it('the table covers every status (and "not started") and every event', () => {
    expect(pairs).toHaveLength((EXECUTION_STATUSES.length + 1) * EVENTS.length);
  });

  it.each(pairs)('$from + $event → $expected', ({ from, event, expected }) => {
    const status = from === 'null' ? null : from;
    const result = nextExecutionStatus(status, event);
    if (expected === 'ILLEGAL') expect(result._unsafeUnwrapErr()).toEqual({ from: status, event });
    else expect(result._unsafeUnwrap()).toBe(expected);
  });
});
