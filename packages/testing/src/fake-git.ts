import type { FakeExecHandler } from './fake-exec.js';

/**
 * Just enough git for the service's repository preparation to succeed on the fake
 * runtime: `clone` makes an empty repository (a `.git/HEAD` file), every branch exists,
 * `checkout` moves HEAD, `config` remembers values. Tests that need git to fail, or want
 * to see its arguments, register their own `git` handler (it wins over this one).
 */
export function fakeGit(): FakeExecHandler {
  const config = new Map<string, Map<string, string>>();
  return (request, { sandboxId, cwd, files }) => {
    const argv = [...request.command.slice(1)];
    let dir = cwd;
    while (argv[0] === '-C' && argv.length > 1) {
      const target = argv[1]!;
      dir = target.startsWith('/') ? target : `${dir.replace(/\/+$/, '')}/${target}`;
      argv.splice(0, 2);
    }
    const head = `${dir}/.git/HEAD`;
    const [command, ...rest] = argv;
    switch (command) {
      case 'config': {
        const values = config.get(sandboxId) ?? new Map<string, string>();
        config.set(sandboxId, values);
        const args = rest.filter((a) => !a.startsWith('--'));
        if (args.length >= 2) {
          values.set(args[0]!, args[1]!);
          return { exit_code: 0 };
        }
        const value = args[0] ? values.get(args[0]) : undefined;
        return value === undefined ? { exit_code: 1 } : { stdout: `${value}\n` };
      }
      case 'clone': {
        const target = rest.filter((a) => a !== '--' && !a.startsWith('-')).at(-1);
        if (!target) return { exit_code: 129, stderr: 'usage: git clone <repo> <dir>\n' };
        const path = target.startsWith('/') ? target : `${dir}/${target}`;
        if (files.has(`${path}/.git/HEAD`))
          return {
            exit_code: 128,
            stderr: `fatal: destination path '${target}' already exists and is not an empty directory.\n`,
          };
        files.set(`${path}/.git/HEAD`, new TextEncoder().encode('ref: refs/heads/main\n'));
        return { stderr: `Cloning into '${target}'...\n` };
      }
      case 'rev-parse': {
        if (!files.has(head))
          return { exit_code: 128, stderr: 'fatal: not a git repository (or any of the parent directories): .git\n' };
        if (rest.includes('--show-toplevel')) return { stdout: `${dir}\n` };
        if (rest.includes('--abbrev-ref'))
          return {
            stdout: `${new TextDecoder()
              .decode(files.get(head))
              .replace(/^ref: refs\/heads\//, '')
              .trim()}\n`,
          };
        return { stdout: '0000000000000000000000000000000000000000\n' };
      }
      case 'checkout': {
        if (!files.has(head))
          return { exit_code: 128, stderr: 'fatal: not a git repository (or any of the parent directories): .git\n' };
        const branch = rest.filter((a) => a !== '--' && a !== '-b' && a !== '-B')[0];
        if (branch) files.set(head, new TextEncoder().encode(`ref: refs/heads/${branch}\n`));
        return { stderr: `Switched to branch '${branch}'\n` };
      }
      default:
        return { exit_code: 0 };
    }
  };
}
