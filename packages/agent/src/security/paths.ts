/** Paths as the rules see them: normalised, `~` expanded, and which directories hold secrets, system files or startup files. */
import { DEFAULT_CREDENTIAL_DIR } from '../workspace-setup.js';
import type { RuleContext } from './risk.js';

/** Stands for the home directory: we do not know the sandbox user's home, only that it is not the working directory. */
export const HOME = '/~';
export const SCRATCH_DIRS = ['/tmp', '/var/tmp'];
export const SYSTEM_DIRS = [
  '/etc',
  '/usr',
  '/bin',
  '/sbin',
  '/boot',
  '/var',
  '/lib',
  '/lib32',
  '/lib64',
  '/opt',
  '/root',
  '/home',
  '/sys',
  '/proc',
  '/dev',
  '/srv',
  '/mnt',
  '/media',
  '/run',
  HOME,
];
/** Directories whose files the system (not the agent) runs or trusts: writing there is high risk. */
export const PROTECTED_WRITE_DIRS = [
  '/etc',
  '/usr',
  '/bin',
  '/sbin',
  '/boot',
  '/lib',
  '/lib32',
  '/lib64',
  '/sys',
  '/proc',
  '/var/spool/cron',
  DEFAULT_CREDENTIAL_DIR,
];
const STARTUP_FILES = new Set([
  '.bashrc',
  '.bash_profile',
  '.bash_login',
  '.bash_logout',
  '.profile',
  '.zshrc',
  '.zprofile',
  '.zshenv',
  '.zlogin',
]);
const TEMPLATE_SUFFIXES = new Set([
  'example',
  'sample',
  'template',
  'dist',
  'defaults',
  'default',
  'schema',
  'tmpl',
  'tpl',
]);
const KEY_FILES = new Set([
  'id_rsa',
  'id_dsa',
  'id_ecdsa',
  'id_ed25519',
  '.netrc',
  '_netrc',
  '.git-credentials',
  '.pgpass',
  '.pypirc',
]);

export function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return `/${out.join('/')}`;
}

export function expandHome(word: string): string {
  if (word === '~' || word === '$HOME' || word === '${HOME}') return HOME;
  for (const prefix of ['~/', '$HOME/', '${HOME}/'])
    if (word.startsWith(prefix)) return `${HOME}/${word.slice(prefix.length)}`;
  // ~user: someone's home; still not ours.
  if (/^~[\w.-]+(\/|$)/.test(word)) return `${HOME}/${word.slice(word.indexOf('/') + 1 || word.length)}`;
  return word;
}

export function resolvePath(word: string, cwd: string): string {
  const expanded = expandHome(word);
  return normalizePath(expanded.startsWith('/') ? expanded : `${cwd}/${expanded}`);
}

export function isWithin(path: string, dir: string): boolean {
  return dir === '/' || path === dir || path.startsWith(`${dir}/`);
}

export const isStrictlyWithin = (path: string, dir: string) => path !== dir && isWithin(path, dir);
export const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);
const segmentsOf = (path: string) => path.split('/').filter((s) => s !== '');

export function isSecretPath(path: string, context: RuleContext): boolean {
  if ([...context.secretPaths, DEFAULT_CREDENTIAL_DIR].some((dir) => isWithin(path, normalizePath(expandHome(dir)))))
    return true;
  const segs = segmentsOf(path);
  const name = segs[segs.length - 1] ?? '';
  const parent = segs[segs.length - 2] ?? '';
  if (segs.includes('.ssh')) return !(name.endsWith('.pub') || name === 'known_hosts' || name === 'known_hosts.old');
  if (KEY_FILES.has(name)) return true;
  if (parent === '.aws' && (name === 'credentials' || name === 'config')) return true;
  if ((parent === '.kube' && name === 'config') || (parent === '.docker' && name === 'config.json')) return true;
  if (name === '.env') return true;
  if (name.startsWith('.env.')) return !TEMPLATE_SUFFIXES.has(name.slice(name.lastIndexOf('.') + 1).toLowerCase());
  if (segs[0] === 'proc' && name === 'environ') return true;
  return path === '/etc/shadow' || path === '/etc/gshadow';
}

/** System directories, key directories and secret directories (not every secret-looking file: writing `.env` is ordinary work). */
export function isProtectedWritePath(path: string, context: RuleContext): boolean {
  if (PROTECTED_WRITE_DIRS.some((dir) => isWithin(path, dir))) return true;
  if (segmentsOf(path).includes('.ssh')) return true;
  return context.secretPaths.some((dir) => isWithin(path, normalizePath(expandHome(dir))));
}

export const isStartupFile = (path: string) => STARTUP_FILES.has(baseName(path));

/** Part of a word that may name a file: `@file` (curl), `key=file` (dd, long options). */
export function pathCandidates(word: string): string[] {
  const out = [word];
  if (word.startsWith('@')) out.push(word.slice(1));
  const eq = word.indexOf('=');
  if (eq > 0 && !word.includes('://')) {
    const value = word.slice(eq + 1);
    out.push(value.startsWith('@') ? value.slice(1) : value);
  }
  return out.filter((p) => p !== '' && !p.includes('://'));
}
