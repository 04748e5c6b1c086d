import { defineProject } from 'vitest/config';

// The benchmarks' own helpers (the benchmarks themselves are run by `npm run bench:*`, not tested).
export default defineProject({
  test: {
    name: 'bench',
    include: ['*.test.ts'],
  },
});
