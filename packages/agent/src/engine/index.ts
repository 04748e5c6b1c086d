export { createAgentEngine } from './engine.js';
export { metricsOf } from './log-reading.js';
export type { AgentEngineOptions } from './options.js';
