import type { GitProvider, StoredSettings } from '@acs/core/schemas';
import {
  millisOf,
  type Clock,
  type ExecRequest,
  type ExecResult,
  type SandboxRuntime,
  type WorkspaceRequest,
  type WorkspaceResult,
  type GuidanceFile,
  type KnowledgeFile,
  type RepositoryGuidance,
} from '@acs/core/ports';
import { err, ok, type Result } from 'neverthrow';
import { clipGuidance, MAX_MICROAGENT_FILES, parseFrontMatter } from './guidance.js';

/**
 * Puts a conversation's repository into its sandbox: git identity, credentials, clone,
 * branch, `.openhands/setup.sh`, and the repository's guidance for the prompt.
 *
 * The token. It is written once, through the runtime's file API (never an argv), to a
 * 0600 file outside the working directory (`<credentialDir>/credentials/<host>`), and a
 * credential helper script that prints that file is configured in the *global* git
 * config for the provider's URL only. So: the clone URL carries no token, `.git/config`
 * holds none, no process has it in its argv or environment, and nothing we log or record
 * contains it (outputs are scrubbed as well). The agent's own `git fetch`/`git push` go
 * through the same helper and just work.
 *
 * Trade-off: the agent runs as the same user as the helper, so it *can* read the token
 * file on purpose (it needs the token's power to push anyway). We chose a file over an
 * environment variable in the agent's shell because a variable is inherited by every
 * process the agent starts and shows up in any `env`, `printenv` or crash dump it prints
 * (and so in the events); the file only appears if the agent reads it deliberately.
 */

export interface WorkspaceOptions {
  /** How long `.openhands/setup.sh` may run before it is killed. Default 600 s. */
  setupScriptTimeoutMs?: number;
  /** How long the clone may take. Default 300 s. */
  cloneTimeoutMs?: number;
  /** Where the credential helper and the token files live in the sandbox (outside the working directory). Default `/opt/acs-git`. */
  credentialDir?: string;
}

const DEFAULT_SETUP_SCRIPT_TIMEOUT_MS = 600_000;
const DEFAULT_CLONE_TIMEOUT_MS = 300_000;
export const DEFAULT_CREDENTIAL_DIR = '/opt/acs-git';
const DEFAULT_GIT_USER_NAME = 'openhands';
const DEFAULT_GIT_USER_EMAIL = 'openhands@all-hands.dev';
/** The most characters of setup output kept in an event (head and tail). */
const MAX_SETUP_OUTPUT_CHARS = 20_000;

const PROVIDER_HOSTS: Record<GitProvider, string | null> = {
  github: 'github.com',
  gitlab: 'gitlab.com',
  bitbucket: 'bitbucket.org',
  enterprise_sso: null,
};

/** The user names providers expect next to a token used as a password. */
const TOKEN_USERNAMES: Record<GitProvider, string> = {
  github: 'x-access-token',
  gitlab: 'oauth2',
  bitbucket: 'x-token-auth',
  enterprise_sso: 'oauth2',
};

export interface RepositoryRemote {
  provider: GitProvider;
  /** `https://host[:port][/prefix]/owner/name.git`: never carries credentials. */
  url: string;
  /** `scheme://host[:port]`: what the credential helper is configured for. */
  origin: string;
  /** `host[:port]`, as git names it to a credential helper. */
  host: string;
  token: string | null;
  username: string;
}

/** What the engine passes to `prepareRepository`: the port's request, and what the agent brings. */
export interface PrepareRepositoryInput extends WorkspaceRequest {
  runtime: SandboxRuntime;
  /** Times the setup script (`duration_ms`). */
  clock: Clock;
  options?: WorkspaceOptions;
}

export type PrepareRepositoryResult = WorkspaceResult;

/** Masks every secret (and its URL-encoded form) in a text. */
export function scrubSecrets(text: string, secrets: readonly (string | null | undefined)[]): string {
  let out = text;
  for (const secret of secrets) {
    if (!secret || secret.length < 4) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) out = out.split(form).join('****');
  }
  return out;
}

/** Which provider, host and token a repository is fetched with. */
export function resolveRemote(
  repository: string,
  provider: GitProvider | null,
  settings: StoredSettings | null,
): { ok: true; remote: RepositoryRemote } | { ok: false; reason: string } {
  const tokens = settings?.secrets_store.provider_tokens ?? {};
  const withToken = (Object.keys(tokens) as GitProvider[]).filter((p) => tokens[p]?.token);
  const chosen: GitProvider = provider ?? (withToken.length === 1 ? withToken[0]! : 'github');
  const entry = tokens[chosen];
  const hostText = entry?.host?.trim() || PROVIDER_HOSTS[chosen];
  if (!hostText)
    return {
      ok: false,
      reason: `the ${chosen} provider has no default host: store one in secrets_store.provider_tokens.${chosen}.host`,
    };
  let base: URL;
  try {
    // A host given with a scheme keeps it (http:// for a server on the local network); otherwise https.
    base = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(hostText) ? hostText : `https://${hostText}`);
  } catch {
    return { ok: false, reason: `the ${chosen} host "${hostText}" is not a host name or URL` };
  }
  if ((base.protocol !== 'https:' && base.protocol !== 'http:') || base.username || base.password || !base.hostname) {
    return {
      ok: false,
      reason: `the ${chosen} host "${hostText}" must be a host name or an http(s) URL without credentials`,
    };
  }
  const prefix = base.pathname.replace(/\/+$/, '');
  const token = entry?.token?.trim() || null;
  // Bitbucket app passwords come as "user:app_password".
  const split = chosen === 'bitbucket' && token?.includes(':') ? token.indexOf(':') : -1;
  return {
    ok: true,
    remote: {
      provider: chosen,
      url: `${base.origin}${prefix}/${repository}.git`,
      origin: base.origin,
      host: base.host,
      token: split >= 0 ? token!.slice(split + 1) : token,
      username: split >= 0 ? token!.slice(0, split) : TOKEN_USERNAMES[chosen],
    },
  };
}

/** The helper git runs as `credential.<origin>.helper`: prints the stored credentials for the host git asks about. */
function credentialHelperScript(credentialDir: string): string {
  return [
    '#!/bin/sh',
    '# git credential helper of the agent conversation service: answers "get" with the',
    '# credentials stored for the host git asks about. It holds no secret itself.',
    '[ "$1" = get ] || exit 0',
    'host=',
    'while IFS= read -r line; do',
    '  [ -z "$line" ] && break',
    '  case "$line" in host=*) host=${line#host=} ;; esac',
    'done',
    `file="${credentialDir}/credentials/$(printf '%s' "$host" | tr -c 'A-Za-z0-9.-' '_')"`,
    '[ -r "$file" ] && cat "$file"',
    'exit 0',
    '',
  ].join('\n');
}

/** The file name the helper looks up for a host (`127.0.0.1:8080` → `127.0.0.1_8080`). */
const credentialFileName = (host: string): string => host.replace(/[^A-Za-z0-9.-]/g, '_');

const repositoryName = (repository: string): string =>
  repository
    .split('/')
    .at(-1)!
    .replace(/\.git$/, '');

/** Where a repository is cloned: `<working_dir>/<name>`. */
function repositoryDir(workingDir: string, repository: string): string {
  return `${workingDir.replace(/\/+$/, '')}/${repositoryName(repository)}`;
}

/** A work branch name for a conversation without one. */
const workBranchName = (conversationId: string): string =>
  `openhands-workspace-${conversationId.replace(/-/g, '').slice(0, 8)}`;

const clip = (text: string, max = MAX_SETUP_OUTPUT_CHARS): string =>
  text.length <= max
    ? text
    : `${text.slice(0, max / 2)}\n[… ${text.length - max} characters cut …]\n${text.slice(-max / 2)}`;

/** The line of git's stderr that says what went wrong. */
const gitReason = (stderr: string): string => {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const fatal = lines.filter((l) => /^(fatal|error|remote):/i.test(l));
  return (fatal.length > 0 ? fatal : lines).slice(-2).join(' ').slice(0, 500) || 'git gave no reason';
};

/** A cut-off last character is left out rather than shown as U+FFFD (`stream: true` keeps it back). */
const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes, { stream: true });

/** The most of one guidance file read: far more than the prompt keeps (MAX_GUIDANCE_FILE_CHARS), far less than a file may be. */
const MAX_GUIDANCE_FILE_BYTES = 1024 * 1024;

/** One preparation under way: where it runs, the remote, and how its messages are masked. */
interface Setup {
  input: PrepareRepositoryInput;
  options: WorkspaceOptions;
  remote: RepositoryRemote;
  /** Where the clone goes. */
  dir: string;
  /** Masks the tokens in a text. */
  scrub: (text: string) => string;
  /** When the preparation started (for `duration_ms`). */
  started: number;
}

/** A step that could not be done, said in words for the conversation (tokens masked). */
type Step<T = void> = Result<T, string>;

const GIT_ENV = { GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: '', SSH_ASKPASS: '' };

/** Runs a command in the sandbox (git never prompts); a command the sandbox did not run is a failed step. */
async function exec(setup: Setup, request: ExecRequest, what: string): Promise<Step<ExecResult>> {
  const result = await setup.input.runtime.exec(setup.input.sandboxId, {
    ...request,
    env: { ...GIT_ENV, ...request.env },
  });
  if (result.isErr()) return err(`${what}: the sandbox did not run the command (${setup.scrub(result.error.message)})`);
  return ok(result.value);
}

/** As exec, and a command that exits non-zero is a failed step too (git's reason in the words). */
async function mustExec(setup: Setup, request: ExecRequest, what: string): Promise<Step<ExecResult>> {
  const result = await exec(setup, request, what);
  if (result.isErr()) return result;
  if (result.value.exit_code !== 0)
    return err(`${what}: ${setup.scrub(gitReason(result.value.stderr || result.value.stdout))}`);
  return result;
}

/** Runs the commands one after another; the first that fails ends it. */
async function mustExecAll(setup: Setup, steps: readonly [ExecRequest, string][]): Promise<Step> {
  for (const [request, what] of steps) {
    const result = await mustExec(setup, request, what);
    if (result.isErr()) return err(result.error);
  }
  return ok(undefined);
}

/** Runs the whole preparation. Every message it returns or reports has the token masked. */
export async function prepareRepository(input: PrepareRepositoryInput): Promise<PrepareRepositoryResult> {
  const { repository } = input;
  const resolved = resolveRemote(repository, input.provider, input.settings);
  if (!resolved.ok) return { ok: false, reason: `cannot clone ${repository}: ${resolved.reason}` };
  const remote = resolved.remote;
  const scrub = (text: string) =>
    scrubSecrets(text, [remote.token, input.settings?.secrets_store.provider_tokens[remote.provider]?.token]);
  try {
    await input.onStep?.('PREPARING_REPOSITORY');
    const setup: Setup = {
      input,
      options: input.options ?? {},
      remote,
      dir: repositoryDir(input.workingDir, repository),
      scrub,
      started: millisOf(input.clock),
    };
    const prepared = await prepare(setup);
    if (prepared.isErr()) return { ok: false, reason: scrub(prepared.error) };
    const guidance = await loadGuidance(input.runtime, input.sandboxId, setup.dir);
    return { ok: true, workspace: { repository, repository_dir: setup.dir, branch: prepared.value, guidance } };
  } catch (error) {
    // A port that broke its promise and threw: still said in words, with the token masked.
    return {
      ok: false,
      reason: scrub(`could not prepare ${repository}: ${error instanceof Error ? error.message : String(error)}`),
    };
  }
}

/** Identity, credentials, then the clone (kept when it is there already); the branch the work is on. */
async function prepare(setup: Setup): Promise<Step<string>> {
  // Identity: the user's, or a default so commits work at all.
  const settings = setup.input.settings;
  const identity = await mustExecAll(setup, [
    [
      { command: ['git', 'config', '--global', 'user.name', settings?.git_user_name?.trim() || DEFAULT_GIT_USER_NAME] },
      'could not set the git user name',
    ],
    [
      {
        command: [
          'git',
          'config',
          '--global',
          'user.email',
          settings?.git_user_email?.trim() || DEFAULT_GIT_USER_EMAIL,
        ],
      },
      'could not set the git user email',
    ],
  ]);
  if (identity.isErr()) return err(identity.error);
  const credentials = await installCredentials(setup);
  if (credentials.isErr()) return err(credentials.error);
  const present = await exec(
    setup,
    { command: ['git', '-C', setup.dir, 'rev-parse', '--show-toplevel'] },
    'could not look for an existing clone',
  );
  if (present.isErr()) return err(present.error);
  if (present.value.exit_code === 0 && present.value.stdout.trim() === setup.dir) return keepClone(setup);
  return cloneAndSetUp(setup);
}

/** Credentials: a helper in the global config, the token in a 0600 file only it reads (or, without a token, none left behind). */
async function installCredentials(setup: Setup): Promise<Step> {
  const { runtime, sandboxId } = setup.input;
  const { remote } = setup;
  const credentialDir = (setup.options.credentialDir ?? DEFAULT_CREDENTIAL_DIR).replace(/\/+$/, '');
  const helper = `${credentialDir}/credential-helper`;
  const secretFile = `${credentialDir}/credentials/${credentialFileName(remote.host)}`;
  if (!remote.token) {
    // No token (a public repository): drop what an earlier start may have stored.
    const removed = await exec(setup, { command: ['rm', '-f', secretFile] }, 'could not remove old git credentials');
    return removed.isErr() ? err(removed.error) : ok(undefined);
  }
  // The directories first, so the secret is never readable by others, not even for a moment.
  const made = await mustExec(
    setup,
    { command: ['mkdir', '-p', '-m', '0700', credentialDir, `${credentialDir}/credentials`] },
    'could not create the git credentials directory',
  );
  if (made.isErr()) return err(made.error);
  const written = await runtime.writeFile(
    sandboxId,
    helper,
    new TextEncoder().encode(credentialHelperScript(credentialDir)),
  );
  if (written.isErr()) return err(`could not install the git credential helper: ${written.error.message}`);
  const secret = await runtime.writeFile(
    sandboxId,
    secretFile,
    new TextEncoder().encode(`username=${remote.username}\npassword=${remote.token}\n`),
  );
  if (secret.isErr())
    return err(`could not store the git credentials in the sandbox: ${setup.scrub(secret.error.message)}`);
  return mustExecAll(setup, [
    [
      { command: ['chmod', '0700', credentialDir, `${credentialDir}/credentials`] },
      'could not protect the git credentials',
    ],
    [{ command: ['chmod', '0600', secretFile] }, 'could not protect the git credentials'],
    [{ command: ['chmod', '0700', helper] }, 'could not install the git credential helper'],
    [
      { command: ['git', 'config', '--global', `credential.${remote.origin}.helper`, helper] },
      'could not configure the git credential helper',
    ],
  ]);
}

/** A restart in the same sandbox: the clone (and whatever work is in it) is kept as it is. */
async function keepClone(setup: Setup): Promise<Step<string>> {
  const { input, dir } = setup;
  const head = await exec(
    setup,
    { command: ['git', '-C', dir, 'rev-parse', '--abbrev-ref', 'HEAD'] },
    'could not read the current branch',
  );
  if (head.isErr()) return err(head.error);
  const branch = head.value.stdout.trim() || input.branch || 'HEAD';
  await input.onReport?.({
    step: 'repository',
    summary: `${input.repository} is already cloned in ${dir} (branch ${branch}); kept as it is`,
    output: '',
    exit_code: 0,
    timed_out: false,
    duration_ms: millisOf(input.clock) - setup.started,
  });
  return ok(branch);
}

/** Clones, checks out the branch asked for (or creates a work branch), then runs the repository's setup script if it has one. */
async function cloneAndSetUp(setup: Setup): Promise<Step<string>> {
  const { input, dir, remote } = setup;
  const cloneTimeoutMs = setup.options.cloneTimeoutMs ?? DEFAULT_CLONE_TIMEOUT_MS;
  const cloned = await exec(
    setup,
    { command: ['git', 'clone', '--', remote.url, dir], cwd: input.workingDir, timeoutMs: cloneTimeoutMs },
    'could not clone',
  );
  if (cloned.isErr()) return err(cloned.error);
  const failure = cloneFailure(setup, cloned.value, cloneTimeoutMs);
  if (failure) return err(failure);
  const branch = await checkOut(setup);
  if (branch.isErr()) return branch;
  await input.onReport?.({
    step: 'repository',
    summary: `cloned ${input.repository} from ${remote.origin} into ${dir}; ${input.branch ? `checked out branch ${branch.value}` : `created the work branch ${branch.value}`}`,
    output: setup.scrub(clip(`${cloned.value.stdout}${cloned.value.stderr}`)),
    exit_code: 0,
    timed_out: false,
    duration_ms: millisOf(input.clock) - setup.started,
  });
  const script = await runSetupScript(setup);
  return script.isErr() ? err(script.error) : branch;
}

/** Why a clone failed, with a hint about the token when the provider refused it; null when it succeeded. */
function cloneFailure(setup: Setup, cloned: ExecResult, timeoutMs: number): string | null {
  const { repository } = setup.input;
  const { remote } = setup;
  if (cloned.timed_out)
    return `could not clone ${repository} from ${remote.origin}: the clone took longer than ${Math.round(timeoutMs / 1000)} s`;
  if (cloned.exit_code === 0) return null;
  const why = setup.scrub(gitReason(cloned.stderr || cloned.stdout));
  const hint = /authentication failed|could not read username|403|401|terminal prompts disabled/i.test(why)
    ? remote.token
      ? ` (the ${remote.provider} token was refused; store a valid one in secrets_store.provider_tokens.${remote.provider})`
      : ` (no ${remote.provider} token is stored; add one to secrets_store.provider_tokens.${remote.provider})`
    : '';
  return `could not clone ${repository} from ${remote.origin}: ${why}${hint}`;
}

/** The branch asked for (which must exist), or a new work branch named after the conversation. */
async function checkOut(setup: Setup): Promise<Step<string>> {
  const { input, dir } = setup;
  if (!input.branch) {
    const branch = workBranchName(input.conversationId);
    const created = await mustExec(
      setup,
      { command: ['git', '-C', dir, 'checkout', '-b', branch] },
      `could not create the work branch "${branch}"`,
    );
    return created.isErr() ? err(created.error) : ok(branch);
  }
  const branch = input.branch;
  const known = await exec(
    setup,
    { command: ['git', '-C', dir, 'rev-parse', '--verify', '--quiet', `refs/remotes/origin/${branch}`] },
    'could not look up the branch',
  );
  if (known.isErr()) return err(known.error);
  if (known.value.exit_code !== 0) return err(`branch "${branch}" does not exist in ${input.repository}`);
  const checkedOut = await mustExec(
    setup,
    { command: ['git', '-C', dir, 'checkout', branch, '--'] },
    `could not check out branch "${branch}"`,
  );
  return checkedOut.isErr() ? err(checkedOut.error) : ok(branch);
}

/**
 * The repository's own setup, from the repository root (where the script expects to be). Only
 * whether it is there matters (bash reads it): none of its content is fetched. Its failure is
 * reported, not a failed preparation.
 */
async function runSetupScript(setup: Setup): Promise<Step> {
  const { input, dir } = setup;
  const script = await input.runtime.readFile(input.sandboxId, `${dir}/.openhands/setup.sh`, { maxBytes: 0 });
  if (script.isErr()) return ok(undefined);
  await input.onStep?.('RUNNING_SETUP_SCRIPT');
  const timeoutMs = setup.options.setupScriptTimeoutMs ?? DEFAULT_SETUP_SCRIPT_TIMEOUT_MS;
  const ran = await exec(
    setup,
    { command: ['bash', '-c', 'bash .openhands/setup.sh 2>&1'], cwd: dir, timeoutMs },
    'could not run .openhands/setup.sh',
  );
  if (ran.isErr()) return err(ran.error);
  const { exit_code, timed_out } = ran.value;
  const outcome = timed_out
    ? `was stopped after ${Math.round(timeoutMs / 1000)} s`
    : exit_code === 0
      ? 'succeeded'
      : `failed with exit code ${exit_code}`;
  await input.onReport?.({
    step: 'setup_script',
    summary: `.openhands/setup.sh ${outcome}`,
    output: setup.scrub(clip(`${ran.value.stdout}${ran.value.stderr}`)),
    exit_code,
    timed_out,
    duration_ms: ran.value.duration_ms,
  });
  return ok(undefined);
}

/** Reads the repository's guidance files (missing ones are simply absent). */
async function loadGuidance(runtime: SandboxRuntime, sandboxId: string, dir: string): Promise<RepositoryGuidance> {
  const read = async (path: string): Promise<string | null> => {
    const read = await runtime.readFile(sandboxId, `${dir}/${path}`, { maxBytes: MAX_GUIDANCE_FILE_BYTES });
    return read.isOk() ? decode(read.value.bytes) : null;
  };
  const instructions: GuidanceFile[] = [];
  const knowledge: KnowledgeFile[] = [];

  const root = await runtime.listDirectory(sandboxId, dir);
  const agentsFile = root.isOk()
    ? root.value.find((e) => e.type === 'file' && /^agents?\.md$/i.test(e.name))
    : undefined;
  if (agentsFile) {
    const text = await read(agentsFile.name);
    if (text?.trim()) instructions.push({ path: agentsFile.name, content: clipGuidance(text.trim()) });
  }

  const microagents = await runtime.listDirectory(sandboxId, `${dir}/.openhands/microagents`);
  const files = microagents.isOk()
    ? microagents.value
        .filter((e) => e.type === 'file' && e.name.endsWith('.md') && e.name.toLowerCase() !== 'readme.md')
        .sort((a, b) => (a.name === 'repo.md' ? -1 : b.name === 'repo.md' ? 1 : a.name < b.name ? -1 : 1))
        .slice(0, MAX_MICROAGENT_FILES)
    : [];
  for (const entry of files) {
    const path = `.openhands/microagents/${entry.name}`;
    const text = await read(path);
    if (!text) continue;
    const parsed = parseFrontMatter(text);
    const body = parsed.body.trim();
    if (!body) continue;
    if (parsed.triggers.length > 0 && entry.name !== 'repo.md') {
      knowledge.push({
        path,
        name: parsed.name ?? entry.name.replace(/\.md$/, ''),
        triggers: parsed.triggers,
        content: clipGuidance(body),
      });
    } else {
      instructions.push({ path, content: clipGuidance(body) });
    }
  }
  return { instructions, knowledge };
}
