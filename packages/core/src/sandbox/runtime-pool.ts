import { err, errAsync, ok, okAsync, type Result, type ResultAsync } from 'neverthrow';
import { resultAsync } from '../result.js';
import type { RuntimeCreateRequest, RuntimeObservation, RuntimeSandboxSummary, SandboxRuntime } from './runtime.js';
import type { SandboxRuntimeError } from './runtime-error.js';

/** One engine of a pool: a runtime, its name (kept in records as their location) and its capacity. */
export interface PooledRuntime {
  /** Unique in the pool; records remember it, so keep it stable across restarts. */
  readonly name: string;
  readonly runtime: SandboxRuntime;
  /** Most sandboxes this engine runs at once (of every installation). */
  readonly maxRunning: number;
  /** How many sandboxes the engine runs now (of every installation). */
  running(): ResultAsync<number, SandboxRuntimeError>;
}

type Where = { engine: PooledRuntime } | { missing: true; down: { engine: PooledRuntime; message: string }[] };

/**
 * Several runtimes (engines) as one. A new sandbox goes to the engine that answers and has the
 * most room (`maxRunning` minus what it runs now and what this process is creating there;
 * `admit` refuses a start when none has any);
 * every other call goes to the engine that holds
 * the sandbox: known from the create, from `list`, from the record (`locate`), or else asked of
 * every engine. An engine that does not answer makes its sandboxes' `inspect` an `error`
 * observation saying which engine and why (the service marks them ERROR; the others go on), and
 * once it answers again, reconcile gives them the status their containers have.
 */
export function createSandboxRuntimePool(engines: readonly PooledRuntime[]): SandboxRuntime {
  if (engines.length === 0) throw new Error('createSandboxRuntimePool: give it at least one engine');
  const byName = new Map(engines.map((e) => [e.name, e]));
  if (byName.size !== engines.length) throw new Error('createSandboxRuntimePool: engine names must be unique');
  const pool: Engines = { engines, byName, where: new Map(), placing: new Map(engines.map((e) => [e, 0])) };
  return {
    specificationVersion: 'v1',
    ping: () => resultAsync(ping(pool)),
    // What the engines that answer hold; an engine that does not answer is left out (its records keep their status until inspected).
    list: (installationId) => resultAsync(list(pool, installationId)),
    admit: () => resultAsync(choose(pool, false)).map(() => undefined),
    create: (request, onProgress) => resultAsync(create(pool, request, onProgress)),
    inspect: (sandboxId) => resultAsync(inspect(pool, sandboxId)),
    pause: (sandboxId) => onHolder(pool, sandboxId, (engine) => engine.runtime.pause(sandboxId).map(located(engine))),
    resume: (sandboxId) => onHolder(pool, sandboxId, (engine) => engine.runtime.resume(sandboxId).map(located(engine))),
    // Deleting what no engine holds succeeds, as the port asks.
    delete: (sandboxId) =>
      onHolder(
        pool,
        sandboxId,
        (engine) => engine.runtime.delete(sandboxId).map(() => void pool.where.delete(sandboxId)),
        () => okAsync(undefined),
      ),
    // Only when every engine can: a pool claim must know beforehand whether limits can be changed.
    ...(engines.every((e) => e.runtime.resize !== undefined)
      ? {
          resize: (sandboxId: string, factor: number) =>
            onHolder(pool, sandboxId, (engine) => engine.runtime.resize!(sandboxId, factor)),
        }
      : {}),
    exec: (sandboxId, request) => onHolder(pool, sandboxId, (engine) => engine.runtime.exec(sandboxId, request)),
    readFile: (sandboxId, path, options) =>
      onHolder(pool, sandboxId, (engine) => engine.runtime.readFile(sandboxId, path, options)),
    writeFile: (sandboxId, path, content) =>
      onHolder(pool, sandboxId, (engine) => engine.runtime.writeFile(sandboxId, path, content)),
    listDirectory: (sandboxId, path) =>
      onHolder(pool, sandboxId, (engine) => engine.runtime.listDirectory(sandboxId, path)),
    spawn: (sandboxId, request) => onHolder(pool, sandboxId, (engine) => engine.runtime.spawn(sandboxId, request)),
    locate: (sandboxId, location) => {
      const engine = byName.get(location);
      if (engine && !pool.where.has(sandboxId)) pool.where.set(sandboxId, engine);
    },
  };
}

/** The engines, and what this process knows of where sandboxes are and what it is creating. */
interface Engines {
  readonly engines: readonly PooledRuntime[];
  readonly byName: ReadonlyMap<string, PooledRuntime>;
  /** Sandbox id → the engine that holds it, as far as this process knows. */
  readonly where: Map<string, PooledRuntime>;
  /** Creates this process has sent to each engine and that have not settled: not in its count yet. */
  readonly placing: Map<PooledRuntime, number>;
}

const located =
  (engine: PooledRuntime) =>
  (observation: RuntimeObservation): RuntimeObservation => ({ ...observation, location: engine.name });
const downMessage = (engine: PooledRuntime, message: string) =>
  `sandbox engine "${engine.name}" does not answer: ${message}`;

/** Finds the engine holding a sandbox, asking every engine when it is not known yet. */
async function find(pool: Engines, sandboxId: string): Promise<Where> {
  const known = pool.where.get(sandboxId);
  if (known) return { engine: known };
  const answers = await Promise.all(
    pool.engines.map(async (engine) => ({ engine, seen: await engine.runtime.inspect(sandboxId) })),
  );
  const holder = answers.find((a) => a.seen.isOk() && a.seen.value.state !== 'missing');
  if (holder) {
    pool.where.set(sandboxId, holder.engine);
    return { engine: holder.engine };
  }
  return {
    missing: true,
    down: answers.flatMap((a) =>
      a.seen.isErr() && a.seen.error.type === 'unavailable'
        ? [{ engine: a.engine, message: a.seen.error.message }]
        : [],
    ),
  };
}

/** Runs `operation` on the engine holding the sandbox; `absent` answers when no engine has it. */
function onHolder<T>(
  pool: Engines,
  sandboxId: string,
  operation: (engine: PooledRuntime) => ResultAsync<T, SandboxRuntimeError>,
  absent: () => ResultAsync<T, SandboxRuntimeError> = () =>
    errAsync({ type: 'not_found', message: `sandbox ${sandboxId} is on none of the sandbox engines` }),
): ResultAsync<T, SandboxRuntimeError> {
  return resultAsync(onHolderOf(pool, sandboxId, operation, absent));
}

async function onHolderOf<T>(
  pool: Engines,
  sandboxId: string,
  operation: (engine: PooledRuntime) => ResultAsync<T, SandboxRuntimeError>,
  absent: () => ResultAsync<T, SandboxRuntimeError>,
): Promise<Result<T, SandboxRuntimeError>> {
  const found = await find(pool, sandboxId);
  if ('engine' in found) {
    const done = await operation(found.engine);
    if (done.isErr() && done.error.type === 'unavailable')
      return err({ ...done.error, message: downMessage(found.engine, done.error.message) });
    return done;
  }
  if (found.down.length > 0) {
    return err({
      type: 'unavailable',
      message: `sandbox ${sandboxId} is on none of the engines that answer; ${found.down.map((d) => downMessage(d.engine, d.message)).join('; ')}`,
    });
  }
  return absent();
}

/**
 * The engine with the most room among those that answer, or why there is none. `place`: count
 * a create on it at once, in the same turn as the choice, so concurrent creates spread.
 */
async function choose(pool: Engines, place: boolean): Promise<Result<PooledRuntime, SandboxRuntimeError>> {
  const answers = await Promise.all(
    pool.engines.map(async (engine) => {
      const pinged = await engine.runtime.ping();
      if (pinged.isErr()) return { engine, problem: downMessage(engine, pinged.error.message), running: 0 };
      const running = await engine.running();
      if (running.isErr()) return { engine, problem: downMessage(engine, running.error.message), running: 0 };
      return { engine, problem: null, running: running.value };
    }),
  );
  // Room now, with what this process is creating on each engine (not in its count yet).
  const states = answers.map((a) => ({ ...a, room: a.engine.maxRunning - a.running - pool.placing.get(a.engine)! }));
  const up = states.filter((s) => s.problem === null);
  if (up.length === 0) return err({ type: 'unavailable', message: states.map((s) => s.problem).join('; ') });
  const best = up.reduce((a, b) => (b.room > a.room ? b : a));
  if (best.room <= 0) {
    // Unavailable (503, "try again later"), not a failure: nothing is wrong with the request or the engines.
    return err({
      type: 'unavailable',
      message: `every sandbox engine that answers is at its limit (${up.map((s) => `"${s.engine.name}" runs ${s.engine.maxRunning - s.room} of ${s.engine.maxRunning}`).join(', ')}); try again when a sandbox was paused or deleted`,
    });
  }
  if (place) pool.placing.set(best.engine, pool.placing.get(best.engine)! + 1);
  return ok(best.engine);
}

async function ping(pool: Engines): Promise<Result<void, SandboxRuntimeError>> {
  const answers = await Promise.all(
    pool.engines.map(async (engine) => ({ engine, pinged: await engine.runtime.ping() })),
  );
  if (answers.some((a) => a.pinged.isOk())) return ok(undefined);
  return err({
    type: 'unavailable',
    message: answers.map((a) => downMessage(a.engine, a.pinged.isErr() ? a.pinged.error.message : '')).join('; '),
  });
}

async function list(
  pool: Engines,
  installationId: string,
): Promise<Result<RuntimeSandboxSummary[], SandboxRuntimeError>> {
  const answers = await Promise.all(
    pool.engines.map(async (engine) => ({ engine, listed: await engine.runtime.list(installationId) })),
  );
  const held: RuntimeSandboxSummary[] = [];
  for (const { engine, listed } of answers) {
    if (listed.isErr()) continue;
    for (const summary of listed.value) {
      pool.where.set(summary.sandbox_id, engine);
      held.push(summary);
    }
  }
  if (answers.every((a) => a.listed.isErr())) {
    return err({
      type: 'unavailable',
      message: answers.map((a) => downMessage(a.engine, a.listed.isErr() ? a.listed.error.message : '')).join('; '),
    });
  }
  return ok(held);
}

async function create(
  pool: Engines,
  request: RuntimeCreateRequest,
  onProgress: ((detail: string) => void) | undefined,
): Promise<Result<RuntimeObservation, SandboxRuntimeError>> {
  const chosen = await choose(pool, true);
  if (chosen.isErr()) return err(chosen.error);
  const engine = chosen.value;
  pool.where.set(request.sandbox_id, engine);
  const created = await engine.runtime.create(request, onProgress);
  pool.placing.set(engine, pool.placing.get(engine)! - 1);
  if (created.isErr()) return err(created.error);
  return ok(located(engine)(created.value));
}

async function inspect(pool: Engines, sandboxId: string): Promise<Result<RuntimeObservation, SandboxRuntimeError>> {
  const found = await find(pool, sandboxId);
  if ('engine' in found) {
    const seen = await found.engine.runtime.inspect(sandboxId);
    if (seen.isOk()) return ok(located(found.engine)(seen.value));
    if (seen.error.type !== 'unavailable') return err(seen.error);
    return ok({
      state: 'error',
      detail: downMessage(found.engine, seen.error.message),
      exposed_urls: [],
      location: found.engine.name,
    });
  }
  if (found.down.length > 0) {
    return ok({
      state: 'error',
      detail: `not on any sandbox engine that answers; ${found.down.map((d) => downMessage(d.engine, d.message)).join('; ')}`,
      exposed_urls: [],
    });
  }
  return ok({ state: 'missing', detail: 'the sandbox no longer exists on any sandbox engine', exposed_urls: [] });
}
