/**
 * `npm run storage -- move-to-sqlite`
 *
 * Moves the records of a data directory an earlier version made on PGlite (its default then) to
 * SQLite, the default now: every table is copied, the counts checked, and the PGlite directory
 * renamed aside. Run it with the same environment as the server (DATA_DIR, ACS_SECRET_KEY if set),
 * while the server is stopped (the data directory's lock refuses otherwise).
 */
import { loadConfig } from './config.js';
import { moveToSqlite } from './move-to-sqlite.js';

const USAGE = `Usage: npm run storage -- move-to-sqlite
  move-to-sqlite  copies every record of the PGlite database in DATA_DIR (settings with their
                  sealed secrets, API keys, device sign-ins, conversations, start tasks,
                  sandboxes, events, the installation id) to a new SQLite database there
                  (acs.sqlite), checks the counts, and renames the PGlite directory aside
                  (pglite.moved-<time>; delete it once the server runs well on SQLite)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'move-to-sqlite' || rest.length > 0) {
    console.error(USAGE);
    return command === undefined || command === '--help' || command === '-h' ? 0 : 2;
  }
  const config = loadConfig();
  console.log(`Moving the PGlite database of ${config.dataDir} to SQLite…`);
  const moved = await moveToSqlite(config, (line) => console.log(`  ${line}`));
  console.log(
    [
      `Moved: ${Object.entries(moved.counts)
        .map(([table, n]) => `${table} ${n}`)
        .join(', ')} (the same counts as in PGlite).`,
      `  SQLite database: ${moved.sqliteFile}`,
      `  PGlite database renamed to ${moved.pgliteMovedTo}; delete it once the server runs well on SQLite.`,
      '  Start the server as before (leave ACS_STORAGE unset, or set it to sqlite).',
    ].join('\n'),
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`Cannot move: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  },
);
