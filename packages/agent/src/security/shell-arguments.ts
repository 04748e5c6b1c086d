/** Reading a command's arguments: positionals, option values, flags. */
import type { SimpleCommand } from './shell-commands.js';

/** Non-option arguments; `valued` lists options (short letters as "-x", long as "--name") that consume the next word. */
export function positionals(args: readonly string[], valued: ReadonlySet<string>): string[] {
  const out: string[] = [];
  let optionsDone = false;
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as string;
    if (optionsDone || !w.startsWith('-') || w === '-') {
      out.push(w);
      continue;
    }
    if (w === '--') optionsDone = true;
    else if (w.startsWith('--')) {
      if (!w.includes('=') && valued.has(w)) i++;
    } else if (valued.has(`-${w[w.length - 1]}`) && (w.length === 2 || !valued.has(`-${w[1]}`))) i++;
  }
  return out;
}

/** Values of options, e.g. `-o FILE`, `-oFILE`, `--output FILE`, `--output=FILE`. */
export function optionValues(args: readonly string[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const w = args[i] as string;
    for (const name of names) {
      if (w === name) out.push(args[i + 1] ?? '');
      else if (name.startsWith('--') && w.startsWith(`${name}=`)) out.push(w.slice(name.length + 1));
      else if (!name.startsWith('--') && /^-[A-Za-z]+$/.test(w) && w.length > 2 && w.endsWith(name[1] as string))
        out.push(args[i + 1] ?? '');
    }
  }
  return out;
}

export function hasFlag(args: readonly string[], short: string, long: readonly string[] = []): boolean {
  return args.some((w) => long.includes(w) || (/^-[A-Za-z0-9]+$/.test(w) && w.slice(1).includes(short)));
}

export const args = (cmd: SimpleCommand) => cmd.words.slice(1);
