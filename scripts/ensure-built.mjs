// Builds the workspaces whose dist/ is missing or older than their sources, in workspace order
// (a package before those that import it), so `npm start` runs built JavaScript that says what
// the sources say. Nothing stale: a directory walk, no build.
//
//   node scripts/ensure-built.mjs            # every workspace with a build script
//   node scripts/ensure-built.mjs --check    # exit 1 naming the stale ones, build nothing
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const IGNORED = new Set(['node_modules', 'dist', 'app-dist', 'test']);

/** The newest modification time under `path` (tests, builds and dependencies left out). */
const newest = (path) => {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(
    0,
    ...readdirSync(path)
      .filter((name) => !IGNORED.has(name))
      .map((name) => newest(join(path, name))),
  );
};

/** The oldest modification time of the files directly in `dist/` (0 when there are none). */
const oldestBuilt = (dir) => {
  const dist = join(dir, 'dist');
  if (!existsSync(dist)) return 0;
  const times = readdirSync(dist)
    .map((name) => statSync(join(dist, name)))
    .filter((s) => s.isFile())
    .map((s) => s.mtimeMs);
  return times.length === 0 ? 0 : Math.min(...times);
};

const { workspaces } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const stale = workspaces.filter((workspace) => {
  const dir = join(root, workspace);
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  if (!manifest.scripts?.build) return false;
  const sources = Math.max(
    newest(join(dir, 'src')),
    newest(join(dir, 'package.json')),
    newest(join(dir, 'tsup.config.ts')),
    newest(join(dir, 'tsconfig.build.json')),
  );
  return oldestBuilt(dir) < sources;
});

if (process.argv.includes('--check')) {
  if (stale.length > 0) {
    console.error(`not built or older than their sources: ${stale.join(', ')} (run node scripts/ensure-built.mjs)`);
    process.exit(1);
  }
} else {
  for (const workspace of stale) {
    console.error(`building ${workspace} (its dist/ is missing or older than its sources)`);
    const result = spawnSync('npm', ['run', 'build', '--silent', '--workspace', workspace], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (result.status !== 0) {
      console.error(
        `building ${workspace} failed (exit ${result.status ?? result.signal}); run npm run build --workspace ${workspace} to see why`,
      );
      process.exit(1);
    }
  }
}
