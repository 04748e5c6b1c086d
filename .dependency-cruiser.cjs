/**
 * The shape `npm run lint` holds the sources to (dependency-cruiser):
 * - no cycle between modules, nor between folders (a folder imports another, which imports it back);
 * - the domain (`@acs/core`) and the agent (`@acs/agent`) do no I/O of their own: they import
 *   zod, neverthrow, ts-pattern and `node:crypto` only, and reach the world through their ports;
 * - packages point inward: core imports no other package, the agent imports only core, an
 *   adapter imports no other adapter (the examples compose them);
 * - the git provider adapter speaks to GitHub and GitLab with `fetch` only: no SDK, no other
 *   HTTP client (core, neverthrow, zod and Node's built-ins).
 * Tests are not checked here (they may compose anything).
 */
const PURE = ['^packages/core/src/', '^packages/agent/src/'];
const ALLOWED_IN_PURE = '^(node_modules/(zod|neverthrow|ts-pattern)/|(node:)?crypto$)';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules that import each other, directly or around a loop.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-circular-folders',
      comment: 'Folders that import each other: move what both need into one of them, or a third.',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'pure-no-io',
      comment: 'Core and the agent do no I/O of their own; they reach the world through ports.',
      severity: 'error',
      from: { path: PURE, pathNot: '/testing/' },
      to: {
        dependencyTypes: ['core', 'npm', 'npm-dev', 'npm-peer', 'npm-optional', 'npm-no-pkg', 'npm-unknown'],
        pathNot: ALLOWED_IN_PURE,
      },
    },
    {
      name: 'core-imports-no-package',
      comment: 'Dependencies point inward: the domain knows no other package.',
      severity: 'error',
      from: { path: '^packages/core/src/' },
      to: { path: '^packages/(?!core/)' },
    },
    {
      name: 'agent-imports-only-core',
      severity: 'error',
      from: { path: '^packages/agent/src/' },
      to: { path: '^packages/(?!core/|agent/)' },
    },
    {
      name: 'adapters-import-no-adapter',
      comment: 'An adapter implements ports of core; the host composes adapters.',
      severity: 'error',
      from: { path: '^packages/adapter-([^/]+)/src/' },
      to: { path: '^packages/adapter-', pathNot: '^packages/adapter-$1/' },
    },
    {
      name: 'git-providers-fetch-only',
      comment:
        'GitHub and GitLab are reached with fetch: no SDK or HTTP client package (their requests must stay the few this adapter makes).',
      severity: 'error',
      from: { path: '^packages/adapter-git-providers/src/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-peer', 'npm-optional', 'npm-no-pkg', 'npm-unknown'],
        pathNot: '^(node_modules/(zod|neverthrow)/|packages/core/)',
      },
    },
    { name: 'no-unresolvable', severity: 'error', from: {}, to: { couldNotResolve: true } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(/test/|\\.test\\.ts$)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      conditionNames: ['@acs/source', 'import', 'types', 'default'],
      exportsFields: ['exports'],
    },
  },
};
