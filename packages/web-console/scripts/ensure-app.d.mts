/** Builds the console's app when app-dist/ is missing or older than its sources; true when it built. */
export function ensureConsoleApp(): Promise<boolean>;
