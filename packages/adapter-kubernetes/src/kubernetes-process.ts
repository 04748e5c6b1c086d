import { startSpawnedProcess, type SandboxProcess } from '@acs/core/ports';
import type { ExecChannel } from './exec-channel.js';

export interface KubernetesProcessOptions {
  sandboxId: string;
  command: readonly string[];
  tty: boolean;
  /** Opens an exec session in the sandbox's container (argv, with stdin or not). */
  open(argv: readonly string[], stdin: boolean, tty: boolean): Promise<ExecChannel>;
  /** The wrapper's argv before the spawn protocol's (changes directory and sets the environment). */
  prefix: readonly string[];
}

/**
 * Starts `command` over an interactive `pods/exec` session (stdin open; with `tty`, on a
 * terminal), under core's spawn protocol (startSpawnedProcess), which reads the start and ends
 * the process; this file speaks only to the exec channel.
 */
export function startKubernetesProcess(options: KubernetesProcessOptions): Promise<SandboxProcess> {
  return startSpawnedProcess({
    sandboxId: options.sandboxId,
    command: options.command,
    open: async (argv, feed) => {
      const channel = await options.open([...options.prefix, ...argv], true, options.tty);
      channel.onStdout(feed.stdout);
      channel.onStderr(feed.stderr);
      void channel.ended.then((end) => feed.ended(end));
      return {
        write: (data) => channel.write(data),
        destroy: () => channel.destroy(),
        runBeside: async (killer, deadlineMs) => {
          const beside = await options.open(killer, false, false);
          const timer = setTimeout(() => beside.destroy(), deadlineMs);
          await beside.ended;
          clearTimeout(timer);
        },
      };
    },
  });
}
