import { defineProject } from 'vitest/config';

export default defineProject({
  resolve: { conditions: ['@acs/source'] },
  ssr: { resolve: { conditions: ['@acs/source'] } },
  test: {
    name: 'standalone-server',
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/console-build.ts'],
    testTimeout: 600_000,
    hookTimeout: 180_000,
  },
});
