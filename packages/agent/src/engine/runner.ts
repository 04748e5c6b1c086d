import type { OwnedLease, SandboxRuntimeError, SandboxShell } from '@acs/core/ports';
import type { Result } from 'neverthrow';
import type { McpSession } from '../mcp-session.js';
import { RunnerLog } from './runner-log.js';

/** What the engine holds for one conversation while it runs (and its shell and MCP connections between runs). */
export interface Runner {
  readonly userId: string;
  readonly conversationId: string;
  loop: Promise<void> | null;
  abort: AbortController;
  /** Why the loop is being stopped (words for the observations it leaves; none after a lost lease, whose writes are refused). */
  stopReason: 'paused' | 'shutting down' | 'lease lost';
  /** The conversation's lease while this process runs it (see ConversationOwnership). */
  lease: OwnedLease | null;
  /** A stop asked for by another process is under way (renewals repeat the request until the lease is given up). */
  stopping: boolean;
  /** Set when something arrived while the loop ran; the loop looks again before it exits. */
  wakeRequested: boolean;
  shell: Promise<Result<SandboxShell, SandboxRuntimeError>> | null;
  readonly editHistory: Map<string, string[]>;
  /** The runner's copy of the log while it runs (emptied at rest), with what steps read off it. */
  log: RunnerLog;
  /** The last event id the agent has acted on (shown to the model, or stopped with an error after); null until read from the log. */
  handledUpTo: number | null;
  /** The conversation's MCP servers, connected for its sandbox; null until the first run that has servers. */
  mcp: { session: McpSession; fingerprint: string } | null;
  /** The last model call said the prompt was too long and a forced condensation followed: a second refusal is final. */
  forcedCondensation: boolean;
}

/** Whether the loop goes on after a step. */
export type StepEnd = 'continue' | 'stop';

export const stoppedWhy = (r: Runner) =>
  r.stopReason === 'paused' ? 'paused' : r.stopReason === 'lease lost' ? 'taken over by another process' : 'stopped by a shutdown of the service';

/** Thrown by a write of a runner whose lease another process holds now: the loop stops without writing anything more. */
export class LeaseLostError extends Error {
  constructor(readonly conversationId: string, why: string) {
    super(`the lease of conversation ${conversationId} was lost: ${why}`);
    this.name = 'LeaseLostError';
  }
}

/** The runners of one engine, one per conversation, keyed by (user, conversation). */
export class RunnerRegistry {
  readonly #runners = new Map<string, Runner>();

  static keyOf(userId: string, conversationId: string): string {
    return `${userId}\u0000${conversationId}`;
  }

  /** The conversation's runner, made on first use. */
  runnerFor(userId: string, conversationId: string): Runner {
    const key = RunnerRegistry.keyOf(userId, conversationId);
    let r = this.#runners.get(key);
    if (!r) {
      r = {
        userId,
        conversationId,
        loop: null,
        abort: new AbortController(),
        stopReason: 'paused',
        lease: null,
        stopping: false,
        wakeRequested: false,
        shell: null,
        editHistory: new Map(),
        log: new RunnerLog(),
        handledUpTo: null,
        mcp: null,
        forcedCondensation: false,
      };
      this.#runners.set(key, r);
    }
    return r;
  }

  get(userId: string, conversationId: string): Runner | undefined {
    return this.#runners.get(RunnerRegistry.keyOf(userId, conversationId));
  }

  delete(userId: string, conversationId: string): void {
    this.#runners.delete(RunnerRegistry.keyOf(userId, conversationId));
  }

  all(): Runner[] {
    return [...this.#runners.values()];
  }
}
