import type { OwnedLease, SandboxRuntimeError, SandboxShell } from '@acs/core/ports';
import type { Result } from 'neverthrow';
import type { McpSession } from '../mcp-session.js';
import { RunnerLog } from './runner-log.js';

/** Whether the loop goes on after a step. */
export type StepEnd = 'continue' | 'stop';

/** Why a run is being stopped (words for the observations it leaves; none after a lost lease, whose writes are refused). */
export type StopReason = 'paused' | 'shutting down' | 'lease lost';

/** A conversation's MCP servers, connected for its sandbox and configuration (the fingerprint). */
export interface ConnectedMcp {
  session: McpSession;
  fingerprint: string;
}

type OpeningShell = Promise<Result<SandboxShell, SandboxRuntimeError>>;

/**
 * What the engine holds for one conversation: whether a run of its loop is under way, the lease
 * it runs under, the shell and MCP connections kept between runs, and the run's copy of the log.
 *
 * Every field is private and changes only through the transitions below, so this file is the
 * whole state machine of a run:
 *
 *   at rest ──begin──▶ running ──(run ends)──▶ at rest (or running again when a wake came in)
 *                        │
 *                      stop(why) ──▶ stopped: the signal is aborted; the next begin starts afresh
 *
 * beside it the lease (held, given up, lost) and the per-run working state (the log copy, what
 * the agent has handled, a forced condensation) that the end of a run clears.
 */
export class Runner {
  readonly editHistory = new Map<string, string[]>();
  #running: Promise<void> | null = null;
  #abort = new AbortController();
  #stopReason: StopReason = 'paused';
  #lease: OwnedLease | null = null;
  #leaseLost = false;
  #stopping = false;
  #wakeRequested = false;
  #shell: OpeningShell | null = null;
  #mcp: ConnectedMcp | null = null;
  #log = new RunnerLog();
  #handledUpTo: number | null = null;
  #forcedCondensation = false;

  constructor(
    readonly userId: string,
    readonly conversationId: string,
  ) {}

  // ---- the run ----

  /** The run under way, if any (await it to wait for the loop to end). */
  get running(): Promise<void> | null {
    return this.#running;
  }

  /** Aborted when the run is stopped: tools, model calls and waits listen to it. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get stopped(): boolean {
    return this.#abort.signal.aborted;
  }

  get stopReason(): StopReason {
    return this.#stopReason;
  }

  /** Starts a run (afresh after a stop); `run` is called before anything awaits, so a second begin cannot start a second run. */
  begin(run: () => Promise<void>, ended: () => void): Promise<void> {
    if (this.stopped) {
      this.#abort = new AbortController();
      this.#stopReason = 'paused';
    }
    const running: Promise<void> = Promise.resolve()
      .then(run)
      .finally(() => {
        this.#running = null;
        ended();
      });
    this.#running = running;
    return running;
  }

  /**
   * After a run ended: 'again' when a wake came in while it was ending (and it was not stopped);
   * else the run's working state is cleared ('rest': an agent at rest keeps no copy of its log,
   * it is read again on the next run; the shell and MCP connections stay).
   */
  settle(): 'again' | 'rest' {
    if (this.#wakeRequested && !this.stopped) {
      this.#wakeRequested = false;
      return 'again';
    }
    this.#log = new RunnerLog();
    this.#handledUpTo = null;
    return 'rest';
  }

  /** Stops the run: aborts its signal and says why. */
  stop(why: StopReason): void {
    this.#stopReason = why;
    this.#abort.abort();
  }

  /** Something arrived while the loop ran; it looks again before it exits. */
  requestWake(): void {
    this.#wakeRequested = true;
  }

  /** Whether a wake was asked for since the last look (and forget it). */
  takeWake(): boolean {
    const requested = this.#wakeRequested;
    this.#wakeRequested = false;
    return requested;
  }

  get wakeRequested(): boolean {
    return this.#wakeRequested;
  }

  // ---- the lease ----

  /** The conversation's lease while this process runs it (see ConversationOwnership). */
  get lease(): OwnedLease | null {
    return this.#lease;
  }

  /** Another process took the lease from this one; nothing is written until a lease is held again. */
  get leaseLost(): boolean {
    return this.#leaseLost;
  }

  hold(lease: OwnedLease): void {
    this.#lease = lease;
    this.#leaseLost = false;
  }

  /** Lets go of the lease (the caller gives it up to the store, if it must); the one held, if any. */
  letGo(): OwnedLease | null {
    const lease = this.#lease;
    this.#lease = null;
    return lease;
  }

  /** Another process holds the lease now: the run stops and writes nothing more. */
  loseLease(): void {
    this.#lease = null;
    this.#leaseLost = true;
    this.stop('lease lost');
  }

  /** A stop asked for by another process begins; false when one is under way already (renewals repeat the request). */
  beginStopping(): boolean {
    if (this.#stopping) return false;
    this.#stopping = true;
    return true;
  }

  endStopping(): void {
    this.#stopping = false;
  }

  // ---- what a run works on ----

  /** The run's copy of the log (emptied at rest), with what steps read off it. */
  get log(): RunnerLog {
    return this.#log;
  }

  /** The last event id the agent has acted on (shown to the model, or stopped with an error after); null until read from the log. */
  get handledUpTo(): number | null {
    return this.#handledUpTo;
  }

  handled(upTo: number): void {
    this.#handledUpTo = upTo;
  }

  /** The last model call said the prompt was too long and a forced condensation followed: a second refusal is final. */
  get forcedCondensation(): boolean {
    return this.#forcedCondensation;
  }

  setForcedCondensation(forced: boolean): void {
    this.#forcedCondensation = forced;
  }

  // ---- what it keeps open in the sandbox between runs ----

  /** The conversation's shell, opened by `open` on first use (and again after a failed opening). */
  shell(open: () => OpeningShell): OpeningShell {
    if (this.#shell) return this.#shell;
    const opening = open().then((result) => {
      if (result.isErr() && this.#shell === opening) this.#shell = null;
      return result;
    });
    this.#shell = opening;
    return opening;
  }

  /** The shell's opening, if any, forgotten here (the caller closes it). */
  takeShell(): OpeningShell | null {
    const shell = this.#shell;
    this.#shell = null;
    return shell;
  }

  /** The conversation's MCP servers, connected for its sandbox; null until a run that has servers. */
  get mcp(): ConnectedMcp | null {
    return this.#mcp;
  }

  connected(mcp: ConnectedMcp): void {
    this.#mcp = mcp;
  }

  /** The MCP connections, if any, forgotten here (the caller closes them). */
  takeMcp(): ConnectedMcp | null {
    const mcp = this.#mcp;
    this.#mcp = null;
    return mcp;
  }
}

export const stoppedWhy = (r: Runner) =>
  r.stopReason === 'paused'
    ? 'paused'
    : r.stopReason === 'lease lost'
      ? 'taken over by another process'
      : 'stopped by a shutdown of the service';

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
      r = new Runner(userId, conversationId);
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
