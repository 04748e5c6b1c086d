/** Runs a benchmark's cleanups, last registered first; resolves false if any failed (each failure is printed). */
export async function runCleanups(cleanups: (() => Promise<void>)[]): Promise<boolean> {
  let ok = true;
  for (const cleanup of [...cleanups].reverse()) {
    try {
      await cleanup();
    } catch (error) {
      ok = false;
      console.error('cleanup failed:', error);
    }
  }
  return ok;
}
