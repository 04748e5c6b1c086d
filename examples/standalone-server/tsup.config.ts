import { defineConfig } from 'tsup';

/**
 * The example server as JavaScript, so `npm start` runs without a TypeScript loader (which holds
 * tens of MiB for as long as the process lives). Its own modules only: the @acs packages and the
 * other dependencies are imported from their built packages at run time.
 */
export default defineConfig({
  entry: { main: 'src/main.ts', 'sandboxes-cli': 'src/sandboxes-cli.ts', 'storage-cli': 'src/storage-cli.ts' },
  format: ['esm'],
  dts: false,
  sourcemap: true,
  clean: true,
  target: 'node22',
  tsconfig: 'tsconfig.build.json',
});
