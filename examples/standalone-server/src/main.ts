import { loadConfig } from './config.js';
import { createStandaloneServer } from './server.js';

let config;
try {
  config = loadConfig();
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}

let server;
try {
  server = await createStandaloneServer(config);
} catch (error) {
  console.error(`Cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
if (config.generatedKey) {
  // Shown once, on stderr, so it never enters the structured log on stdout.
  console.error(`SESSION_API_KEY is not set; generated a key for user "default" (valid until this process exits):\n\n  ${config.generatedKey}\n`);
}

try {
  await server.listen();
} catch (error) {
  server.logger.fatal({ err: error instanceof Error ? error.message : String(error) }, 'could not start listening');
  process.exit(1);
}

let stopping = false;
const stop = (signal: string) => {
  if (stopping) return;
  stopping = true;
  server.logger.info({ signal }, 'shutting down');
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      server.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
      process.exit(1);
    },
  );
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
