// src/main.ts
var phase = "loading";
var server;
var stopping = null;
var shutdownTimeoutMs = 1e4;
var say = (message) => {
  if (server) server.logger.warn({ phase }, message);
  else console.error(message);
};
var onSignal = (signal) => {
  const code = signal === "SIGINT" ? 130 : 143;
  if (phase !== "serving") {
    say(`${signal} while starting (${phase}); exiting now`);
    process.exit(code);
  }
  if (stopping) {
    say(`second ${signal}: exiting now without waiting for ${server?.waitingFor() ?? "the shutdown"} (${Math.round((Date.now() - stopping.since) / 1e3)} s after ${stopping.signal})`);
    process.exit(code);
  }
  stopping = { signal, since: Date.now() };
  const running = server;
  running.logger.info({ signal }, "shutting down");
  const deadline = setTimeout(() => {
    running.logger.error(
      { signal, waitedSeconds: Math.round(shutdownTimeoutMs / 1e3), waitingFor: running.waitingFor() },
      `shutdown did not finish within ${Math.round(shutdownTimeoutMs / 1e3)} s (ACS_SHUTDOWN_TIMEOUT_SECONDS); exiting anyway`
    );
    process.exit(1);
  }, shutdownTimeoutMs);
  deadline.unref();
  running.close().then(
    () => process.exit(0),
    (error) => {
      running.logger.error({ err: error instanceof Error ? error.message : String(error) }, "shutdown failed");
      process.exit(1);
    }
  );
};
process.on("SIGTERM", onSignal);
process.on("SIGINT", onSignal);
var { loadConfig } = await import("./config-U7DDHFQM.js");
var { createStandaloneServer } = await import("./server-M4N6K4D7.js");
var config;
try {
  config = loadConfig();
  shutdownTimeoutMs = config.shutdownTimeoutMs;
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
try {
  server = await createStandaloneServer(config, void 0, (p) => phase = p);
} catch (error) {
  console.error(`Cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
var url;
try {
  phase = "starting to listen";
  url = await server.listen();
  phase = "serving";
} catch (error) {
  server.logger.fatal({ err: error instanceof Error ? error.message : String(error) }, "could not start listening");
  process.exit(1);
}
var key = server.generatedKey;
var as = key ? ' (signs in as user "default")' : "";
var others = [...new Set(Object.values(config.apiKeys))].filter((user) => user !== "default");
var named = others.length > 5 ? `${others.slice(0, 5).join(", ")} and ${others.length - 5} more` : others.join(", ");
console.error(
  [
    "",
    `Agent Conversation Service: ${url}`,
    key ? `  API key of user "default" (${key.created ? "made now" : "made at the first start"}, kept in ${key.file}; set SESSION_API_KEY to choose your own):

    ${key.key}
` : "  API keys: the ones you configured (SESSION_API_KEY, ACS_API_KEYS).",
    `  Try it:  curl -H "X-Session-API-Key: ${key ? key.key : "<your key>"}" ${url}/api/v1/sandbox-specs/search`,
    `  Console${as}: ${url}/console/?key=${key ? key.key : "<your key>"}  (with a session cookie; the key is dropped from the address)`,
    ...config.uiDir ? [`  Your web UI (ACS_UI_DIR)${as}: ${url}/?key=${key ? key.key : "<your key>"}`] : [],
    `  OpenHands CLI: openhands login --server-url ${url}  (approve the sign-in in the console; keys are listed under API keys)`,
    ...key && others.length > 0 ? [`  To sign in as a user of ACS_API_KEYS (${named}) instead, put that user's key in the link: ?key=<their key>`] : [],
    ""
  ].join("\n")
);
//# sourceMappingURL=main.js.map