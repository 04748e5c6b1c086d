/**
 * How a runtime adapter starts a process in a sandbox and ends it, through a shell in the
 * sandbox: the same protocol over Docker's exec and over Kubernetes' `pods/exec`.
 *
 * Start: `sh -c WRAPPER acs-spawn <nonce> <argv…>` checks that the program exists, prints
 * `ACS-SPAWN <nonce> <pid>` as the first line of stdout, then execs the program in its place, so
 * the pid is the program's. An exec of either runtime leads its own session and process group
 * (runc calls setsid), so that pid names the group the killer signals.
 */
const SPAWN_WRAPPER = [
  'n=$1; shift',
  'case $1 in */*) p=$1 ;; *) p=$(command -v "$1") || p= ;; esac',
  'case $p in "") printf \'%s: program not found\\n\' "$1" >&2; exit 127 ;; esac',
  'case $p in */*) if [ ! -e "$p" ]; then printf \'%s: program not found\\n\' "$1" >&2; exit 127; fi',
  '  if [ -d "$p" ] || [ ! -x "$p" ]; then printf \'%s: not an executable file\\n\' "$1" >&2; exit 126; fi ;; esac',
  'printf \'ACS-SPAWN %s %s\\n\' "$n" "$$"',
  'exec "$@"',
].join('\n');

/**
 * Signals the process group (and, where `pkill` exists, the session, which also holds children
 * that made a group of their own) with TERM, then KILL for whatever is left after the grace period.
 */
const KILLER = [
  'p=$1; g=$2',
  'pk() { command -v pkill >/dev/null 2>&1 && pkill "-$1" -s "$p" 2>/dev/null; }',
  'alive() { kill -0 -- "-$p" 2>/dev/null || kill -0 "$p" 2>/dev/null || { command -v pgrep >/dev/null 2>&1 && pgrep -s "$p" >/dev/null 2>&1; }; }',
  'kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; pk TERM',
  'i=0; while [ "$i" -lt "$g" ] && alive; do sleep 0.1; i=$((i+1)); done',
  'kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; pk KILL',
  'exit 0',
].join('\n');

/** The argv that starts `command` under the wrapper (after whatever the runtime puts before it: a directory change, the environment). */
export function spawnArgv(nonce: string, command: readonly string[]): string[] {
  return ['sh', '-c', SPAWN_WRAPPER, 'acs-spawn', nonce, ...command];
}

/** The argv that ends process `pid`'s group: TERM, then KILL after `graceMs`. */
export function killArgv(pid: number, graceMs: number): string[] {
  return ['sh', '-c', KILLER, 'acs-kill', String(pid), String(Math.ceil(graceMs / 100))];
}

/** The program's pid from the wrapper's first line of stdout (on a terminal it ends in \r); null when the line is not the wrapper's. */
export function spawnedPid(firstLine: string, nonce: string): number | null {
  const match = new RegExp(`^ACS-SPAWN ${nonce} (\\d+)\r?$`).exec(firstLine);
  return match ? Number(match[1]) : null;
}
