/**
 * @acs/testing: test doubles shared across the packages. Today: one scripted OpenAI-compatible
 * chat-completions server (real HTTP on 127.0.0.1) for the model adapter's tests, the example
 * server's end-to-end tests and the agent benchmark, and a closed loopback port.
 */
export * from './fake-openai.js';
export * from './loopback.js';
