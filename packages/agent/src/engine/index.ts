export { createAgentEngine } from './engine.js';
export { DEFAULT_MAX_ITERATIONS } from './options.js';
export { metricsOf, pendingConfirmation } from './log-reading.js';
export type { AgentEngine, AgentEngineDeps, AgentEngineOptions } from './options.js';
