import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface GeneratedApiKey {
  key: string;
  /** Where it is kept. */
  file: string;
  /** True on the first start (the key was made now), false when an earlier start made it. */
  created: boolean;
}

/**
 * The API key of user `default` when SESSION_API_KEY is not set: made once, kept in the data
 * directory (owner-only, like the secret key) and reused, so a restart does not lock out
 * every client that saved it.
 */
export async function loadOrCreateApiKey(dataDir: string): Promise<GeneratedApiKey> {
  const file = join(dataDir, 'api.key');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  try {
    const key = (await readFile(file, 'utf8')).trim();
    if (key.length < 16)
      throw new Error(`${file} holds no usable API key (at least 16 characters); delete it to have a new one made`);
    if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, 0o600);
    return { key, file, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(24).toString('base64url');
  try {
    // 'wx': a key another process wrote meanwhile is kept, not replaced.
    await writeFile(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateApiKey(dataDir);
    throw error;
  }
  return { key, file, created: true };
}
