import { defineProject } from 'vitest/config';

export default defineProject({
  resolve: { conditions: ['@acs/source'] },
  ssr: { resolve: { conditions: ['@acs/source'] } },
  test: {
    name: 'adapter-mcp',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
