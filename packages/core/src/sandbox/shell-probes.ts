import type { SandboxRuntime } from './runtime.js';

/**
 * Small sh scripts the persistent shell runs in its sandbox beside itself (through `exec`, not
 * through the shell, so they work while a command holds it): they look at the terminal's
 * foreground process group in /proc and signal it.
 */
export class ShellProbes {
  constructor(
    private readonly runtime: SandboxRuntime,
    private readonly sandboxId: string,
  ) {}

  /**
   * Looks at the foreground process group of the terminal of the shell `pid`: `shell` when bash
   * itself is there; otherwise, when its leader would die of SIGINT (neither ignores nor handles
   * it), sends the group SIGINT and says `signalled`; else (or with no pid known yet) `waiting`.
   */
  async repairInterrupt(pid: number | null): Promise<'shell' | 'signalled' | 'waiting'> {
    if (pid === null) return 'waiting';
    const script = [
      `read -r _ _ _ _ _ _ _ fg _ < /proc/${pid}/stat || exit 1`,
      `[ "$fg" = ${pid} ] && { echo shell; exit 0; }`,
      '[ "$fg" -gt 0 ] 2>/dev/null || { echo waiting; exit 0; }',
      // The last hex digit of the ignored and the caught masks; bit 2 of each is SIGINT.
      'mask=; while read -r key value; do case "$key" in SigIgn:|SigCgt:) mask="$mask${value#"${value%?}"}";; esac; done < /proc/"$fg"/status',
      'case "$mask" in ""|*[2367abefABEF]*) echo waiting; exit 0;; esac',
      'kill -INT -"$fg" 2>/dev/null && echo signalled || echo waiting',
    ].join('\n');
    const said = (await this.#run(script)).trim();
    return said === 'shell' || said === 'signalled' ? said : 'waiting';
  }

  /** SIGKILL to the foreground process group of the terminal of the shell `pid`, for a command that ignored Ctrl-C (never the shell itself). */
  async killForeground(pid: number | null): Promise<void> {
    if (pid === null) return;
    await this.#run(
      `read -r _ _ _ _ _ _ _ fg _ < /proc/${pid}/stat && [ "$fg" -gt 0 ] && [ "$fg" != ${pid} ] && kill -KILL -"$fg"`,
    );
  }

  /** SIGHUP to the shell `pid`: bash hangs up its jobs and exits. */
  async hangUp(pid: number): Promise<void> {
    await this.#run(`kill -HUP ${pid}`);
  }

  /** Runs a script; what it printed. */
  async #run(script: string): Promise<string> {
    const result = await this.runtime.exec(this.sandboxId, { command: ['sh', '-c', script], timeoutMs: 5_000 });
    return result.isOk() ? result.value.stdout : '';
  }
}
