import { defineProject } from 'vitest/config';

export default defineProject({
  resolve: { conditions: ['@acs/source'] },
  ssr: { resolve: { conditions: ['@acs/source'] } },
  test: {
    name: 'adapter-sqlite',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});
