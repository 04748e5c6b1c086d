import { isShellEnded, type ShellOutput } from '@acs/core/ports';
import { z } from 'zod';
import { failure, outcome, runtimeFailure, type AgentTool, type ToolOutcome } from './tool.js';

/** Seconds a command may run before the call returns with the command still running. */
const DEFAULT_COMMAND_WAIT_SECONDS = 30;
const MAX_COMMAND_WAIT_SECONDS = 600;

/** Some models send booleans as strings ("true"), as OpenHands' V0 schema asked them to. */
const looseBoolean = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);
const looseSeconds = z
  .union([
    z.number(),
    z
      .string()
      .trim()
      .regex(/^\d+(\.\d+)?$/)
      .transform(Number),
  ])
  .pipe(z.number().min(0));

const BashArguments = z.object({
  command: z.string(),
  is_input: looseBoolean.optional().default(false),
  timeout: looseSeconds.optional(),
});

/** Ctrl-<letter> as the control character it types. */
const controlKey = (command: string): string | null => {
  const m = /^C-([a-z])$/i.exec(command.trim());
  return m ? String.fromCharCode(m[1]!.toLowerCase().charCodeAt(0) - 96) : null;
};

const render = (out: ShellOutput, waitedSeconds: number): ToolOutcome => {
  const lines = [out.output.replace(/\n$/, '')];
  if (out.still_running) {
    lines.push(
      `[The command is still running after ${waitedSeconds} s. To see more output, call execute_bash with an empty command; ` +
        'to answer a prompt, send text with is_input=true; to stop it, send C-c with is_input=true.]',
    );
  } else {
    if (out.cwd) lines.push(`[Current working directory: ${out.cwd}]`);
    lines.push(`[Command finished with exit code ${out.exit_code ?? 'unknown'}]`);
  }
  return outcome(lines.filter((l) => l !== '').join('\n'), {
    exit_code: out.still_running ? null : out.exit_code,
    details: { still_running: out.still_running, cwd: out.cwd, spilled_to: out.spilled_to },
  });
};

export const executeBashTool: AgentTool<typeof BashArguments> = {
  definition: {
    name: 'execute_bash',
    description: [
      'Run a bash command in the sandbox, in a persistent shell: the working directory and exported variables carry over between calls.',
      '* One command at a time; chain several with && or ;.',
      `* A command still running after ${DEFAULT_COMMAND_WAIT_SECONDS} s (or \`timeout\` seconds) keeps running: the call returns what it printed so far.` +
        ' Then call again with an empty command to wait for more, send input with is_input=true, or interrupt it with command "C-c" and is_input=true.',
      '* Run servers and other endless commands in the background: `cmd > server.log 2>&1 &`.',
      '* Long output is cut in the middle; the full text is saved to a file whose path is given.',
      '* Avoid interactive programs and pagers (use `git --no-pager`, `less` is not useful here).',
    ].join('\n'),
    parameters: {
      type: 'object',
      properties: {
        command: {
          type: 'string',
          description:
            'The command to run. Empty to wait for more output of a running command. With is_input=true: text for the running command, or a key like C-c, C-d, C-z.',
        },
        is_input: {
          type: 'boolean',
          description: 'Send `command` to the running command as input instead of running it. Default false.',
        },
        timeout: {
          type: 'number',
          description: `Seconds to wait for the command before returning while it keeps running (default ${DEFAULT_COMMAND_WAIT_SECONDS}, at most ${MAX_COMMAND_WAIT_SECONDS}).`,
        },
      },
      required: ['command'],
    },
  },
  arguments: BashArguments,
  async run(args, context) {
    const wait = Math.min(args.timeout ?? DEFAULT_COMMAND_WAIT_SECONDS, MAX_COMMAND_WAIT_SECONDS);
    const shell = await context.shell();
    if (shell.isErr()) return runtimeFailure('could not open a shell in the sandbox', shell.error);
    const sh = shell.value;
    if (args.is_input) {
      if (args.command === '')
        return failure(
          'is_input=true needs text or a key to send; to wait for output, send an empty command with is_input=false.',
        );
      const key = controlKey(args.command);
      const result =
        key === '\u0003'
          ? await sh.interrupt()
          : await sh.sendInput(key ?? `${args.command}\n`, Math.min(wait, 5) * 1000);
      if (result.isErr())
        return failure(
          `could not send input: ${result.error.message}`,
          result.error.type === 'failed' ? {} : { sandboxFailure: result.error },
        );
      return render(result.value, Math.min(wait, 5));
    }
    if (args.command.trim() === '') {
      const result = await sh.wait(wait * 1000);
      if (result.isErr())
        return failure(
          `nothing to wait for: ${result.error.message}`,
          result.error.type === 'failed' ? {} : { sandboxFailure: result.error },
        );
      return render(result.value, wait);
    }
    let result = await sh.run(args.command, { softTimeoutMs: wait * 1000 });
    if (result.isErr() && isShellEnded(result.error)) {
      // The shell ended (e.g. the model ran `exit`): start a fresh one and run the command there.
      await context.resetShell();
      const fresh = await context.shell();
      if (fresh.isErr()) return runtimeFailure('could not reopen the shell', fresh.error);
      result = await fresh.value.run(args.command, { softTimeoutMs: wait * 1000 });
    }
    if (result.isErr()) {
      if (result.error.type === 'failed') return failure(`The command was not run: ${result.error.message}`);
      return runtimeFailure('the command could not be run', result.error);
    }
    return render(result.value, wait);
  },
};
