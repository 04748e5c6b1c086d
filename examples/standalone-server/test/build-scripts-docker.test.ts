/**
 * The image build scripts and openhands-pins.sh stand on one scripts/lib/script-base.sh: how each
 * says its usage, refuses an unknown argument, skips a build that is done, answers without an
 * error line, and cleans up when it is stopped in the middle of a build: its work directory, the
 * mounts debootstrap made inside it, what it started, and its image. Needs root and Docker (the
 * stop test runs debootstrap, as `.ci/run` does).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { attach, detach, type Attached } from './server-image.js';

const SCRIPTS = fileURLToPath(new URL('../../../scripts/', import.meta.url));
const NAMES = ['build-sandbox-image', 'build-server-image', 'build-agent-server-image', 'openhands-pins'] as const;
const DEADLINE_MS = 300_000;

const script = (name: string) => join(SCRIPTS, `${name}.sh`);
const runScript = (name: string, args: string[]) => {
  const done = spawnSync('bash', [script(name), ...args], { encoding: 'utf8', timeout: DEADLINE_MS });
  return { ...done, output: `exit ${done.status}\n--- stdout ---\n${done.stdout}\n--- stderr ---\n${done.stderr}` };
};
const lastLine = (text: string) => text.trimEnd().split('\n').at(-1) ?? '';
const mountsUnder = (dir: string) =>
  readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1] ?? '')
    .filter((mount) => mount.startsWith(`${dir}/`));
const processesNaming = (text: string) =>
  spawnSync('pgrep', ['-f', '-a', text], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line && !line.includes('pgrep'));

/** Polls until `probe` answers; fails with the build's output after the deadline or when it exits first. */
async function waitForBuild<T>(build: Attached, what: string, probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    const ended = build.child.exitCode !== null || build.child.signalCode !== null;
    if (ended || Date.now() > deadline) {
      throw new Error(
        `${ended ? `the build exited (${build.child.exitCode ?? build.child.signalCode})` : `${DEADLINE_MS / 1000} s passed`} before ${what}.\n--- stdout ---\n${build.stdout()}\n--- stderr ---\n${build.stderr()}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the build scripts', () => {
  it.each(NAMES)('%s prints its usage, and refuses an unknown argument with one error line', (name) => {
    const help = runScript(name, ['--help']);
    expect(help.status, help.output).toBe(0);
    expect(help.stdout, help.output).toContain(`Usage: bash scripts/${name}.sh`);
    expect(help.stdout, help.output).not.toContain('set -Eeuo');

    const wrong = runScript(name, ['--no-such-option']);
    expect(wrong.status, wrong.output).toBe(1);
    expect(lastLine(wrong.stderr), wrong.output).toMatch(
      new RegExp(`^${name}: error: unknown argument: --no-such-option \\(`),
    );
    expect(wrong.stdout, wrong.output).toBe('');
  });

  it('build-sandbox-image.sh finds a current image and does nothing', () => {
    const again = runScript('build-sandbox-image', []);
    expect(again.status, again.output).toBe(0);
    expect(again.stdout, again.output).toMatch(
      /^build-sandbox-image: acs-sandbox:bookworm already exists \(sha256:[0-9a-f]{12}, \d+ MB\); nothing to do/,
    );
    expect(again.stderr, again.output).toBe('');
  });

  it('openhands-pins.sh --check answers 0 or 3 (a newer release), neither with an error line', () => {
    const check = runScript('openhands-pins', ['--check']);
    expect([0, 3], check.output).toContain(check.status);
    expect(check.stderr, check.output).not.toContain('error:');
    expect(check.stdout, check.output).toMatch(/openhands-pins: /);
  });

  it('a sandbox image build stopped by SIGTERM during debootstrap leaves no directory, mount, process or image behind', async () => {
    const tag = `acs-sandbox-stopped-test:${process.pid}`;
    const before = new Set(readdirSync('/var/tmp'));
    let build: Attached | undefined;
    try {
      build = attach('bash', [script('build-sandbox-image'), '--method', 'debootstrap', '--tag', tag]);
      const running = build;
      const workdir = await waitForBuild(running, 'its work directory appeared', () => {
        const made = readdirSync('/var/tmp').find((d) => d.startsWith('acs-sandbox-build.') && !before.has(d));
        return made && join('/var/tmp', made);
      });
      // debootstrap mounts proc and sys inside the root once it installs the base system.
      await waitForBuild(running, `debootstrap mounted something under ${workdir}`, () =>
        mountsUnder(workdir).length > 0 ? true : undefined,
      );
      expect(processesNaming(workdir).length, running.stdout()).toBeGreaterThan(0);

      running.child.kill('SIGTERM');
      const status = await running.exited;
      const output = `--- stdout ---\n${running.stdout()}\n--- stderr ---\n${running.stderr()}`;
      expect(status, output).toBe(143);
      expect(lastLine(running.stderr()), output).toBe(
        'build-sandbox-image: error: stopped by SIGTERM; temporary files and images removed',
      );
      expect(mountsUnder(workdir), output).toEqual([]);
      expect(existsSync(workdir), output).toBe(false);
      expect(processesNaming(workdir), output).toEqual([]);
      const image = spawnSync('docker', ['image', 'inspect', tag], { encoding: 'utf8' });
      expect(image.status, output).not.toBe(0);
    } finally {
      // A build still running is stopped as a person would, so that it cleans up; then killed.
      if (build && build.child.exitCode === null && build.child.signalCode === null) {
        build.child.kill('SIGTERM');
        await Promise.race([build.exited, new Promise((r) => setTimeout(r, 60_000))]);
      }
      await detach(build);
    }
  });
});
