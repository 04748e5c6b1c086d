/**
 * `npm run sandboxes -- list` / `npm run sandboxes -- prune [--installation <id>]`
 *
 * The sandboxes of this installation on the runtime ACS_SANDBOXES names (with Docker, its
 * containers), found by the installation id kept in its data (DATA_DIR, or DATABASE_URL):
 * listed, or removed, e.g. after a server stopped and left them running. Other installations'
 * sandboxes on the same engine are never touched. Run it with the same environment as the
 * server; with SQLite or PGlite it refuses while the server runs.
 */
import { createAgentConversationService } from '@acs/core';
import { POOLED_SANDBOX_OWNER } from '@acs/core/schemas';
import { StaticSandboxSpecCatalog } from '@acs/adapter-memory';
import { ScriptedLlm } from '@acs/testing';
import { createAgent } from '@acs/agent';
import { okAsync } from 'neverthrow';
import { loadConfig } from './config.js';
import { openStorage } from './storage.js';

const USAGE = `Usage: npm run sandboxes -- <list|prune> [--installation <id>]
  list     the sandboxes of this installation, with their state
  prune    removes them (running and paused); their conversations stop and start
           again in a new sandbox when started; warm (pooled) ones go too
  --installation <id>  another installation's id (the server logs its id at start);
           needed with ACS_STORAGE=memory, whose id lives only as long as the process`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'list' && command !== 'prune') {
    console.error(USAGE);
    return command === undefined || command === '--help' || command === '-h' ? 0 : 2;
  }
  let explicit: string | null = null;
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--installation' && rest[i + 1]) explicit = rest[++i]!;
    else {
      console.error(`Unknown argument ${rest[i]}\n${USAGE}`);
      return 2;
    }
  }
  const config = loadConfig();
  if (config.storage.kind === 'memory' && !explicit) {
    console.error(
      'With ACS_STORAGE=memory each server process is its own installation; give the id it logged at start: --installation <id>.',
    );
    return 2;
  }
  const storage = await openStorage(
    config,
    () => {},
    (_fields, message) => console.error(message),
  );
  try {
    const installation =
      explicit ??
      (await storage.ports.installation.identity()).match(
        (id) => id,
        (e) => {
          throw new Error(`cannot read the installation id: ${e.message}`);
        },
      );
    // Where the server's runtime (ACS_SANDBOXES) keeps sandboxes: every engine it uses, say.
    const { runtime, where } = await config.sandboxes.runtime.openForCli();
    const held = await runtime.list(installation);
    if (held.isErr()) throw new Error(held.error.message);
    if (held.value.length === 0) {
      console.log(`No sandboxes of installation ${installation} on ${where}.`);
      return 0;
    }
    // A pooled container's label names the pool, also after a user claimed it: the store says whose it is.
    const ownerOf = async (box: { sandbox_id: string; user_id: string }) =>
      box.user_id === POOLED_SANDBOX_OWNER
        ? ((await storage.ports.sandboxes.ownerOf(box.sandbox_id)).unwrapOr(null) ?? box.user_id)
        : box.user_id;
    const describeOwner = (owner: string) =>
      owner === POOLED_SANDBOX_OWNER ? 'pooled (no user yet)' : `user ${owner}`;
    if (command === 'list') {
      console.log(`Sandboxes of installation ${installation}:`);
      for (const box of held.value) {
        const state = (await runtime.inspect(box.sandbox_id)).match(
          (o) => o.state,
          (e) => `unknown (${e.message})`,
        );
        console.log(
          `  ${box.sandbox_id}  ${state.padEnd(8)}  ${describeOwner(await ownerOf(box))}  ${box.image}  created ${box.created_at}`,
        );
      }
      return 0;
    }
    // Through the service, so records become DELETED and their conversations STOPPED, as a delete from the API does.
    const service = createAgentConversationService({
      ...storage.ports,
      ...(explicit ? { installation: { identity: () => okAsync(installation) } } : {}),
      sandboxSpecs: new StaticSandboxSpecCatalog(config.sandboxes.specs),
      runtime,
      // Nothing here runs an agent: the service only deletes sandboxes.
      llm: new ScriptedLlm(),
      agent: createAgent(),
    });
    let removed = 0;
    for (const box of held.value) {
      const owner = await ownerOf(box);
      const deleted = await service.sandboxes.delete(owner, box.sandbox_id);
      // A container without a record here (another store, or adopted never) goes straight from the engine.
      const outcome = deleted.isOk()
        ? deleted
        : deleted.error.type === 'SandboxNotFound'
          ? await runtime.delete(box.sandbox_id)
          : deleted;
      if (outcome.isErr())
        console.error(
          `  could not remove ${box.sandbox_id}: ${'message' in outcome.error ? outcome.error.message : outcome.error.type}`,
        );
      else {
        removed++;
        console.log(`  removed ${box.sandbox_id} (${describeOwner(owner)})`);
      }
    }
    await service.close();
    console.log(`Removed ${removed} of ${held.value.length} sandboxes of installation ${installation}.`);
    return removed === held.value.length ? 0 : 1;
  } finally {
    await storage.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  },
);
