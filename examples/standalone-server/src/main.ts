import type { StandaloneConfig } from './config.js';
import type { StandaloneServer } from './server.js';
import type { StartPhase } from './storage.js';

/**
 * Signals are handled from the first line: a stop during start-up exits at once (saying where
 * the start was), a stop while serving shuts down cleanly within ACS_SHUTDOWN_TIMEOUT_SECONDS,
 * and a second signal, or that deadline, ends the process saying what it was waiting for.
 */
let phase: StartPhase | 'loading' | 'starting to listen' | 'serving' = 'loading';
let server: StandaloneServer | undefined;
let stopping: { signal: string; since: number } | null = null;
let shutdownTimeoutMs = 10_000;

const say = (message: string) => {
  // The structured log when there is one (stdout), else stderr.
  if (server) server.logger.warn({ phase }, message);
  else console.error(message);
};

const onSignal = (signal: NodeJS.Signals) => {
  const code = signal === 'SIGINT' ? 130 : 143;
  if (phase !== 'serving') {
    // Nothing is being served yet; whatever was opened is left as a crash would leave it (the storage recovers).
    say(`${signal} while starting (${phase}); exiting now`);
    process.exit(code);
  }
  if (stopping) {
    say(
      `second ${signal}: exiting now without waiting for ${server?.waitingFor() ?? 'the shutdown'} (${Math.round((Date.now() - stopping.since) / 1000)} s after ${stopping.signal})`,
    );
    process.exit(code);
  }
  stopping = { signal, since: Date.now() };
  const running = server!;
  running.logger.info({ signal }, 'shutting down');
  const deadline = setTimeout(() => {
    running.logger.error(
      { signal, waitedSeconds: Math.round(shutdownTimeoutMs / 1000), waitingFor: running.waitingFor() },
      `shutdown did not finish within ${Math.round(shutdownTimeoutMs / 1000)} s (ACS_SHUTDOWN_TIMEOUT_SECONDS); exiting anyway`,
    );
    process.exit(1);
  }, shutdownTimeoutMs);
  deadline.unref();
  running.close().then(
    () => process.exit(0),
    (error: unknown) => {
      running.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
      process.exit(1);
    },
  );
};
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

// Loaded after the handlers are in place: loading takes a moment, and a signal meanwhile is handled too.
const { loadConfig } = await import('./config.js');
const { createStandaloneServer } = await import('./server.js');

let config: StandaloneConfig;
try {
  config = loadConfig();
  shutdownTimeoutMs = config.shutdownTimeoutMs;
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}

try {
  server = await createStandaloneServer(config, undefined, (p) => (phase = p));
} catch (error) {
  console.error(`Cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}

let url: string;
try {
  phase = 'starting to listen';
  url = await server.listen();
  phase = 'serving';
} catch (error) {
  server.logger.fatal({ err: error instanceof Error ? error.message : String(error) }, 'could not start listening');
  process.exit(1);
}

// On stderr, so the key never enters the structured log on stdout.
const key = server.generatedKey;
// A link with the generated key signs in as user "default", whoever else ACS_API_KEYS names; their keys are the operator's and never printed.
const as = key ? ' (signs in as user "default")' : '';
const others = [...new Set(Object.values(config.apiKeys))].filter((user) => user !== 'default');
const named = others.length > 5 ? `${others.slice(0, 5).join(', ')} and ${others.length - 5} more` : others.join(', ');
console.error(
  [
    '',
    `Agent Conversation Service: ${url}`,
    key
      ? `  API key of user "default" (${key.created ? 'made now' : 'made at the first start'}, kept in ${key.file}; set SESSION_API_KEY to choose your own):\n\n    ${key.key}\n`
      : '  API keys: the ones you configured (SESSION_API_KEY, ACS_API_KEYS).',
    `  Try it:  curl -H "X-Session-API-Key: ${key ? key.key : '<your key>'}" ${url}/api/v1/sandbox-specs/search`,
    `  Console${as}: ${url}/console/?key=${key ? key.key : '<your key>'}  (with a session cookie; the key is dropped from the address)`,
    ...(config.uiDir ? [`  Your web UI (ACS_UI_DIR)${as}: ${url}/?key=${key ? key.key : '<your key>'}`] : []),
    `  OpenHands CLI: openhands login --server-url ${url}  (approve the sign-in in the console; keys are listed under API keys)`,
    ...(key && others.length > 0
      ? [`  To sign in as a user of ACS_API_KEYS (${named}) instead, put that user's key in the link: ?key=<their key>`]
      : []),
    '',
  ].join('\n'),
);
