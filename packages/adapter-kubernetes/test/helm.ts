/** helm (scripts/helm.sh builds it once per machine) for the tests of the chart deploy/helm/acs. */
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
/** The chart's directory. */
export const CHART = `${REPO}deploy/helm/acs`;

/** The helm of scripts/helm.sh, if it is built. */
function findHelm(): { ok: true; path: string } | { ok: false; why: string } {
  const found = spawnSync('bash', [`${REPO}scripts/helm.sh`, 'path'], { encoding: 'utf8' });
  return found.status === 0 ? { ok: true, path: found.stdout.trim() } : { ok: false, why: found.stderr.trim() };
}

const helmFound = findHelm();
const HOW_TO = 'build it with `bash scripts/helm.sh` (from the Go module proxy, once per machine, 3–5 minutes)';

/**
 * Registers a file's helm suites when helm is built. When it is not: in CI (CI=true) one failing
 * test that says how to build it; elsewhere a skipped suite whose name says why (and a warning).
 */
export function onHelm(name: string, register: (helm: string) => void): void {
  if (helmFound.ok) {
    register(helmFound.path);
    return;
  }
  if (process.env.CI === 'true' || process.env.CI === '1') {
    describe(name, () => {
      it('needs helm', () => {
        throw new Error(`These tests need helm (${helmFound.why}): ${HOW_TO}`);
      });
    });
    return;
  }
  console.warn(`[helm] ${name}: NOT RUN, no helm (${helmFound.why}); ${HOW_TO}`);
  describe.skip(`${name} — NOT RUN: no helm; ${HOW_TO}`, () => {
    it('needs helm', () => undefined);
  });
}

export interface HelmRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** helm with these arguments, ended after `deadlineMs` (default 120 s) at most. */
export function runHelm(helm: string, args: string[], deadlineMs = 120_000): Promise<HelmRun> {
  return new Promise((resolve) => {
    execFile(
      helm,
      args,
      { timeout: deadlineMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}
