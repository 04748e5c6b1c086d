import type { SandboxRuntime } from '@acs/core/ports';
import type { Logger as PinoLogger } from 'pino';
import type { z } from 'zod';

/** What every runtime is given from the common sandbox settings (ACS_SANDBOX_SPECS, ACS_SANDBOX_MEMORY_MB…). */
export interface CommonSandboxSettings {
  /** The images of the specs, the default spec's first. */
  images: readonly string[];
  memoryMb: number;
  cpus: number;
  pids: number;
  network: 'bridge' | 'none' | 'host';
}

/** A runtime opened for the server. */
interface OpenedSandboxRuntime {
  runtime: SandboxRuntime;
  /** What it is, for the start log (e.g. the engine's version). */
  description: string;
  /** Why there are no sandboxes (no engine answers): the server still starts and sandbox routes answer 503 with it. */
  unavailable: string | null;
  /** Background work once the server is composed (Docker: building a missing sandbox image), its progress in the log. */
  prepare?(logger: PinoLogger): void;
}

/** A runtime opened for `npm run sandboxes`: it lists, inspects and deletes what the server's runtime would. */
interface SandboxRuntimeForCli {
  runtime: SandboxRuntime;
  /** Where its sandboxes are, in words ("this Docker engine"). */
  where: string;
}

/**
 * A sandbox runtime the example server can run on, named in src/sandbox-runtimes.ts. Its module
 * imports its package only inside `open` and `openForCli` (`await import(…)`), so a server that
 * names another runtime never loads it (the Docker client alone holds about 28 MiB).
 */
export interface SandboxRuntimeModule<Shape extends z.ZodRawShape, Options> {
  /** Its value of ACS_SANDBOXES. */
  readonly name: string;
  /** The environment variables it reads besides the common ones (each a row of the configuration table, docs/configuration.md). */
  readonly env: z.ZodObject<Shape>;
  /** Its options, from its variables as `env` parsed them; throws an Error saying what to fix. */
  options(variables: z.output<z.ZodObject<Shape>>): Options;
  /** Opens it for the server. An engine that does not answer is `unavailable`, not an error: the server starts anyway. */
  open(options: Options, common: CommonSandboxSettings): Promise<OpenedSandboxRuntime>;
  /** Opens it for `npm run sandboxes` (list, prune): every place the server's sandboxes may be. */
  openForCli(options: Options): Promise<SandboxRuntimeForCli>;
}

/** A runtime with its options read: what the configuration holds for the one ACS_SANDBOXES names. */
export interface ConfiguredSandboxRuntime {
  readonly name: string;
  open(common: CommonSandboxSettings): Promise<OpenedSandboxRuntime>;
  openForCli(): Promise<SandboxRuntimeForCli>;
}

/** A runtime module as the registry holds it: its name, its variables, and how to configure it from the environment. */
export interface SandboxRuntimeEntry {
  readonly name: string;
  readonly env: z.ZodObject;
  configure(environment: Record<string, string | undefined>): ConfiguredSandboxRuntime;
}

export function defineSandboxRuntime<Shape extends z.ZodRawShape, Options>(
  module: SandboxRuntimeModule<Shape, Options>,
): SandboxRuntimeEntry {
  return {
    name: module.name,
    env: module.env,
    configure(environment) {
      const options = module.options(module.env.parse(environment));
      return {
        name: module.name,
        open: (common) => module.open(options, common),
        openForCli: () => module.openForCli(options),
      };
    },
  };
}
