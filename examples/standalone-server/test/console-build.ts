/** Vitest global setup: the example server serves the web console's built app; build it if it is missing or stale. */
import { ensureConsoleApp } from '../../../packages/web-console/scripts/ensure-app.mjs';

export default async function setup(): Promise<void> {
  await ensureConsoleApp();
}
