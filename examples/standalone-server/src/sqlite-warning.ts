/**
 * Node 22 prints "ExperimentalWarning: SQLite is an experimental feature and might change at any
 * time" when node:sqlite is first loaded. node:sqlite is the example server's default storage, so
 * that one line would greet every start; this drops that one warning and passes every other on.
 */
const SQLITE_WARNING = 'SQLite is an experimental feature';

let installed = false;

export function dropSqliteExperimentalWarning(): void {
  if (installed) return;
  installed = true;
  const emit = process.emitWarning.bind(process) as (warning: string | Error, ...rest: unknown[]) => void;
  const filtered = (warning: string | Error, ...rest: unknown[]): void => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = typeof warning === 'string' ? type : warning.name;
    const message = typeof warning === 'string' ? warning : warning.message;
    if (name === 'ExperimentalWarning' && message.startsWith(SQLITE_WARNING)) return;
    emit(warning, ...rest);
  };
  process.emitWarning = filtered;
}
