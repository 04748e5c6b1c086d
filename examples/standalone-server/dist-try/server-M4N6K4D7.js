import {
  openStorage
} from "./chunk-CIPU6H35.js";

// src/server.ts
import { once } from "events";
import express from "express";
import { pino } from "pino";
import { createAgentConversationService } from "@acs/core";
import { unavailableSandboxRuntime } from "@acs/core/ports";
import { createDockerEnginePool, createDockerRuntime } from "@acs/adapter-docker";
import { answerClientErrors, createAcsRouter, serveUi } from "@acs/adapter-express";
import { createWebConsole } from "@acs/web-console";
import { createMcpConnector } from "@acs/adapter-mcp";
import { createGitProviders } from "@acs/adapter-git-providers";
import { createOpenAiLlmClient, knownModels } from "@acs/adapter-openai";
import { StaticSandboxSpecCatalog } from "@acs/adapter-memory";
import { FakeSandboxRuntime } from "@acs/testing";
import { createAgent } from "@acs/agent";

// src/api-key.ts
import { randomBytes } from "crypto";
import { chmod, mkdir, readFile, stat, writeFile } from "fs/promises";
import { join } from "path";
async function loadOrCreateApiKey(dataDir) {
  const file = join(dataDir, "api.key");
  await mkdir(dataDir, { recursive: true, mode: 448 });
  try {
    const key2 = (await readFile(file, "utf8")).trim();
    if (key2.length < 16) throw new Error(`${file} holds no usable API key (at least 16 characters); delete it to have a new one made`);
    if (((await stat(file)).mode & 63) !== 0) await chmod(file, 384);
    return { key: key2, file, created: false };
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
  const key = randomBytes(24).toString("base64url");
  try {
    await writeFile(file, `${key}
`, { mode: 384, flag: "wx" });
  } catch (error) {
    if (error.code === "EEXIST") return loadOrCreateApiKey(dataDir);
    throw error;
  }
  return { key, file, created: true };
}

// src/sandbox-image.ts
import { fileURLToPath } from "url";
import { commandImageProvider } from "@acs/adapter-docker";
var isSandboxImage = (image) => /^acs-sandbox:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(image);
var isAgentServerImage = (image) => /^acs-openhands-agent-server:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(image);
var script = (name) => fileURLToPath(new URL(`../../../scripts/${name}`, import.meta.url));
function sandboxImageProvider(images) {
  const sandbox = commandImageProvider({
    images: images.filter(isSandboxImage),
    command: (image) => ["bash", script("build-sandbox-image.sh"), "--tag", image],
    linePrefix: "build-sandbox-image: "
  });
  const agentServer = commandImageProvider({
    images: images.filter(isAgentServerImage),
    command: (image) => ["bash", script("build-agent-server-image.sh"), "--tag", image],
    linePrefix: "build-agent-server-image: "
  });
  return {
    provides: (image) => sandbox.provides(image) || agentServer.provides(image),
    provide: (image, onProgress) => (sandbox.provides(image) ? sandbox : agentServer).provide(image, onProgress)
  };
}

// src/server.ts
async function openSandboxRuntime(config) {
  if (config.runtime === "fake") return { runtime: new FakeSandboxRuntime(), docker: null, description: "fake (in memory, runs nothing)", unavailable: null };
  const dockerOptions = {
    limits: { memoryBytes: config.memoryMb * 1024 * 1024, cpus: config.cpus, pids: config.pids },
    networkMode: config.network,
    ...config.imageBuild === "auto" ? { images: sandboxImageProvider(config.specs.map((s) => s.image)) } : {}
  };
  if (config.dockerHosts) {
    const pool = await createDockerEnginePool(config.dockerHosts, dockerOptions);
    const description = `docker engines: ${pool.engines.map((e) => `${e.name} (${e.url}, up to ${e.maxRunning}; ${e.status})`).join(", ")}`;
    return { runtime: pool, docker: null, description, unavailable: null };
  }
  try {
    const runtime = await createDockerRuntime(dockerOptions);
    return { runtime, docker: runtime, description: `docker (engine ${runtime.connection.engineVersion}, API ${runtime.connection.apiVersion})`, unavailable: null };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { runtime: unavailableSandboxRuntime(reason), docker: null, description: "unavailable", unavailable: reason };
  }
}
async function createStandaloneServer(config, destination, onPhase = () => {
}) {
  const logger = pino(
    {
      level: config.logLevel,
      // Nothing logs headers or bodies, but a redaction list guards against mistakes.
      redact: {
        paths: ["*.llm_api_key", "*.search_api_key", "*.sandbox_api_key", "*.token", "*.secret", "*.api_key", 'headers["x-session-api-key"]'],
        censor: "[redacted]"
      }
    },
    destination
  );
  const storage = await openStorage(config, onPhase, (fields, message) => logger.warn(fields, message));
  let service;
  try {
    const generatedKey = config.generateDefaultKey ? await loadOrCreateApiKey(config.dataDir) : null;
    const apiKeys = { ...config.apiKeys, ...generatedKey ? { [generatedKey.key]: "default" } : {} };
    onPhase("connecting to the sandbox runtime");
    const sandboxes = await openSandboxRuntime(config.sandboxes);
    if (sandboxes.unavailable) logger.warn({ reason: sandboxes.unavailable }, "sandboxes are unavailable: sandbox routes will answer 503 until the server restarts with an engine");
    const ports = storage.ports;
    const installation = (await ports.installation.identity()).match(
      (id) => id,
      (e) => {
        throw new Error(`cannot read this installation's id from storage: ${e.message}`);
      }
    );
    service = createAgentConversationService(
      {
        ...ports,
        sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
        runtime: sandboxes.runtime,
        llm: createOpenAiLlmClient({ timeoutMs: config.llm.timeoutMs, maxRetries: config.llm.maxRetries }),
        mcp: createMcpConnector({ logger: (message, fields) => logger.debug(fields, message) }),
        gitProviders: createGitProviders({
          github: { apiUrl: config.git.githubApiUrl },
          gitlab: { apiUrl: config.git.gitlabApiUrl },
          allowedHosts: config.git.allowedHosts,
          allowHttp: config.git.allowHttp,
          timeoutMs: config.git.timeoutMs
        }),
        agent: createAgent({
          defaultMaxIterations: config.llm.defaultMaxIterations,
          mcp: { connectTimeoutMs: config.llm.mcpConnectTimeoutMs, callTimeoutMs: config.llm.mcpCallTimeoutMs }
        }),
        logger
      },
      {
        allowClientConversationIds: config.allowClientConversationIds,
        maxRunningSandboxesPerUser: config.sandboxes.maxRunningPerUser,
        atSandboxLimit: config.sandboxes.pauseOldestAtLimit ? "pause_oldest" : "refuse",
        ...config.sandboxes.standaloneSpec ? { standaloneSpecId: config.sandboxes.standaloneSpec } : {},
        ...config.sandboxes.idlePauseMinutes > 0 ? { idlePauseAfterMs: config.sandboxes.idlePauseMinutes * 6e4 } : {}
      }
    );
    if (sandboxes.docker && config.sandboxes.imageBuild === "auto") {
      for (const image of new Set(config.sandboxes.specs.map((s) => s.image).filter(isSandboxImage))) prepareSandboxImage(sandboxes.docker, image, logger);
    }
    if (!sandboxes.unavailable) {
      onPhase("recovering sandboxes and agents");
      const recovered = await service.recover();
      if (recovered.isErr()) logger.warn({ error: recovered.error.type }, "could not reconcile sandboxes and resume agents");
      else if (recovered.value.resumed > 0) logger.info(recovered.value, "resumed agents that were running before the restart");
    }
    const streams = new AbortController();
    const app = express();
    app.disable("x-powered-by");
    const models = [...knownModels(), ...config.extraModels];
    const router = createAcsRouter(service, {
      apiKeys,
      logger,
      shutdownSignal: streams.signal,
      models: () => models,
      trustProxy: config.trustProxy,
      ...config.sandboxUrlHost ? { sandboxUrlHost: config.sandboxUrlHost } : {},
      ...storage.signingSecret ? { secret: storage.signingSecret } : {}
    });
    app.use(router);
    app.use("/console", createWebConsole());
    if (config.uiDir) app.use(serveUi(config.uiDir));
    else app.get("/", (_req, res) => res.redirect(302, "console/"));
    let server;
    const connections = /* @__PURE__ */ new Set();
    let waiting = null;
    const running = service;
    return {
      service: running,
      logger,
      generatedKey,
      waitingFor: () => waiting?.() ?? null,
      async listen() {
        server = app.listen(config.port, config.host);
        server.on("connection", (socket) => {
          connections.add(socket);
          socket.once("close", () => connections.delete(socket));
        });
        await once(server, "listening");
        answerClientErrors(server);
        router.attach(server);
        const { address, port } = server.address();
        const url = `http://${address.includes(":") ? `[${address}]` : address}:${port}`;
        logger.info(
          { url, ...storage.description, installation, sandboxes: sandboxes.description, ui: config.uiDir, users: [...new Set(Object.values(apiKeys))] },
          "agent conversation service listening"
        );
        return url;
      },
      async close() {
        streams.abort();
        if (server) {
          const http = server;
          waiting = () => `HTTP requests in progress to finish (${connections.size} connection${connections.size === 1 ? "" : "s"} open)`;
          const closed = once(http, "close");
          http.close();
          http.closeIdleConnections();
          await closed;
        }
        waiting = () => `the agents to stop and background work to end (${running.pendingWork().join(", ") || "nothing left"})`;
        await running.close();
        waiting = () => "storage to close";
        await storage.close();
        waiting = null;
        logger.info({}, "agent conversation service stopped");
      }
    };
  } catch (error) {
    await service?.close();
    await storage.close();
    throw error;
  }
}
function prepareSandboxImage(docker, image, logger) {
  let announced = false;
  const started = Date.now();
  docker.ensureImage(image, (line) => {
    if (!announced) {
      announced = true;
      logger.info({ image }, "the sandbox image is missing; building it now (once; sandboxes started meanwhile wait for it)");
    }
    logger.info({ image, step: line }, "building the sandbox image");
  }).then(
    (outcome) => {
      if (outcome === "provided") logger.info({ image, seconds: Math.round((Date.now() - started) / 1e3) }, "the sandbox image is ready");
    },
    (error) => {
      logger.error(
        { image, reason: error instanceof Error ? error.message : String(error) },
        "could not build the sandbox image; sandboxes will fail until it exists (run scripts/build-sandbox-image.sh to see why)"
      );
    }
  );
}
export {
  createStandaloneServer
};
//# sourceMappingURL=server-M4N6K4D7.js.map