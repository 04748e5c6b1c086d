/**
 * The sandbox runtimes the example server can run on, each by its name for ACS_SANDBOXES (the
 * first is the default). A runtime is added by writing its module (as runtimes/docker.ts: its
 * name, its own variables, how it opens lazily, what `npm run sandboxes` lists and prunes
 * over) and naming it here, and nowhere else; its variables then belong in the table of docs/configuration.md.
 */
import { dockerRuntime } from './runtimes/docker.js';
import { fakeRuntime } from './runtimes/fake.js';
import { kubernetesRuntime } from './runtimes/kubernetes.js';
import type { SandboxRuntimeEntry } from './runtimes/runtime-module.js';

export const SANDBOX_RUNTIMES: readonly [SandboxRuntimeEntry, ...SandboxRuntimeEntry[]] = [
  dockerRuntime,
  fakeRuntime,
  kubernetesRuntime,
];
