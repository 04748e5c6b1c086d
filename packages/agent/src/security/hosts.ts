/** Which hosts a command contacts (URLs, scp-like targets, `/dev/tcp`), whether it sends data, and which hosts are trusted. */
import type { RuleContext } from './risk.js';
import { args, hasFlag, optionValues, positionals } from './shell-arguments.js';
import {
  DOWNLOADERS,
  inlineCode,
  INTERPRETERS,
  NETCATS,
  NETWORK_SENDERS,
  REMOTE_COPY,
  type SimpleCommand,
} from './shell-commands.js';

type HostRef = { host: string } | { unresolved: true };

function hostOfUrl(url: string): HostRef {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url : `http://${url}`;
  if (withScheme.includes('$')) return { unresolved: true };
  try {
    const host = new URL(withScheme).hostname
      .replace(/^\[|\]$/g, '')
      .replace(/\.$/, '')
      .toLowerCase();
    return host === '' ? { unresolved: true } : { host };
  } catch {
    return { unresolved: true };
  }
}

export function isTrustedHost(host: string, context: RuleContext): boolean {
  return context.trustedHosts.some((t) => {
    const trusted = t.toLowerCase().replace(/^\[|\]$/g, '');
    return host === trusted || host.endsWith(`.${trusted}`);
  });
}

const URL_IN_TEXT = /[a-z][a-z0-9+.-]{0,20}:\/\/[^\s'"`<>()]{1,2000}/gi;
const SCP_LIKE = /^(?:[^\s/@:]+@)?(\[[0-9a-f:]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(?!\/\/)/i;
export const DEV_NET = /\/dev\/(?:tcp|udp)\/([^/\s]+)\//;
export const CURL_VALUED = new Set([
  '-o',
  '-d',
  '-H',
  '-X',
  '-u',
  '-A',
  '-e',
  '-F',
  '-T',
  '-x',
  '-b',
  '-c',
  '-K',
  '-w',
  '-m',
  '-r',
  '-E',
  '-C',
  '-Y',
  '-y',
  '-z',
  '-U',
  '-Q',
  '--data',
  '--data-raw',
  '--data-binary',
  '--data-urlencode',
  '--data-ascii',
  '--json',
  '--header',
  '--output',
  '--user',
  '--request',
  '--form',
  '--form-string',
  '--upload-file',
  '--proxy',
  '--cookie',
  '--cookie-jar',
  '--connect-timeout',
  '--max-time',
  '--retry',
  '--cacert',
  '--cert',
  '--key',
  '--user-agent',
  '--referer',
  '--resolve',
  '--interface',
  '--output-dir',
  '--config',
  '--write-out',
  '--range',
  '--retry-delay',
  '--retry-max-time',
  '--limit-rate',
  '--max-filesize',
]);
export const WGET_VALUED = new Set([
  '-O',
  '-o',
  '-P',
  '-U',
  '-e',
  '-t',
  '-T',
  '-a',
  '-i',
  '-B',
  '-w',
  '-Q',
  '-l',
  '--header',
  '--post-data',
  '--post-file',
  '--body-data',
  '--body-file',
  '--user',
  '--password',
  '--output-document',
  '--directory-prefix',
  '--method',
  '--user-agent',
  '--tries',
  '--timeout',
  '--input-file',
  '--output-file',
  '--referer',
]);
const SSH_VALUED = new Set([
  '-p',
  '-i',
  '-l',
  '-o',
  '-F',
  '-J',
  '-L',
  '-R',
  '-D',
  '-b',
  '-c',
  '-E',
  '-e',
  '-m',
  '-O',
  '-Q',
  '-S',
  '-W',
  '-w',
  '-B',
  '-P',
]);
const NC_VALUED = new Set(['-p', '-s', '-w', '-e', '-c', '-i', '-q', '-x', '-X', '-P', '-I', '-O', '-T', '-V', '-W']);
/** Programs whose URL arguments are fetched (not, say, grep's or echo's). */
const URL_PROGRAMS = new Set([
  'git',
  'pip',
  'pipx',
  'uv',
  'poetry',
  'conda',
  'npm',
  'yarn',
  'pnpm',
  'bun',
  'go',
  'cargo',
  'gem',
  'composer',
  'svn',
  'hg',
  'helm',
  'brew',
  'apt-get',
  'apt',
  'ssh',
  'scp',
  'sftp',
  'rsync',
  'ftp',
  'lftp',
  'docker',
  'podman',
]);
const NETWORK_CODE =
  /\b(?:urllib|requests|httpx|aiohttp|http\.client|socket|fetch\s?\(|https?\.(?:request|get)|XMLHttpRequest|LWP|IO::Socket|Net::HTTP|open-uri|fsockopen|curl_exec)/;

/** Hosts a command contacts, as far as its words tell. */
export function hostsOf(cmd: SimpleCommand): HostRef[] {
  const a = args(cmd);
  const refs: HostRef[] = [];
  const p = cmd.program;
  if (DOWNLOADERS.has(p)) {
    const valued = p === 'wget' ? WGET_VALUED : CURL_VALUED;
    for (const w of [...positionals(a, valued), ...optionValues(a, ['--url'])]) refs.push(hostOfUrl(w));
  } else if (p === 'ssh') {
    const target = positionals(a, SSH_VALUED)[0];
    if (target !== undefined) refs.push(hostOfUrl(target.replace(/^[^@]*@/, '')));
  } else if (REMOTE_COPY.has(p)) {
    for (const w of positionals(a, SSH_VALUED)) {
      const m = SCP_LIKE.exec(w);
      if (m && !w.startsWith('/') && !w.startsWith('.')) refs.push(hostOfUrl(m[1] as string));
    }
  } else if (p === 'socat') {
    for (const w of a) {
      const m = /^(?:tcp[46]?|udp[46]?|openssl|ssl):([^:,]+):/i.exec(w);
      if (m) refs.push(hostOfUrl(m[1] as string));
    }
  } else if (NETCATS.has(p) || p === 'ftp' || p === 'lftp') {
    if (!hasFlag(a, 'l', ['--listen'])) {
      const target = positionals(a, NC_VALUED)[0];
      if (target !== undefined) refs.push(hostOfUrl(target));
    }
  } else if (p === 'git') {
    for (const w of a) {
      const m = /^[\w.-]+@([\w.-]+):/.exec(w);
      if (m) refs.push(hostOfUrl(m[1] as string));
    }
  }
  const code = INTERPRETERS.has(p) ? inlineCode(cmd) : null;
  const urlWords = code !== null ? [code] : URL_PROGRAMS.has(p) ? cmd.words : [];
  for (const w of urlWords) for (const m of w.matchAll(URL_IN_TEXT)) refs.push(hostOfUrl(m[0]));
  for (const w of [...cmd.words, ...cmd.redirects.map((r) => r.target)]) {
    const m = DEV_NET.exec(w);
    if (m) refs.push(hostOfUrl(m[1] as string));
  }
  return refs;
}

export function isNetworkSender(cmd: SimpleCommand): boolean {
  if (NETWORK_SENDERS.has(cmd.program)) return true;
  const code = INTERPRETERS.has(cmd.program) ? inlineCode(cmd) : null;
  if (code !== null && NETWORK_CODE.test(code)) return true;
  return [...cmd.words, ...cmd.redirects.map((r) => r.target)].some((w) => DEV_NET.test(w));
}

/** Whether the command sends local data (not just a request) to where it connects. */
export function isUpload(cmd: SimpleCommand): boolean {
  const a = args(cmd);
  if (cmd.program === 'curl') {
    return a.some(
      (w) =>
        /^(?:-[A-Za-z]*[dFT]|--data(?:-[a-z]+)?|--json|--form(?:-string)?|--upload-file)(?:=|$)/.test(w) ||
        /^-[dFT]./.test(w),
    );
  }
  if (cmd.program === 'wget') return a.some((w) => /^--(?:post|body)-(?:data|file)(?:=|$)/.test(w));
  if (cmd.program === 'http' || cmd.program === 'https')
    return a.some((w) => /^[\w-]+:?=/.test(w) || w === '--form' || w === '-f');
  if (REMOTE_COPY.has(cmd.program)) {
    const pos = positionals(a, SSH_VALUED);
    const dest = pos[pos.length - 1];
    return pos.length >= 2 && dest !== undefined && SCP_LIKE.test(dest) && !dest.startsWith('/');
  }
  if (NETCATS.has(cmd.program) || cmd.program === 'ssh') {
    return cmd.stage > 0 || cmd.redirects.some((r) => r.op === '<' || r.op === '<<<' || r.op === '<<');
  }
  return false;
}
