import type { OwnedLease, SandboxRuntimeError, SandboxShell } from '@acs/core/ports';
import type { Result } from 'neverthrow';
import type { McpSession } from '../mcp-session.js';
import { RunnerLog } from './runner-log.js';

/**
 * How a step (or a replay, or settling a decision) ends: the turn goes on ('continue') or ends
 * ('stop'). An `Answered` end also says up to which event the agent has answered the log; the
 * loop keeps that mark (loop.ts) and gives a user message after it another turn.
 */
export type StepEnd = 'continue' | 'stop' | Answered;

/** The agent has answered the log up to `upTo`: the prompt of a model call, the log it stopped on with an error, a finished replay, a rejection. */
export interface Answered {
  readonly upTo: number;
  readonly then: 'continue' | 'stop';
}

/** Whether the turn ends with this step. */
export const ends = (end: StepEnd): boolean => (typeof end === 'string' ? end : end.then) === 'stop';

/** Up to where `end` says the agent has answered, else `upTo`. */
export const answeredUpTo = (end: StepEnd, upTo: number): number => (typeof end === 'string' ? upTo : end.upTo);

/** `end` as answered up to `upTo`, unless it says otherwise (a stop on an error that came later). */
export const answering = (upTo: number, end: StepEnd): Answered =>
  typeof end === 'string' ? { upTo, then: end } : end;

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
 *   at rest ──begin──▶ running ──end──▶ at rest (unless a wake came in: the loop goes on)
 *                        │
 *                      stop(why) ──▶ stopped: the signal is aborted; the next begin starts afresh
 *
 * beside it the lease (held, given up, lost), the run's working state (its copy of the log,
 * which the end of a run empties; a forced condensation), and the shell and MCP connections,
 * which the runner opens on first use and closes (`release`) when the engine says their time is
 * up. What the agent has answered is not here: it is the run's loop's own (loop.ts).
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

  /**
   * Starts a run (afresh after a stop); `run` is called before anything awaits, so a second
   * begin cannot start a second run. The run ends itself (`end`); one that threw (a defect,
   * logged by the background tasks) is put at rest here.
   */
  begin(run: () => Promise<void>): Promise<void> {
    if (this.stopped) {
      this.#abort = new AbortController();
      this.#stopReason = 'paused';
    }
    const running: Promise<void> = Promise.resolve()
      .then(run)
      .finally(() => {
        if (this.#running === running) this.#rest();
      });
    this.#running = running;
    return running;
  }

  /**
   * The run ends, unless a wake came in (and the run was not stopped, and `mayGoOn`): then the
   * wake is taken and false says the loop goes on. Ending puts the runner at rest in the same
   * step as that look at the wake, so a wake is either seen here or starts a new run: an agent at
   * rest keeps no copy of its log (it is read again on the next run); the shell and MCP
   * connections stay.
   */
  end(mayGoOn: boolean): boolean {
    if (this.#wakeRequested && !this.stopped && mayGoOn) {
      this.#wakeRequested = false;
      return false;
    }
    this.#rest();
    return true;
  }

  #rest(): void {
    this.#running = null;
    this.#log = new RunnerLog();
  }

  /** Stops the run: aborts its signal and says why. */
  stop(why: StopReason): void {
    this.#stopReason = why;
    this.#abort.abort();
  }

  /** Something arrived while the loop ran; it looks again before it ends. */
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

  /** Closes the shell, if one is open (it died, or the conversation lets go of its sandbox); the next `shell` opens a new one. */
  async closeShell(): Promise<void> {
    const opening = this.#shell;
    this.#shell = null;
    if (!opening) return;
    const shell = await opening;
    if (shell.isOk()) await shell.value.close().catch(() => undefined);
  }

  /** The conversation's MCP servers, connected for its sandbox; null until a run that has servers. */
  get mcp(): ConnectedMcp | null {
    return this.#mcp;
  }

  connected(mcp: ConnectedMcp): void {
    this.#mcp = mcp;
  }

  /** Closes the MCP connections (and their processes), if any. */
  async closeMcp(): Promise<void> {
    const mcp = this.#mcp;
    this.#mcp = null;
    await mcp?.session.close();
  }

  /** Closes what the conversation holds in its sandbox: the shell and the MCP connections. */
  async release(): Promise<void> {
    await this.closeShell();
    await this.closeMcp();
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
