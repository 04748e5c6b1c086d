// src/storage.ts
import { join as join3 } from "path";
import { PGlite } from "@electric-sql/pglite";
import { createPostgresEventNotifier, createPostgresStorage } from "@acs/adapter-postgres";
import { createMemoryStores } from "@acs/adapter-memory";

// src/data-dir-lock.ts
import { readdirSync, readFileSync } from "fs";
import { link, mkdir, open, readFile, rmdir, stat, unlink } from "fs/promises";
import { hostname } from "os";
import { join } from "path";
var DataDirInUseError = class extends Error {
  constructor(dataDir, holder, stillExitingAfterMs) {
    super(
      `The data directory ${dataDir} is in use by process ${holder.pid}${holder.host !== hostname() ? ` on ${holder.host}` : ""} (started ${holder.started_at})` + (stillExitingAfterMs === null ? ". " : `, which was killed or has ended but has not finished exiting after ${stillExitingAfterMs / 1e3} s (held up in the kernel, e.g. by storage that does not answer). `) + "One server per data directory: stop that process, or give this one another DATA_DIR (or a DATABASE_URL)."
    );
    this.dataDir = dataDir;
    this.holder = holder;
  }
  dataDir;
  holder;
};
async function lockDataDir(dataDir, options = {}) {
  const exitWaitMs = options.exitWaitMs ?? 5e3;
  await mkdir(dataDir, { recursive: true, mode: 448 });
  const path = join(dataDir, "server.lock");
  const mine = { pid: process.pid, host: hostname(), process_start: processStart(process.pid), started_at: (/* @__PURE__ */ new Date()).toISOString() };
  const text = `${JSON.stringify(mine)}
`;
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await createExclusive(path, text)) return handle(path, text);
    const holder = await readOwner(path);
    if (holder === "missing") continue;
    if (holder !== "unreadable") {
      let state = holderState(holder);
      if (state === "exiting") {
        options.onWaitingForExit?.(holder.pid, exitWaitMs);
        const deadline = Date.now() + exitWaitMs;
        while (state === "exiting" && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
          state = holderState(holder);
        }
      }
      if (state !== "gone") throw new DataDirInUseError(dataDir, holder, state === "exiting" ? exitWaitMs : null);
    }
    await takeOver(path, holder === "unreadable" ? null : holder);
  }
  throw new Error(`Could not lock the data directory ${dataDir}: its lock file ${path} keeps changing; is another server starting there?`);
}
function handle(path, text) {
  let released = false;
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      const current = await readFile(path, "utf8").catch(() => null);
      if (current === text) await unlink(path).catch(() => {
      });
    }
  };
}
async function createExclusive(path, text) {
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
  const file = await open(temporary, "wx", 384);
  try {
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await link(temporary, path);
    return true;
  } catch (error) {
    if (error.code === "EEXIST") return false;
    throw error;
  } finally {
    await unlink(temporary).catch(() => {
    });
  }
}
async function readOwner(path) {
  let text;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (error.code === "ENOENT") return "missing";
    throw error;
  }
  try {
    const owner = JSON.parse(text);
    return typeof owner.pid === "number" && typeof owner.host === "string" ? { pid: owner.pid, host: owner.host, process_start: owner.process_start ?? null, started_at: owner.started_at ?? "at an unknown time" } : "unreadable";
  } catch {
    return "unreadable";
  }
}
function holderState(holder) {
  if (holder.host !== hostname()) return "alive";
  if (holder.pid === process.pid || !exists(holder.pid)) return "gone";
  const start = processStart(holder.pid);
  if (holder.process_start !== null && start !== null && start !== holder.process_start) return "gone";
  return threadsState(holder.pid) ?? (exists(holder.pid) ? "alive" : "gone");
}
function exists(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}
var PF_EXITING = 4;
var SIGKILL_BIT = 1 << 8;
function threadsState(pid) {
  let threads;
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let live = 0;
  let exiting = false;
  for (const thread of threads) {
    let stat3;
    let status;
    try {
      stat3 = readFileSync(`/proc/${pid}/task/${thread}/stat`, "utf8");
      status = readFileSync(`/proc/${pid}/task/${thread}/status`, "utf8");
    } catch (error) {
      if (error.code === "ENOENT" || error.code === "ESRCH") continue;
      return null;
    }
    const fields = stat3.slice(stat3.lastIndexOf(")") + 2).split(" ");
    const state = fields[0] ?? "";
    if (state === "Z" || state === "X" || state === "x") continue;
    live++;
    const pending = [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].some((m) => (parseInt((m[1] ?? "0").slice(-8), 16) & SIGKILL_BIT) !== 0);
    if ((Number(fields[6]) & PF_EXITING) !== 0 || pending) exiting = true;
  }
  if (threads.length === 0) return null;
  return live === 0 ? "gone" : exiting ? "exiting" : "alive";
}
async function takeOver(path, stale) {
  const guard = `${path}.takeover`;
  try {
    await mkdir(guard);
  } catch (error) {
    if (error.code !== "EEXIST") throw error;
    const age = Date.now() - (await stat(guard).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
    if (age > 1e4) await rmdir(guard).catch(() => {
    });
    await new Promise((r) => setTimeout(r, 50));
    return;
  }
  try {
    const current = await readOwner(path);
    const unchanged = current === "unreadable" ? stale === null : current !== "missing" && stale !== null && current.pid === stale.pid && current.started_at === stale.started_at;
    if (unchanged) await unlink(path).catch(() => {
    });
  } finally {
    await rmdir(guard).catch(() => {
    });
  }
}
function processStart(pid) {
  try {
    const stat3 = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat3.slice(stat3.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

// src/secret-key.ts
import { hkdfSync, randomBytes } from "crypto";
import { chmod, mkdir as mkdir2, readFile as readFile2, stat as stat2, writeFile } from "fs/promises";
import { join as join2 } from "path";
import { createAesGcmCipher, keyFingerprint, parseSecretKey } from "@acs/core";
async function loadCipher(options) {
  let current;
  let source;
  let keyFile = null;
  if (options.secretKey) {
    current = parseSecretKey(options.secretKey, "ACS_SECRET_KEY");
    source = "ACS_SECRET_KEY";
  } else {
    keyFile = join2(options.dataDir, "secret.key");
    await mkdir2(options.dataDir, { recursive: true, mode: 448 });
    try {
      current = parseSecretKey(await readFile2(keyFile, "utf8"), `key in ${keyFile}`);
      if (((await stat2(keyFile)).mode & 63) !== 0) await chmod(keyFile, 384);
      source = "key file";
    } catch (error) {
      if (error.code !== "ENOENT") throw error;
      current = randomBytes(32);
      await writeFile(keyFile, `${current.toString("base64")}
`, { mode: 384, flag: "wx" });
      source = "generated key file";
    }
  }
  const keys = { [keyFingerprint(current)]: current };
  options.previousSecretKeys.forEach((text, i) => {
    const key = parseSecretKey(text, `ACS_PREVIOUS_SECRET_KEYS entry ${i + 1}`);
    keys[keyFingerprint(key)] = key;
  });
  const signingSecret = new Uint8Array(hkdfSync("sha256", current, Buffer.alloc(0), "acs conversation keys", 32));
  return { cipher: createAesGcmCipher({ keys, currentKeyId: keyFingerprint(current) }), source, keyFile, signingSecret };
}

// src/storage.ts
async function openStorage(config, phase, warn = () => {
}) {
  if (config.storage.kind === "memory") {
    return { ports: createMemoryStores(), signingSecret: null, description: { storage: "memory (nothing survives a restart)" }, close: async () => {
    } };
  }
  let lock = null;
  if (config.storage.kind === "pglite") {
    phase("locking the data directory");
    lock = await lockDataDir(config.dataDir, {
      onWaitingForExit: (pid, waitMs) => warn({ dataDir: config.dataDir, holder: pid }, `the data directory's holder, process ${pid}, was killed or has ended and is still exiting; waiting up to ${waitMs / 1e3} s for it`)
    });
  }
  phase("opening storage");
  try {
    const { cipher, source, keyFile, signingSecret } = await loadCipher(config);
    const keyInfo = { secretKey: source, secretKeyId: cipher.currentKeyId, ...keyFile ? { secretKeyFile: keyFile } : {} };
    if (config.storage.kind === "postgres") {
      const storage = await createPostgresStorage({ db: config.storage.url, cipher, migrations: "auto" });
      try {
        const eventNotifier = await createPostgresEventNotifier({ connectionString: config.storage.url });
        return {
          ports: { ...storage, eventNotifier },
          signingSecret,
          description: { storage: "postgres", ...keyInfo },
          close: async () => {
            await eventNotifier.close();
            await storage.close();
          }
        };
      } catch (error) {
        await storage.close();
        throw error;
      }
    }
    const directory = join3(config.dataDir, "pglite");
    const pglite = await PGlite.create(directory);
    try {
      const { conversationLeases: _unshared, ...storage } = await createPostgresStorage({ db: pglite, cipher, migrations: "auto" });
      const held = lock;
      return {
        ports: storage,
        signingSecret,
        description: { storage: "pglite", dataDir: directory, ...keyInfo },
        close: async () => {
          await pglite.close();
          await held?.release();
        }
      };
    } catch (error) {
      await pglite.close();
      throw error;
    }
  } catch (error) {
    await lock?.release();
    throw error;
  }
}

export {
  openStorage
};
//# sourceMappingURL=chunk-CIPU6H35.js.map