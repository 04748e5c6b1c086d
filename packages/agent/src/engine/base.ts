import { Toolset, BUILTIN_TOOLS } from '../toolset.js';
import type { AgentEngineDeps } from './options.js';
import { RunnerRegistry } from './runner.js';

export const DEFAULT_MAX_ITERATIONS = 100;

/** What every part of the engine starts from: the host's ports, the options' defaults applied, the runners. */
export function createEngineBase(deps: AgentEngineDeps) {
  const { conversations, log, ownership, sandboxes, runtime, settings, llm, clock, logger, background } = deps;
  const builtinTools = deps.options?.tools ?? BUILTIN_TOOLS;
  const runners = new RunnerRegistry();
  return {
    deps,
    conversations,
    log,
    ownership,
    sandboxes,
    runtime,
    settings,
    llm,
    clock,
    logger,
    background,
    builtinTools,
    defaultToolset: new Toolset(builtinTools),
    defaultMaxIterations: deps.options?.defaultMaxIterations ?? DEFAULT_MAX_ITERATIONS,
    runners,
  };
}

export type EngineBase = ReturnType<typeof createEngineBase>;
