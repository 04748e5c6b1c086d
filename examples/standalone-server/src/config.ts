import { isAbsolute, resolve } from 'node:path';
import { normalizeHostEntry } from '@acs/core';
import { ExposedPortSchema } from '@acs/core/schemas';
import { z } from 'zod';
import type { CommonSandboxSettings, ConfiguredSandboxRuntime } from './runtimes/runtime-module.js';
import { SANDBOX_RUNTIMES } from './sandbox-runtimes.js';

export interface StandaloneConfig {
  port: number;
  host: string;
  /** API key → user id (from SESSION_API_KEY and ACS_API_KEYS). */
  apiKeys: Record<string, string>;
  /** SESSION_API_KEY is not set: user `default` gets a key made once and kept in dataDir (api.key). */
  generateDefaultKey: boolean;
  /** How long a shutdown may take before the process exits anyway, saying what it was waiting for. */
  shutdownTimeoutMs: number;
  /** A web UI build to serve at `/` (e.g. the OpenHands frontend's build/client), absolute; null: none. */
  uiDir: string | null;
  /** Model names offered besides the OpenAI adapter's known ones (`GET /api/options/models`). */
  extraModels: string[];
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  allowClientConversationIds: boolean;
  /** ACS_TRUST_PROXY: believe X-Forwarded-Proto/-Host (the server is behind a proxy that sets them). */
  trustProxy: boolean;
  /** ACS_DEVICE_KEY_TTL_DAYS: how long a device sign-in's key (`openhands login`) opens things; null: until revoked. */
  deviceKeyTtlDays: number | null;
  /** ACS_SANDBOX_URL_HOST: the base host of sandboxes' exposed URLs (`agent-server-<id>.<host>`); null: the host the client reached. */
  sandboxUrlHost: string | null;
  /**
   * ACS_SANDBOX_LOOPBACK_PORTS: a client on loopback gets each sandbox URL as a loopback port of
   * its own (`http://127.0.0.1:<port>`, resolvable everywhere) instead of a `*.localhost` name.
   * Default: on when HOST is a loopback address.
   */
  sandboxLoopbackPorts: boolean;
  /**
   * Where data lives: embedded SQLite in dataDir (the default without DATABASE_URL; `chosen`
   * when ACS_STORAGE names it), embedded PGlite in dataDir, a PostgreSQL server, or memory only.
   */
  storage:
    | {
        kind: 'sqlite';
        chosen: boolean;
        /** ACS_SQLITE_SYNCHRONOUS: `normal` (default) survives a crash or SIGKILL, not a power cut; `full` fsyncs every commit. */
        synchronous: 'full' | 'normal';
      }
    | { kind: 'pglite' }
    | { kind: 'postgres'; url: string; waitMs: number }
    | { kind: 'memory' };
  /** Absolute; holds the embedded database (SQLite or PGlite) and the generated secret key. */
  dataDir: string;
  /** ACS_SECRET_KEY, if given (else a key file in dataDir is used or created). */
  secretKey: string | null;
  /** Earlier keys still needed to read secrets stored before a rotation. */
  previousSecretKeys: string[];
  sandboxes: SandboxConfig;
  llm: LlmConfig;
  git: GitConfig;
  /** What users' settings may make the server spend for them (the operator's caps). */
  userLimits: UserLimitsConfig;
}

/** The operator's caps on users' settings (core's UserSettingLimits) and the images users may name. */
interface UserLimitsConfig {
  /** ACS_MAX_RESOURCE_FACTOR: the most remote_runtime_resource_factor applied (1: users cannot raise their sandbox limits). */
  maxResourceFactor: number;
  /** ACS_MAX_CONDENSER_SIZE: the most condenser_max_size applied. */
  maxCondenserSize: number;
  /** ACS_MAX_USER_ITERATIONS: the most max_iterations applied (at least ACS_MAX_ITERATIONS when unset). */
  maxIterations: number;
  /** ACS_MAX_BUDGET_PER_TASK: the most max_budget_per_task applied, in USD; null: none. */
  maxBudgetPerTask: number | null;
  /** ACS_ALLOWED_IMAGES: images users may name besides the specs' own (exact, or a prefix ending in `*`); null: any (`*`). */
  allowedImages: string[] | null;
}

/** How the server reaches git providers with users' tokens (the git searches and `users/git-info`). */
interface GitConfig {
  /** REST base for tokens stored without a host (github.com). */
  githubApiUrl: string;
  /** REST base for tokens stored without a host (gitlab.com, or your own GitLab). */
  gitlabApiUrl: string;
  /** Hosts tokens may name besides those; null: any https host. */
  allowedHosts: string[] | null;
  /** Tokens may name http:// hosts. */
  allowHttp: boolean;
  /** Per request to a provider. */
  timeoutMs: number;
}

interface LlmConfig {
  /** Per attempt. */
  timeoutMs: number;
  /** Retries on 429, 5xx, timeouts and connection errors. */
  maxRetries: number;
  /** Steps per user message when the user's max_iterations is unset. */
  defaultMaxIterations: number;
  /** Connecting to one MCP server and listing its tools. */
  mcpConnectTimeoutMs: number;
  /** One MCP tool call. */
  mcpCallTimeoutMs: number;
  /** ACS_LLM_ALLOWED_HOSTS: the hosts (host or host:port) model URLs may name, base URLs and providers' own; null: any. */
  allowedHosts: string[] | null;
  /** ACS_MCP_ALLOWED_HOSTS: the hosts HTTP and SSE MCP servers may be on; null: any. */
  mcpAllowedHosts: string[] | null;
  /** ACS_MAX_MODEL_CALLS_PER_USER: one user's model calls under way at once; more wait their turn. */
  maxModelCallsPerUser: number;
}

export interface SandboxConfig {
  /** The runtime ACS_SANDBOXES names (src/sandbox-runtimes.ts), with its own options read. */
  runtime: ConfiguredSandboxRuntime;
  specs: SpecConfig[];
  /** The spec of sandboxes started with no spec named (`POST /api/v1/sandboxes` alone, as the OpenHands CLI and SDK do); null: the default spec. */
  standaloneSpec: string | null;
  memoryMb: number;
  cpus: number;
  pids: number;
  network: 'bridge' | 'none' | 'host';
  maxRunningPerUser: number;
  /** At the limit: pause a sandbox whose conversations finished (the default), refuse (429), or pause the oldest whatever runs in it. */
  atLimit: 'pause_finished' | 'refuse' | 'pause_oldest';
  /** 0: never. */
  idlePauseMinutes: number;
  /** Sandboxes whose conversations all finished or wait for the user; 0: never. */
  finishedIdlePauseMinutes: number;
  /** ACS_SANDBOX_POOL: warm sandboxes kept ready per spec id (specs not named: none); default one of the default spec. */
  pool: Record<string, number>;
}

const SpecSchema = z.object({
  id: z.string().min(1).max(128),
  image: z.string().min(1).max(512),
  working_dir: z.string().regex(/^\//, 'must be an absolute path').default('/workspace'),
  command: z.array(z.string()).nullable().optional(),
  initial_env: z.record(z.string(), z.string()).optional(),
  description: z.string().nullable().optional(),
  exposed_ports: z.array(ExposedPortSchema).optional(),
  session_api_key_variable: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name')
    .nullable()
    .optional(),
});
type SpecConfig = z.infer<typeof SpecSchema>;

/** The id of the OpenHands agent-server spec the example server offers by default. */
const AGENT_SERVER_SPEC_ID = 'openhands-agent-server';

/** The agent-server versions the default specs offer: the newest pin first (scripts/openhands-pins.sh moves it). */
const AGENT_SERVER_VERSION = '1.58.2';
const majorMinor = (version: string) => version.split('.').slice(0, 2).join('.');
const PREVIOUS_AGENT_SERVER_VERSION = '1.34.0';
/** The two agent-server specs the example server offers by default, newest first (their tests read them here). */
export const AGENT_SERVER_SPECS = [
  { id: AGENT_SERVER_SPEC_ID, image: `acs-openhands-agent-server:${AGENT_SERVER_VERSION}` },
  {
    id: `${AGENT_SERVER_SPEC_ID}-${majorMinor(PREVIOUS_AGENT_SERVER_VERSION)}`,
    image: `acs-openhands-agent-server:${PREVIOUS_AGENT_SERVER_VERSION}`,
  },
] as const;

/**
 * The spec of the previous pin. Sandboxes started with no spec named get it by default: the
 * OpenHands CLI 1.16 names none, and the SDK it pins (1.21) cannot read the events of
 * agent-server 1.58 (their `parent_id` is a field its models forbid), while the newest SDK works
 * with both.
 */
const PREVIOUS_AGENT_SERVER_SPEC_ID = AGENT_SERVER_SPECS[1].id;

/** A spec of the OpenHands agent-server image of one version (scripts/build-agent-server-image.sh builds it on first use). */
const agentServerSpec = (id: string, version: string, why: string): SandboxConfig['specs'][number] => ({
  id,
  image: `acs-openhands-agent-server:${version}`,
  working_dir: '/workspace',
  description: `The OpenHands agent-server ${version} (Debian trixie, Python 3.13), ${why}`,
  exposed_ports: [{ name: 'AGENT_SERVER', port: 8000, health_path: '/ready' }],
  session_api_key_variable: 'OH_SESSION_API_KEYS_0',
});

/**
 * The default specs: the image scripts/build-sandbox-image.sh builds (the default, which
 * conversations use), and the OpenHands agent-server's, newest and previous pin, which
 * scripts/build-agent-server-image.sh builds on first use: its server is reached through this
 * one at the AGENT_SERVER URL, opened by the sandbox's own key (the agent-server's
 * OH_SESSION_API_KEYS_0).
 */
const DEFAULT_SPECS: SandboxConfig['specs'] = [
  {
    id: 'bookworm',
    image: 'acs-sandbox:bookworm',
    working_dir: '/workspace',
    description: 'Debian bookworm with bash, git and python3 (also as python)',
  },
  agentServerSpec(AGENT_SERVER_SPEC_ID, AGENT_SERVER_VERSION, 'for the OpenHands SDK'),
  agentServerSpec(
    PREVIOUS_AGENT_SERVER_SPEC_ID,
    PREVIOUS_AGENT_SERVER_VERSION,
    'the previous pin, for the OpenHands CLI 1.16 and SDKs before 1.5x',
  ),
];

const KEY = z.string().min(16, 'API keys must be at least 16 characters long');
const httpUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
  .transform((u) => u.replace(/\/+$/, ''));

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  SESSION_API_KEY: KEY.optional(),
  ACS_API_KEYS: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ACS_ALLOW_CLIENT_CONVERSATION_IDS: z.enum(['true', 'false', '1', '0']).default('false'),
  ACS_TRUST_PROXY: z.enum(['true', 'false', '1', '0']).default('false'),
  ACS_DEVICE_KEY_TTL_DAYS: z.coerce.number().int().min(0).max(3650).default(90),
  ACS_SANDBOX_URL_HOST: z
    .string()
    .regex(
      /^[a-z0-9]([a-z0-9.-]{0,200}[a-z0-9])?(:\d{1,5})?$/i,
      'must be a host name, with a port if needed (e.g. sandboxes.example.com)',
    )
    .optional(),
  ACS_SANDBOX_LOOPBACK_PORTS: z.enum(['true', 'false', '1', '0']).optional(),
  ACS_STORAGE: z.enum(['sqlite', 'pglite', 'postgres', 'memory']).optional(),
  // `normal` by default: an acknowledged write survives the server's crash or SIGKILL (what the
  // embedded default promises), at no fsync per commit; see docs/configuration.md.
  ACS_SQLITE_SYNCHRONOUS: z.enum(['full', 'normal']).default('normal'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// connection string')
    .optional(),
  ACS_DATABASE_WAIT_SECONDS: z.coerce.number().min(0).max(3600).default(60),
  DATA_DIR: z.string().default('./data'),
  ACS_SECRET_KEY: z.string().optional(),
  ACS_PREVIOUS_SECRET_KEYS: z.string().optional(),
  ACS_SANDBOXES: z.enum(SANDBOX_RUNTIMES.map((r) => r.name)).default(SANDBOX_RUNTIMES[0].name),
  ACS_SANDBOX_SPECS: z.string().optional(),
  ACS_STANDALONE_SANDBOX_SPEC: z.string().min(1).max(128).optional(),
  ACS_SANDBOX_MEMORY_MB: z.coerce.number().int().min(64).max(1_048_576).default(2048),
  ACS_SANDBOX_CPUS: z.coerce.number().positive().max(256).default(1),
  ACS_SANDBOX_PIDS: z.coerce.number().int().min(16).max(1_000_000).default(512),
  ACS_SANDBOX_NETWORK: z.enum(['bridge', 'none', 'host']).default('bridge'),
  ACS_MAX_RUNNING_SANDBOXES: z.coerce.number().int().min(1).max(1000).default(5),
  ACS_PAUSE_FINISHED_AT_LIMIT: z.enum(['true', 'false', '1', '0']).default('true'),
  ACS_PAUSE_OLDEST_AT_LIMIT: z.enum(['true', 'false', '1', '0']).default('false'),
  ACS_SANDBOX_IDLE_MINUTES: z.coerce.number().min(0).max(10_080).default(30),
  ACS_SANDBOX_FINISHED_IDLE_MINUTES: z.coerce.number().min(0).max(10_080).default(5),
  ACS_SANDBOX_POOL: z.string().optional(),
  ACS_SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().positive().max(3600).default(10),
  ACS_UI_DIR: z.string().optional(),
  ACS_MODELS: z.string().optional(),
  ACS_LLM_TIMEOUT_SECONDS: z.coerce.number().positive().max(3600).default(120),
  ACS_LLM_MAX_RETRIES: z.coerce.number().int().min(0).max(20).default(4),
  ACS_MAX_ITERATIONS: z.coerce.number().int().min(1).max(100_000).default(100),
  ACS_MAX_MODEL_CALLS_PER_USER: z.coerce.number().int().min(1).max(10_000).default(16),
  ACS_MCP_CONNECT_TIMEOUT_SECONDS: z.coerce.number().positive().max(3600).default(30),
  ACS_MCP_CALL_TIMEOUT_SECONDS: z.coerce.number().positive().max(86_400).default(300),
  ACS_LLM_ALLOWED_HOSTS: z.string().optional(),
  ACS_MCP_ALLOWED_HOSTS: z.string().optional(),
  ACS_GITHUB_API_URL: httpUrl.default('https://api.github.com'),
  ACS_GITLAB_API_URL: httpUrl.default('https://gitlab.com/api/v4'),
  ACS_GIT_ALLOWED_HOSTS: z.string().optional(),
  ACS_GIT_ALLOW_HTTP: z.enum(['true', 'false', '1', '0']).default('false'),
  ACS_GIT_TIMEOUT_SECONDS: z.coerce.number().positive().max(600).default(15),
  ACS_MAX_RESOURCE_FACTOR: z.coerce.number().int().min(1).max(64).default(1),
  ACS_MAX_CONDENSER_SIZE: z.coerce.number().int().min(20).max(100_000).default(1000),
  ACS_MAX_USER_ITERATIONS: z.coerce.number().int().min(1).max(100_000).optional(),
  ACS_MAX_BUDGET_PER_TASK: z.coerce.number().positive().max(1_000_000).optional(),
  ACS_ALLOWED_IMAGES: z.string().optional(),
  /** Set by npm to the directory `npm start` was run from; relative paths are taken from there. */
  INIT_CWD: z.string().optional(),
});

/** Every variable the server reads: the common ones and each runtime's own (INIT_CWD is npm's). */
export const CONFIG_VARIABLES: readonly string[] = [
  ...Object.keys(EnvSchema.shape),
  ...SANDBOX_RUNTIMES.flatMap((r) => Object.keys(r.env.shape)),
];

/** The parsed variables. */
type Env = z.output<typeof EnvSchema>;

/** Reads the configuration from the environment; throws an Error that says what to fix. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): StandaloneConfig {
  const blankToUndefined = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === '' ? undefined : v]));
  const e = parseEnv(blankToUndefined);
  const storageKind = e.ACS_STORAGE ?? (e.DATABASE_URL ? 'postgres' : 'sqlite');
  if (storageKind === 'postgres' && !e.DATABASE_URL)
    throw new Error('Invalid configuration: ACS_STORAGE=postgres needs DATABASE_URL');
  const base = e.INIT_CWD ?? process.cwd();
  return {
    sandboxes: sandboxesOf(e, blankToUndefined),
    llm: {
      timeoutMs: e.ACS_LLM_TIMEOUT_SECONDS * 1000,
      maxRetries: e.ACS_LLM_MAX_RETRIES,
      defaultMaxIterations: e.ACS_MAX_ITERATIONS,
      mcpConnectTimeoutMs: e.ACS_MCP_CONNECT_TIMEOUT_SECONDS * 1000,
      mcpCallTimeoutMs: e.ACS_MCP_CALL_TIMEOUT_SECONDS * 1000,
      allowedHosts: hostList(e.ACS_LLM_ALLOWED_HOSTS, 'ACS_LLM_ALLOWED_HOSTS'),
      mcpAllowedHosts: hostList(e.ACS_MCP_ALLOWED_HOSTS, 'ACS_MCP_ALLOWED_HOSTS'),
      maxModelCallsPerUser: e.ACS_MAX_MODEL_CALLS_PER_USER,
    },
    git: {
      githubApiUrl: e.ACS_GITHUB_API_URL,
      gitlabApiUrl: e.ACS_GITLAB_API_URL,
      allowedHosts:
        e.ACS_GIT_ALLOWED_HOSTS === undefined ? null : list(e.ACS_GIT_ALLOWED_HOSTS).map((h) => h.toLowerCase()),
      allowHttp: yes(e.ACS_GIT_ALLOW_HTTP),
      timeoutMs: e.ACS_GIT_TIMEOUT_SECONDS * 1000,
    },
    userLimits: userLimitsOf(e),
    storage:
      storageKind === 'postgres'
        ? { kind: 'postgres', url: e.DATABASE_URL as string, waitMs: e.ACS_DATABASE_WAIT_SECONDS * 1000 }
        : storageKind === 'sqlite'
          ? { kind: 'sqlite', chosen: e.ACS_STORAGE === 'sqlite', synchronous: e.ACS_SQLITE_SYNCHRONOUS }
          : { kind: storageKind },
    dataDir: isAbsolute(e.DATA_DIR) ? e.DATA_DIR : resolve(base, e.DATA_DIR),
    secretKey: e.ACS_SECRET_KEY ?? null,
    previousSecretKeys: list(e.ACS_PREVIOUS_SECRET_KEYS),
    port: e.PORT,
    host: e.HOST,
    apiKeys: apiKeysOf(e),
    generateDefaultKey: !e.SESSION_API_KEY,
    shutdownTimeoutMs: e.ACS_SHUTDOWN_TIMEOUT_SECONDS * 1000,
    uiDir: e.ACS_UI_DIR ? (isAbsolute(e.ACS_UI_DIR) ? e.ACS_UI_DIR : resolve(base, e.ACS_UI_DIR)) : null,
    extraModels: list(e.ACS_MODELS),
    logLevel: e.LOG_LEVEL,
    allowClientConversationIds: yes(e.ACS_ALLOW_CLIENT_CONVERSATION_IDS),
    trustProxy: yes(e.ACS_TRUST_PROXY),
    deviceKeyTtlDays: e.ACS_DEVICE_KEY_TTL_DAYS === 0 ? null : e.ACS_DEVICE_KEY_TTL_DAYS,
    sandboxUrlHost: e.ACS_SANDBOX_URL_HOST ?? null,
    sandboxLoopbackPorts:
      e.ACS_SANDBOX_LOOPBACK_PORTS === undefined
        ? /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/i.test(e.HOST)
        : yes(e.ACS_SANDBOX_LOOPBACK_PORTS),
  };
}

/** The caps on users' settings; the iterations cap is never below the default (ACS_MAX_ITERATIONS) users without a setting get. */
function userLimitsOf(e: Env): UserLimitsConfig {
  const images = list(e.ACS_ALLOWED_IMAGES);
  return {
    maxResourceFactor: e.ACS_MAX_RESOURCE_FACTOR,
    maxCondenserSize: e.ACS_MAX_CONDENSER_SIZE,
    maxIterations: e.ACS_MAX_USER_ITERATIONS ?? Math.max(500, e.ACS_MAX_ITERATIONS),
    maxBudgetPerTask: e.ACS_MAX_BUDGET_PER_TASK ?? null,
    allowedImages: images.includes('*') ? null : images,
  };
}

/** `true` or `1`. */
const yes = (value: string | undefined) => value === 'true' || value === '1';

/** A comma-separated list, its items trimmed, empty ones dropped. */
const list = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

/**
 * An allow-list of hosts (`host` or `host:port`, comma-separated, any case) as it is matched;
 * null when the variable is unset (any host). Entries that are not hosts, or a list of none, are
 * refused: a list that allows nothing by mistake would stop every model call.
 */
function hostList(value: string | undefined, name: string): string[] | null {
  if (value === undefined) return null;
  const entries = list(value);
  if (entries.length === 0)
    throw new Error(`Invalid configuration: ${name} names no host; leave it unset to allow any`);
  const invalid = entries.filter((entry) => normalizeHostEntry(entry) === null);
  if (invalid.length > 0)
    throw new Error(
      `Invalid configuration: ${name}: ${invalid.map((entry) => JSON.stringify(entry)).join(', ')} is not a host or host:port (e.g. api.openai.com, litellm.internal:4000)`,
    );
  return entries.map((entry) => normalizeHostEntry(entry)!);
}

/** The common variables parsed, and every runtime's checked, whichever runs: a mistake is found before it matters. */
function parseEnv(variables: Record<string, string | undefined>): Env {
  const parsed = EnvSchema.safeParse(variables);
  const issues = [parsed, ...SANDBOX_RUNTIMES.map((r) => r.env.safeParse(variables))].flatMap(
    (result) => result.error?.issues ?? [],
  );
  if (!parsed.success || issues.length > 0) {
    const problems = issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`Invalid configuration: ${problems}`);
  }
  return parsed.data;
}

/** SESSION_API_KEY (user `default`) and ACS_API_KEYS (`user:key` pairs): key → user. */
function apiKeysOf(e: Env): Record<string, string> {
  const apiKeys: Record<string, string> = {};
  const addKey = (key: string, userId: string, source: string) => {
    const checked = KEY.safeParse(key);
    if (!checked.success) throw new Error(`Invalid configuration: ${source}: ${checked.error.issues[0]?.message}`);
    if (apiKeys[key] !== undefined && apiKeys[key] !== userId)
      throw new Error(`Invalid configuration: ${source}: the same key is given to two users`);
    apiKeys[key] = userId;
  };
  if (e.SESSION_API_KEY) addKey(e.SESSION_API_KEY, 'default', 'SESSION_API_KEY');
  for (const pair of list(e.ACS_API_KEYS)) {
    const colon = pair.indexOf(':');
    if (colon <= 0 || colon === pair.length - 1)
      throw new Error('Invalid configuration: ACS_API_KEYS must be comma-separated user:key pairs');
    addKey(pair.slice(colon + 1), pair.slice(0, colon), `ACS_API_KEYS (user ${pair.slice(0, colon)})`);
  }
  return apiKeys;
}

/** The sandbox settings: the runtime ACS_SANDBOXES names (configured from its own variables), the specs, limits and pool. */
function sandboxesOf(e: Env, variables: Record<string, string | undefined>): StandaloneConfig['sandboxes'] {
  const runtime = SANDBOX_RUNTIMES.find((r) => r.name === e.ACS_SANDBOXES) ?? SANDBOX_RUNTIMES[0];
  const specs = e.ACS_SANDBOX_SPECS ? parseSpecs(e.ACS_SANDBOX_SPECS) : DEFAULT_SPECS;
  const standaloneSpec =
    e.ACS_STANDALONE_SANDBOX_SPEC ??
    [PREVIOUS_AGENT_SERVER_SPEC_ID, AGENT_SERVER_SPEC_ID].find((id) => specs.some((s) => s.id === id)) ??
    null;
  if (standaloneSpec !== null && !specs.some((s) => s.id === standaloneSpec)) {
    throw new Error(
      `Invalid configuration: ACS_STANDALONE_SANDBOX_SPEC: no spec "${standaloneSpec}" (the specs are ${specs.map((s) => s.id).join(', ')})`,
    );
  }
  return {
    runtime: runtime.configure(variables),
    specs,
    standaloneSpec,
    memoryMb: e.ACS_SANDBOX_MEMORY_MB,
    cpus: e.ACS_SANDBOX_CPUS,
    pids: e.ACS_SANDBOX_PIDS,
    network: e.ACS_SANDBOX_NETWORK,
    maxRunningPerUser: e.ACS_MAX_RUNNING_SANDBOXES,
    atLimit: ['true', '1'].includes(e.ACS_PAUSE_OLDEST_AT_LIMIT)
      ? 'pause_oldest'
      : ['true', '1'].includes(e.ACS_PAUSE_FINISHED_AT_LIMIT)
        ? 'pause_finished'
        : 'refuse',
    idlePauseMinutes: e.ACS_SANDBOX_IDLE_MINUTES,
    finishedIdlePauseMinutes: e.ACS_SANDBOX_FINISHED_IDLE_MINUTES,
    pool: parsePool(
      e.ACS_SANDBOX_POOL,
      specs.map((s) => s.id),
    ),
  };
}

/** ACS_SANDBOX_SPECS: a JSON array of specs, at least one. */
function parseSpecs(json: string): SpecConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error(
      'Invalid configuration: ACS_SANDBOX_SPECS must be a JSON array of {id, image, working_dir, command?, initial_env?, description?}',
    );
  }
  const parsed = z.array(SpecSchema).min(1).safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      `Invalid configuration: ACS_SANDBOX_SPECS: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return parsed.data;
}

/**
 * ACS_SANDBOX_POOL: `spec=count` pairs separated by commas (`bookworm=2,openhands-agent-server=1`),
 * or `none`. Unset: one warm sandbox of the default spec (the first one).
 */
function parsePool(value: string | undefined, specIds: readonly string[]): Record<string, number> {
  if (value === undefined) return { [specIds[0]!]: 1 };
  if (value.trim() === 'none') return {};
  const pool: Record<string, number> = {};
  for (const pair of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const match = /^(.+)=(\d{1,3})$/.exec(pair);
    if (!match)
      throw new Error(
        `Invalid configuration: ACS_SANDBOX_POOL: "${pair}" is not spec=count (e.g. ${specIds[0]}=1), and the whole value is not "none"`,
      );
    const [, specId = '', count = '0'] = match;
    if (!specIds.includes(specId))
      throw new Error(
        `Invalid configuration: ACS_SANDBOX_POOL: no spec "${specId}" (the specs are ${specIds.join(', ')})`,
      );
    if (Number(count) > 100)
      throw new Error(`Invalid configuration: ACS_SANDBOX_POOL: ${specId}: at most 100 warm sandboxes per spec`);
    pool[specId] = Number(count);
  }
  return pool;
}

/** What every runtime is given of the sandbox settings. */
export function commonSandboxSettings(config: SandboxConfig): CommonSandboxSettings {
  return {
    images: config.specs.map((s) => s.image),
    memoryMb: config.memoryMb,
    cpus: config.cpus,
    pids: config.pids,
    network: config.network,
  };
}
