/** The rules over one `execute_bash` command line: deletes, disks, permissions, power, download-and-run, secrets, network, writes. */
import { CURL_VALUED, DEV_NET, hostsOf, isNetworkSender, isTrustedHost, isUpload, WGET_VALUED } from './hosts.js';
import {
  baseName,
  expandHome,
  isProtectedWritePath,
  isSecretPath,
  isStartupFile,
  isStrictlyWithin,
  isWithin,
  normalizePath,
  pathCandidates,
  PROTECTED_WRITE_DIRS,
  resolvePath,
  SCRATCH_DIRS,
  SYSTEM_DIRS,
} from './paths.js';
import { assessmentOf, type Finding, type RiskAssessment, type RuleContext } from './risk.js';
import { args, hasFlag, optionValues, positionals } from './shell-arguments.js';
import {
  DOWNLOADERS,
  inlineCode,
  INTERPRETERS,
  NETCATS,
  parseLine,
  programName,
  SHELLS,
  type ParseState,
  type SimpleCommand,
} from './shell-commands.js';

type BashRule = (cmd: SimpleCommand, context: RuleContext) => Finding[];

const SECRET_VAR = /\$\{?[A-Za-z_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE|CREDENTIAL|AWS_)[A-Za-z0-9_]*\}?/i;
const SECRET_IN_CODE =
  /\.ssh\/|\.aws\/credentials|\.netrc|\.git-credentials|\/proc\/[^/\s]{1,20}\/environ|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|(?:^|[/'"\s])\.env(?=$|['"\s])|os\.environ|process\.env/;
export const SECRET_TOKEN =
  /-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bglpat-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9_-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}/;
/** Programs that print (or send) what they read; `source .env` and `cp .env.example .env` are not among them. */
const READERS = new Set([
  'cat',
  'tac',
  'head',
  'tail',
  'less',
  'more',
  'nl',
  'base64',
  'base32',
  'xxd',
  'od',
  'hexdump',
  'strings',
  'grep',
  'egrep',
  'fgrep',
  'rg',
  'ag',
  'awk',
  'gawk',
  'sed',
  'cut',
  'sort',
  'uniq',
  'tar',
  'zip',
  'gzip',
  'bzip2',
  'xz',
  '7z',
  'openssl',
  'gpg',
  'vi',
  'vim',
  'nano',
  'emacs',
  'diff',
  'jq',
  'yq',
  'dd',
  'paste',
  'column',
  'view',
  'bat',
  'batcat',
  'curl',
  'wget',
  'scp',
  'rsync',
  'nc',
  'ncat',
  'socat',
]);

function secretWordIn(cmd: SimpleCommand, context: RuleContext): string | null {
  const words = [
    ...args(cmd),
    ...cmd.redirects.filter((r) => r.op.startsWith('<') && r.op !== '<<' && r.op !== '<<-').map((r) => r.target),
  ];
  for (const w of words) {
    for (const candidate of pathCandidates(w)) if (isSecretPath(resolvePath(candidate, cmd.cwd), context)) return w;
  }
  return null;
}

/** Secret material the command reads: secret files, the whole environment, code that reads either. */
function secretMaterial(cmd: SimpleCommand, context: RuleContext): string | null {
  const word = secretWordIn(cmd, context);
  if (word !== null) return word;
  const a = args(cmd);
  if (cmd.program === 'env' && a.every((w) => w.startsWith('-'))) return 'env';
  if (cmd.program === 'printenv' && (a.length === 0 || a.some((w) => SECRET_VAR.test(`$${w}`)))) return 'printenv';
  if (
    (cmd.program === 'set' || cmd.program === 'export' || cmd.program === 'declare') &&
    (a.length === 0 || a.includes('-p'))
  )
    return cmd.program;
  const code = INTERPRETERS.has(cmd.program) ? inlineCode(cmd) : null;
  if (code !== null && (SECRET_IN_CODE.test(code) || context.secretPaths.some((p) => code.includes(p))))
    return `${cmd.program} code`;
  return null;
}

interface DeleteKind {
  label: string;
  /** -r or -f: deleting outside the working directory this way is high risk. */
  strong: boolean;
  /** -r: worth a look even inside the working directory; `rm -f file.o` is not. */
  recursive: boolean;
  /** The command deletes things under its targets (find -delete), not the targets themselves. */
  contentsOnly: boolean;
}

function deleteFindings(targets: readonly string[], cwd: string, kind: DeleteKind, context: RuleContext): Finding[] {
  const { label, strong, recursive } = kind;
  const workingDir = normalizePath(context.workingDir);
  const out: Finding[] = [];
  for (const target of targets) {
    const expanded = expandHome(target);
    if (expanded.includes('$')) {
      if (recursive)
        out.push({ rule: 'local-delete', words: `${label} of a path that depends on a variable (${target})` });
      continue;
    }
    const path = resolvePath(expanded.replace(/\/[^/]*[*?[][^]*$/, '') || '/', cwd);
    const contents = kind.contentsOnly || /[*?[]/.test(expanded);
    if (isStrictlyWithin(path, workingDir) || (contents && path === workingDir)) {
      if (recursive) out.push({ rule: 'local-delete', words: `${label} inside the working directory` });
    } else if (SCRATCH_DIRS.some((d) => isStrictlyWithin(path, d)) && !isSecretPath(path, context)) {
      if (recursive) out.push({ rule: 'local-delete', words: `${label} in a temporary directory` });
    } else if (strong || SYSTEM_DIRS.some((d) => isWithin(path, d)) || path === '/') {
      out.push({
        rule: 'destructive-delete',
        words: `${label} of / or a path outside the working directory (${target})`,
      });
    } else {
      out.push({ rule: 'outside-write', words: `${label} of a file outside the working directory (${target})` });
    }
  }
  return out;
}

const deleteRule: BashRule = (cmd, context) => {
  const a = args(cmd);
  if (cmd.program === 'rm') {
    if (a.includes('--no-preserve-root')) return [{ rule: 'destructive-delete', words: 'rm --no-preserve-root' }];
    const recursive = hasFlag(a, 'r', ['--recursive']) || hasFlag(a, 'R');
    const kind = { label: 'rm -rf', strong: recursive || hasFlag(a, 'f', ['--force']), recursive, contentsOnly: false };
    return deleteFindings(positionals(a, new Set()), cmd.cwd, kind, context);
  }
  if (cmd.program === 'find' && (a.includes('-delete') || /(?:^|\s)-exec(?:dir)?\s+(?:\S*\/)?rm\b/.test(a.join(' ')))) {
    const starts = a.slice(
      0,
      Math.max(
        0,
        a.findIndex((w) => w.startsWith('-') || w === '(' || w === '!'),
      ),
    );
    const kind = { label: 'find -delete', strong: true, recursive: true, contentsOnly: true };
    return deleteFindings(starts.length > 0 ? starts : ['.'], cmd.cwd, kind, context);
  }
  if (cmd.program === 'git' && gitSubcommand(cmd) === 'clean' && hasFlag(a, 'f', ['--force'])) {
    const workingDir = normalizePath(context.workingDir);
    return isWithin(cmd.cwd, workingDir)
      ? [{ rule: 'git-discard', words: 'git clean -f deletes untracked files in the working directory' }]
      : [{ rule: 'git-destructive', words: 'git clean -f outside the working directory' }];
  }
  return [];
};

const RAW_DEVICE = /^\/dev\/(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|disk|mapper\/|mem$|kmem$|port$|sr|fd\d)/;

const diskRule: BashRule = (cmd) => {
  const p = cmd.program;
  const a = args(cmd);
  if (
    /^mkfs(\.|$)/.test(p) ||
    p === 'mke2fs' ||
    p === 'mkswap' ||
    p === 'wipefs' ||
    p === 'fdisk' ||
    p === 'sfdisk' ||
    p === 'parted' ||
    p === 'blkdiscard'
  ) {
    return [{ rule: 'disk-destroy', words: `${p} rewrites a disk or partition` }];
  }
  if (p === 'dd' && a.some((w) => /^of=\/dev\//.test(w) && RAW_DEVICE.test(w.slice(3))))
    return [{ rule: 'disk-destroy', words: 'dd onto a raw device' }];
  if ((p === 'shred' || p === 'cp') && a.some((w) => RAW_DEVICE.test(w))) {
    return [{ rule: 'disk-destroy', words: `${p} onto a raw device` }];
  }
  if (cmd.redirects.some((r) => r.op.includes('>') && RAW_DEVICE.test(r.target)))
    return [{ rule: 'disk-destroy', words: 'output redirected onto a raw device' }];
  return [];
};

const permissionsRule: BashRule = (cmd, context) => {
  if (cmd.program !== 'chmod' && cmd.program !== 'chown' && cmd.program !== 'chgrp') return [];
  const a = args(cmd);
  const pos = positionals(a, new Set(['--reference']));
  const targets = pos.slice(1).map((t) => resolvePath(t.replace(/\/\*$/, '') || '/', cmd.cwd));
  const recursive = hasFlag(a, 'R', ['--recursive']);
  const workingDir = normalizePath(context.workingDir);
  const hits = targets.filter(
    (t) =>
      !isWithin(t, workingDir) &&
      (t === '/' ||
        PROTECTED_WRITE_DIRS.some((d) => isWithin(t, d)) ||
        SYSTEM_DIRS.some((d) => (recursive ? isWithin(t, d) : t === d)) ||
        isSecretPath(t, context)),
  );
  return hits.length > 0
    ? [{ rule: 'system-permissions', words: `${cmd.program}${recursive ? ' -R' : ''} on a system path` }]
    : [];
};

const powerRule: BashRule = (cmd) => {
  const p = cmd.program;
  const a = args(cmd);
  if (['shutdown', 'reboot', 'halt', 'poweroff', 'kexec'].includes(p))
    return [{ rule: 'system-power', words: `${p} stops the machine` }];
  if ((p === 'init' || p === 'telinit') && ['0', '6'].includes(a[0] ?? ''))
    return [{ rule: 'system-power', words: `${p} ${a[0]} stops the machine` }];
  if (p === 'systemctl' && a.some((w) => ['reboot', 'poweroff', 'halt', 'kexec'].includes(w)))
    return [{ rule: 'system-power', words: 'systemctl stops the machine' }];
  if (p === 'kill') {
    let rest = a;
    if (rest[0] === '-s' || rest[0] === '-n') rest = rest.slice(2);
    else if (rest[0] !== undefined && /^-(?:\d+|[A-Z]+)$/.test(rest[0]) && rest.length > 1) rest = rest.slice(1);
    if (rest[0] === '--') rest = rest.slice(1);
    if (rest.some((w) => w === '-1' || w === '1'))
      return [{ rule: 'system-power', words: 'kill of every process or of init' }];
  }
  return [];
};

const DECODERS = (cmd: SimpleCommand) =>
  ((cmd.program === 'base64' || cmd.program === 'base32') && hasFlag(args(cmd), 'd', ['--decode'])) ||
  (cmd.program === 'xxd' && hasFlag(args(cmd), 'r')) ||
  (cmd.program === 'openssl' && args(cmd).includes('-d'));

/** Whether the command runs code it reads from standard input. */
function runsStdin(cmd: SimpleCommand): boolean {
  const a = args(cmd);
  if (SHELLS.has(cmd.program)) return inlineCode(cmd) === null;
  if (!INTERPRETERS.has(cmd.program))
    return cmd.program === 'source' || cmd.program === '.' ? a.some((w) => w === '/dev/stdin' || w === '-') : false;
  if (a.some((w) => ['-c', '-e', '-E', '-m', '-p', '-r', '--eval', '--print'].includes(w))) return false;
  const pos = a.filter((w) => !w.startsWith('-') || w === '-');
  return pos.length === 0 || pos[0] === '-';
}

const CODE_RUNNERS = new Set([...SHELLS, ...INTERPRETERS, 'eval', 'source', '.', 'exec']);

const downloadExecRule: BashRule = (cmd) => {
  const out: Finding[] = [];
  const upstream = cmd.pipeline.slice(0, cmd.stage);
  if (runsStdin(cmd) && upstream.some((c) => DOWNLOADERS.has(c.program))) {
    out.push({ rule: 'download-exec', words: `downloaded content piped into ${cmd.program}` });
  } else if (runsStdin(cmd) && upstream.some(DECODERS)) {
    out.push({ rule: 'download-exec', words: `decoded (hidden) content piped into ${cmd.program}` });
  }
  if (CODE_RUNNERS.has(cmd.program) && cmd.substituted.some((c) => DOWNLOADERS.has(c.program))) {
    out.push({ rule: 'download-exec', words: `${cmd.program} runs downloaded content` });
  }
  return out;
};

function gitSubcommand(cmd: SimpleCommand): string | undefined {
  return positionals(args(cmd), new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace']))[0];
}

const gitRule: BashRule = (cmd) => {
  if (cmd.program !== 'git') return [];
  const a = args(cmd);
  const sub = gitSubcommand(cmd);
  const rest = a.slice(a.indexOf(sub ?? '') + 1);
  if (sub === 'push') {
    const pos = positionals(rest, new Set(['--repo', '--receive-pack', '--exec', '-o', '--push-option']));
    if (
      hasFlag(rest, 'f', ['--force', '--mirror', '--delete', '--prune']) ||
      hasFlag(rest, 'd') ||
      rest.some((w) => w.startsWith('--force-with-lease') || w.startsWith('--force-if-includes')) ||
      pos.slice(1).some((r) => r.startsWith(':') || r.startsWith('+'))
    ) {
      return [{ rule: 'git-destructive', words: 'git push that rewrites or deletes remote history' }];
    }
  }
  if (sub === 'reset' && rest.includes('--hard'))
    return [{ rule: 'git-discard', words: 'git reset --hard discards uncommitted work' }];
  if (sub === 'checkout' && (hasFlag(rest, 'f', ['--force']) || rest.includes('--') || rest.includes('.')))
    return [{ rule: 'git-discard', words: 'git checkout discards uncommitted changes' }];
  if (sub === 'restore' && !rest.includes('--staged'))
    return [{ rule: 'git-discard', words: 'git restore discards uncommitted changes' }];
  return [];
};

const reverseShellRule: BashRule = (cmd, _context) => {
  const a = args(cmd);
  const p = cmd.program;
  if (
    (p === 'nc' || p === 'ncat' || p === 'netcat') &&
    (hasFlag(a, 'e', ['--exec', '--sh-exec', '--lua-exec']) || hasFlag(a, 'c') || hasFlag(a, 'l', ['--listen']))
  ) {
    return [{ rule: 'reverse-shell', words: `${p} listener or command execution over the network` }];
  }
  if (p === 'socat' && a.some((w) => /^(?:exec|system|pty)[:,]|(?:tcp|udp)[46]?-listen/i.test(w))) {
    return [{ rule: 'reverse-shell', words: 'socat listener or shell over the network' }];
  }
  const devNet = cmd.redirects.some((r) => DEV_NET.test(r.target)) || a.some((w) => DEV_NET.test(w));
  if (devNet && (SHELLS.has(p) || p === 'exec' || cmd.words.length === 0))
    return [{ rule: 'reverse-shell', words: 'a shell wired to a /dev/tcp connection' }];
  const code = INTERPRETERS.has(p) ? inlineCode(cmd) : null;
  if (code !== null && /socket/.test(code) && /pty|dup2|subprocess|\/bin\/(?:ba)?sh|exec/.test(code))
    return [{ rule: 'reverse-shell', words: `${p} code that connects a shell to a socket` }];
  const pipeShell =
    cmd.pipeline.some((c) => SHELLS.has(c.program)) &&
    cmd.pipeline.some((c) => NETCATS.has(c.program) || c.program === 'openssl');
  if (cmd.stage === 0 && pipeShell)
    return [{ rule: 'reverse-shell', words: 'a shell piped to or from a network connection' }];
  return [];
};

const WRITE_VALUED: Record<string, ReadonlySet<string>> = {
  cp: new Set(['-t', '-S', '--suffix', '--target-directory']),
  mv: new Set(['-t', '-S', '--suffix', '--target-directory']),
  install: new Set(['-t', '-m', '-o', '-g', '-S', '--mode', '--owner', '--group']),
  ln: new Set(['-t', '-S', '--suffix']),
  truncate: new Set(['-s', '-r', '--size', '--reference']),
  sed: new Set(['-e', '-f', '-l', '--expression', '--file']),
  perl: new Set(['-e', '-E', '-I', '-M']),
};

function writeTargets(cmd: SimpleCommand): string[] {
  const a = args(cmd);
  const targets = cmd.redirects.filter((r) => ['>', '>>', '>|', '&>', '&>>', '<>'].includes(r.op)).map((r) => r.target);
  const pos = positionals(a, WRITE_VALUED[cmd.program] ?? new Set());
  if (cmd.program === 'tee' || cmd.program === 'touch' || cmd.program === 'truncate') targets.push(...pos);
  if (['cp', 'mv', 'install', 'ln', 'rsync'].includes(cmd.program) && pos.length >= 2)
    targets.push(pos[pos.length - 1] as string);
  if (
    (cmd.program === 'sed' || cmd.program === 'perl') &&
    a.some((w) => /^-[A-Za-z]*i/.test(w) || w.startsWith('--in-place'))
  ) {
    targets.push(...(hasFlag(a, 'e', ['--expression']) ? pos : pos.slice(1)));
  }
  if (cmd.program === 'dd') targets.push(...a.filter((w) => w.startsWith('of=')).map((w) => w.slice(3)));
  return targets.filter((t) => t !== '' && !/^&?\d*-?$/.test(t));
}

const DEVICE_SINKS = /^\/dev\/(?:null|zero|stdout|stderr|stdin|tty|fd\/|pts\/|tcp\/|udp\/)/;

const writeRule: BashRule = (cmd, context) => {
  const out: Finding[] = [];
  for (const target of writeTargets(cmd)) {
    const path = resolvePath(target, cmd.cwd);
    if (DEVICE_SINKS.test(path) || RAW_DEVICE.test(path)) continue;
    if (isProtectedWritePath(path, context))
      out.push({ rule: 'system-write', words: `writes to a system or credential path (${target})` });
    else if (isStartupFile(path) && !isWithin(path, normalizePath(context.workingDir)))
      out.push({ rule: 'persistence', words: `writes to a shell startup file (${target})` });
  }
  if (cmd.program === 'crontab' && !hasFlag(args(cmd), 'l'))
    out.push({ rule: 'persistence', words: 'changes the crontab' });
  return out;
};

const secretReadRule: BashRule = (cmd, context) => {
  if (!READERS.has(cmd.program) && !cmd.redirects.some((r) => r.op === '<')) return [];
  const word = secretWordIn(cmd, context);
  return word === null ? [] : [{ rule: 'secret-read', words: `reads secret material (${word}) into the conversation` }];
};

const PACKAGE_MANAGERS: Record<string, string[]> = {
  apt: ['install', 'reinstall'],
  'apt-get': ['install', 'reinstall', 'build-dep'],
  aptitude: ['install'],
  yum: ['install', 'localinstall'],
  dnf: ['install'],
  apk: ['add'],
  zypper: ['install', 'in'],
  pacman: ['-S', '-U'],
  brew: ['install'],
  pip: ['install', 'download'],
  pipx: ['install', 'run'],
  uv: ['add', 'install', 'pip', 'tool'],
  poetry: ['add', 'install'],
  pipenv: ['install'],
  conda: ['install', 'create'],
  npm: ['install', 'i', 'ci', 'add', 'update'],
  yarn: ['add', 'install', 'dlx'],
  pnpm: ['add', 'install', 'i', 'dlx'],
  bun: ['add', 'install', 'i'],
  gem: ['install'],
  cargo: ['install'],
  go: ['install', 'get'],
  composer: ['require', 'install'],
  snap: ['install'],
};

const packageRule: BashRule = (cmd) => {
  const sub = positionals(args(cmd), new Set(['-m', '--prefix', '-C', '--cwd', '--registry']));
  let manager = cmd.program;
  let words = sub;
  if (cmd.program === 'python' && args(cmd)[0] === '-m') {
    manager = programName(args(cmd)[1] ?? '');
    words = args(cmd).slice(2);
  }
  const verbs = PACKAGE_MANAGERS[manager];
  if (!verbs) return [];
  const verb =
    manager === 'pacman'
      ? args(cmd)
          .find((w) => /^-[SU]/.test(w))
          ?.slice(0, 2)
      : words.find((w) => !w.startsWith('-'));
  if (manager === 'yarn' && words.length === 0)
    return [{ rule: 'package-install', words: 'yarn install runs third-party code' }];
  return verb !== undefined && verbs.includes(verb)
    ? [{ rule: 'package-install', words: `${manager} ${verb} runs third-party code` }]
    : [];
};

const containerRule: BashRule = (cmd) =>
  ['docker', 'podman', 'docker-compose', 'nerdctl'].includes(cmd.program)
    ? [{ rule: 'container', words: `${cmd.program} controls containers on the host` }]
    : [];

const sudoRule: BashRule = (cmd) =>
  cmd.sudo || cmd.program === 'su' || cmd.program === 'sudo' || cmd.program === 'doas'
    ? [{ rule: 'sudo', words: 'runs with elevated privileges' }]
    : [];

const networkRule: BashRule = (cmd, context) => {
  const out: Finding[] = [];
  const upload = isUpload(cmd);
  for (const ref of hostsOf(cmd)) {
    if ('host' in ref && isTrustedHost(ref.host, context)) continue;
    const where = 'host' in ref ? ref.host : 'a host it computes';
    out.push(
      upload
        ? { rule: 'untrusted-upload', words: `sends data to ${where}, which is not trusted` }
        : { rule: 'untrusted-network', words: `contacts ${where}, which is not trusted` },
    );
  }
  return out;
};

const BASH_RULES: readonly BashRule[] = [
  deleteRule,
  diskRule,
  permissionsRule,
  powerRule,
  downloadExecRule,
  gitRule,
  reverseShellRule,
  writeRule,
  secretReadRule,
  packageRule,
  containerRule,
  sudoRule,
  networkRule,
];

const FORK_BOMB = /([\w:.]{1,40})\(\)\{\1\|\1&/;

/** Rules over the whole command line rather than one command. */
function lineFindings(text: string, commands: readonly SimpleCommand[], context: RuleContext): Finding[] {
  const out: Finding[] = [];
  if (FORK_BOMB.test(text.replace(/\s+/g, '')))
    out.push({ rule: 'fork-bomb', words: 'a function that spawns itself without end' });
  const senders = commands.filter(isNetworkSender);
  if (senders.length > 0) {
    const secret = commands.map((c) => secretMaterial(c, context)).find((s) => s !== null);
    if (secret)
      out.push({
        rule: 'secret-exfiltration',
        words: `secret material (${secret}) in a command that uses the network (${senders[0]?.program})`,
      });
    else if (
      (SECRET_TOKEN.test(text) || SECRET_VAR.test(text)) &&
      senders.some((c) => hostsOf(c).some((h) => !('host' in h) || !isTrustedHost(h.host, context)))
    ) {
      // A token or a $…TOKEN variable is normal when talking to the git host; not to anyone else.
      out.push({
        rule: 'secret-exfiltration',
        words: 'a secret token or secret variable sent to a host that is not trusted',
      });
    }
  }
  out.push(...downloadedRunFindings(commands));
  return out;
}

/** Files that curl/wget save, by base name. */
function downloadedFiles(commands: readonly SimpleCommand[]): Set<string> {
  const names = new Set<string>();
  for (const cmd of commands) {
    const a = args(cmd);
    if (cmd.program === 'curl') {
      for (const f of optionValues(a, ['-o', '--output'])) names.add(baseName(f));
      if (hasFlag(a, 'O', ['--remote-name']))
        for (const u of positionals(a, CURL_VALUED)) names.add(baseName(u.split(/[?#]/)[0] ?? ''));
    } else if (cmd.program === 'wget') {
      const out = optionValues(a, ['-O', '--output-document']);
      if (out.length > 0) for (const f of out) names.add(baseName(f));
      else for (const u of positionals(a, WGET_VALUED)) names.add(baseName(u.split(/[?#]/)[0] ?? ''));
    }
  }
  names.delete('');
  names.delete('-');
  return names;
}

function downloadedRunFindings(commands: readonly SimpleCommand[]): Finding[] {
  const files = downloadedFiles(commands);
  if (files.size === 0) return [];
  const isDownloaded = (w: string | undefined) => w !== undefined && files.has(baseName(w));
  for (const cmd of commands) {
    const a = args(cmd);
    const chmodX =
      cmd.program === 'chmod' &&
      /(?:^|[,ugoa])\+[rwX]*x|^[0-7]?[1357][0-7]{2}$/.test(a.find((w) => !w.startsWith('-')) ?? '') &&
      a.some(isDownloaded);
    const runsIt =
      (cmd.words[0]?.includes('/') && isDownloaded(cmd.words[0])) ||
      ((SHELLS.has(cmd.program) || INTERPRETERS.has(cmd.program)) && isDownloaded(a.find((w) => !w.startsWith('-'))));
    if (chmodX || runsIt)
      return [{ rule: 'run-downloaded', words: 'makes executable or runs a file it just downloaded' }];
  }
  return [];
}

export function assessBash(argumentsObject: Record<string, unknown>, context: RuleContext): RiskAssessment {
  const command = argumentsObject.command;
  if (typeof command !== 'string')
    return assessmentOf([{ rule: 'invalid-arguments', words: 'execute_bash without a command string' }], 'unknown');
  const workingDir = normalizePath(context.workingDir);
  const state: ParseState = { cwd: workingDir, workingDir, all: [] };
  parseLine(command, state, 0);
  const findings: Finding[] = [];
  for (const cmd of state.all) for (const rule of BASH_RULES) findings.push(...rule(cmd, context));
  findings.push(...lineFindings(command, state.all, context));
  return assessmentOf(findings);
}
