import type { ExecRequest, ExecResult } from '@acs/core/ports';

/** What a registered command handler sees. */
export interface FakeExecContext {
  sandboxId: string;
  /** The working directory the command runs in (resolved). */
  cwd: string;
  /** The sandbox's files, shared with readFile/writeFile. */
  files: Map<string, Uint8Array>;
  signal: AbortSignal;
  /** In the persistent shell (fake-bash.ts): the text sendInput writes while the command runs; it ends when the command is interrupted. Absent for exec. */
  input?: AsyncIterable<string>;
}

export type FakeExecHandler = (
  request: ExecRequest,
  context: FakeExecContext,
) =>
  | Partial<Omit<ExecResult, 'duration_ms' | 'timed_out'>>
  | Promise<Partial<Omit<ExecResult, 'duration_ms' | 'timed_out'>>>;
