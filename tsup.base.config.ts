import { defineConfig, type Options } from 'tsup';

/**
 * How every package is built: ESM with declarations and source maps for Node 22, from its
 * tsconfig.build.json. A package's tsup.config.ts names only its entries.
 */
export function packageBuild(entry: Options['entry'] = ['src/index.ts']) {
  return defineConfig({
    entry,
    // Keep `node:` on built-in imports: `node:sqlite` (adapter-sqlite) exists only under that name,
    // and without the prefix Node would look for a package called sqlite.
    removeNodeProtocol: false,
    format: ['esm'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node22',
    tsconfig: 'tsconfig.build.json',
  });
}
