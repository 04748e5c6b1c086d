import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The console's browser app: Preact with JSX compiled by Vite's own transformer (no Babel), two
 * pages (the app and the API reference), relative asset URLs (the server puts a <base> with the
 * mount path into each page), everything bundled, nothing loaded from elsewhere.
 */
export default defineConfig({
  root: here('.'),
  base: './',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  resolve: { alias: { react: 'preact/compat', 'react-dom': 'preact/compat' } },
  build: {
    outDir: here('../app-dist'),
    emptyOutDir: true,
    sourcemap: true,
    // Swagger UI alone is ~1.4 MB; it loads only on the API reference page.
    chunkSizeWarningLimit: 2_000,
    rollupOptions: { input: { app: here('index.html'), apiReference: here('api-reference/index.html') } },
  },
});
