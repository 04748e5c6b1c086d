import { defineProject } from 'vitest/config';

export default defineProject({
  resolve: { conditions: ['@acs/source'] },
  ssr: { resolve: { conditions: ['@acs/source'] } },
  test: { name: 'core', include: ['src/**/*.test.ts', 'test/**/*.test.ts'] },
});
