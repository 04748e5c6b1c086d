import { defineConfig } from 'vitest/config';

// Tests import package sources through the "@acs/source" export condition,
// so no build is needed before `npm test`.
export default defineConfig({
  resolve: { conditions: ['@acs/source'] },
  ssr: { resolve: { conditions: ['@acs/source'] } },
  test: {
    projects: ['packages/*', 'examples/*', 'bench'],
  },
});
