// Builds the console's browser app (app-dist/) when it is missing or older than its sources, so
// `npm start` and the tests always serve what the sources say. A fresh build takes a few seconds;
// an up-to-date one costs a directory walk.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = join(root, 'app-dist', 'index.html');

const newest = (path) => {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
};

export async function ensureConsoleApp() {
  const sources = Math.max(
    newest(join(root, 'app')),
    newest(join(root, 'src', 'client.ts')),
    newest(join(root, 'src', 'api-schema.ts')),
  );
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return false;
  const { build } = await import('vite');
  await build({ configFile: join(root, 'app', 'vite.config.ts'), logLevel: 'warn' });
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const rebuilt = await ensureConsoleApp();
  if (rebuilt) console.error('built the web console (packages/web-console/app-dist)');
}
