import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts', ports: 'src/ports.ts', schemas: 'src/schemas.ts', testing: 'src/testing/index.ts' },
  format: ['esm'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node22',
  tsconfig: 'tsconfig.build.json',
});
