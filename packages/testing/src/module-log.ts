import { spawnSync } from 'node:child_process';

/**
 * Runs `script` (the body of an ES module) in a fresh Node process that loads TypeScript
 * sources as the tests do, with `loaded()` in its scope: the URLs of every module loaded so far
 * that `match` matches. What the script prints last (one line of JSON) is returned parsed. For
 * tests that something is imported only when it is first needed; the child is ended after
 * `timeoutMs` (default 120 s), and a failure throws with its stderr.
 */
export function runWithModuleLog<T>(script: string, options: { cwd: string; match: RegExp; timeoutMs?: number }): T {
  const program = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({ load(url, context, next) { seen.add(url); return next(url, context); } });
    const loaded = () => [...seen].filter((url) => ${options.match.toString()}.test(url));
    ${script}
  `;
  const child = spawnSync(
    process.execPath,
    ['--conditions=@acs/source', '--import', 'tsx', '--input-type=module', '-e', program],
    {
      cwd: options.cwd,
      encoding: 'utf8',
      timeout: options.timeoutMs ?? 120_000,
    },
  );
  if (child.status !== 0) throw new Error(`the child failed (${child.status ?? child.signal}):\n${child.stderr}`);
  const last = child.stdout.trim().split('\n').at(-1);
  if (last === undefined || last === '') throw new Error(`the child printed nothing.\n--- stderr ---\n${child.stderr}`);
  return JSON.parse(last) as T;
}
