import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import {
  createAgentConversationService,
  type AgentConversationService,
  type AgentConversationServiceOptions,
  type AgentConversationServicePorts,
} from '@acs/core';
import { manualClock, systemClock, type Clock, type GitProviders, type Logger } from '@acs/core/ports';
import { createMemoryPorts, type MemoryPortsOptions } from '@acs/testing';
import { createAcsRouter, type AcsRouterOptions } from '@acs/adapter-express';
import { createAgent } from '@acs/agent';

/** Alice's and Bob's API keys (the default authenticator needs at least 16 characters). */
export const KEY_A = 'alice-key-0123456789abcdef';
export const KEY_B = 'bob-key-0123456789abcdef-b';
export const WRONG_KEY = 'not-a-key-0123456789abcdef';

type Ports = ReturnType<typeof createMemoryPorts>;

/** Every log line, serialised as JSON, so tests can search them for secret values. */
interface CapturingLogger extends Logger {
  readonly lines: string[];
}

function capturingLogger(): CapturingLogger {
  const lines: string[] = [];
  const record = (level: string) => (obj: Record<string, unknown>, msg: string) => {
    lines.push(JSON.stringify({ level, msg, ...obj }));
  };
  return { lines, debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
}

interface CallOptions {
  /** The X-Session-API-Key; Alice's key unless given; null sends no key. */
  key?: string | null;
  /** Sent as JSON with Content-Type: application/json. */
  body?: unknown;
  /** Sent as is (set the content type in headers yourself). */
  rawBody?: string | Uint8Array;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  /** Parsed JSON when the response is JSON, else the text. */
  body: unknown;
  text: string;
  headers: Headers;
}

export interface HarnessOptions {
  service?: AgentConversationServiceOptions;
  ports?: MemoryPortsOptions;
  /** 'system' (default) or 'manual' (strictly increasing, deterministic timestamps; sleeps return at once). */
  clock?: 'system' | 'manual';
  /** Stores that replace the memory ones (e.g. PostgreSQL storage on PGlite). */
  storage?: Partial<AgentConversationServicePorts>;
  /** Router options besides auth and logger (e.g. a short sseHeartbeatMs). */
  router?: Omit<AcsRouterOptions, 'apiKeys' | 'authenticate' | 'logger'>;
  /** Attach the realtime channels (socket.io, the agent-server WebSocket) to the server. */
  realtime?: boolean;
  /** The git providers port (e.g. `createGitProviders` pointed at a fake GitHub); default none. */
  gitProviders?: GitProviders;
  /** More users besides Alice and Bob: API key → user id. */
  moreKeys?: Record<string, string>;
}

export interface Harness {
  readonly baseUrl: string;
  readonly service: AgentConversationService;
  readonly ports: Ports;
  readonly clock: Clock;
  readonly logger: CapturingLogger;
  /** The raw text of every response body received through `call`, for secret scans. */
  readonly responses: string[];
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  /** Waits until the service has no background work (sandbox start-up, start pipelines). */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const logger = capturingLogger();
  const ports = createMemoryPorts(options.ports);
  const clock = options.clock === 'manual' ? manualClock() : systemClock;
  const service = createAgentConversationService(
    {
      agent: createAgent(),
      ...ports,
      ...options.storage,
      ...(options.gitProviders ? { gitProviders: options.gitProviders } : {}),
      clock,
      logger,
    },
    { pollIntervalMs: 1, ...options.service },
  );
  const app = express();
  const router = createAcsRouter(service, {
    ...options.router,
    apiKeys: { ...options.moreKeys, [KEY_A]: 'alice', [KEY_B]: 'bob' },
    logger,
  });
  app.use(router);
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', (error?: Error) => (error ? reject(error) : resolve(s)));
  });
  const channels = options.realtime ? router.attach(server) : null;
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;
  const responses: string[] = [];

  const call = async (method: string, path: string, opts: CallOptions = {}): Promise<CallResult> => {
    const headers: Record<string, string> = {};
    const key = opts.key === undefined ? KEY_A : opts.key;
    if (key !== null) headers['X-Session-API-Key'] = key;
    let body: string | Uint8Array | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] = 'application/json';
    }
    Object.assign(headers, opts.headers ?? {});
    const response = await fetch(baseUrl + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await response.text();
    responses.push(text);
    let parsed: unknown = text;
    if ((response.headers.get('content-type') ?? '').includes('json') && text !== '') parsed = JSON.parse(text);
    return { status: response.status, body: parsed, text, headers: response.headers };
  };

  return {
    baseUrl,
    service,
    ports,
    clock,
    logger,
    responses,
    call,
    idle: () => service.idle(),
    close: async () => {
      await channels?.close();
      await service.close();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

/** Settings that allow conversations to start. */
export const LLM_SETTINGS = {
  llm_model: 'anthropic/claude-sonnet-4',
  llm_api_key: 'sk-test-llm-key-000000000000',
} as const;

/** Stores settings for the user of `key` and fails the test unless they are stored. */
export async function storeSettings(
  h: Harness,
  settings: Record<string, unknown> = LLM_SETTINGS,
  key: string = KEY_A,
): Promise<void> {
  const r = await h.call('POST', '/api/settings', { key, body: settings });
  if (r.status !== 200) throw new Error(`storing settings failed: ${r.status} ${r.text}`);
}

export const HEX32 = /^[0-9a-f]{32}$/;

/** A JSON object view of a response body (throws when it is not an object). */
export function obj(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`expected a JSON object, got ${JSON.stringify(value)}`);
  return value as Record<string, unknown>;
}

export function arr(value: unknown): unknown[] {
  if (!Array.isArray(value)) throw new Error(`expected a JSON array, got ${JSON.stringify(value)}`);
  return value as unknown[];
}

/** The `items` of a V1 page. */
export function items(value: unknown): Record<string, unknown>[] {
  return arr(obj(value).items).map(obj);
}

/** Asserts the common error body and returns its code. */
export function errorCode(value: unknown): string {
  const body = obj(value);
  if (typeof body.code !== 'string' || typeof body.message !== 'string')
    throw new Error(`not an error body: ${JSON.stringify(value)}`);
  return body.code;
}

/** Creates a V0 conversation for the user of `key` and returns its id. */
export async function createConversation(
  h: Harness,
  body: Record<string, unknown> = {},
  key: string = KEY_A,
): Promise<string> {
  const r = await h.call('POST', '/api/conversations', { key, body });
  if (r.status !== 200) throw new Error(`create conversation failed: ${r.status} ${r.text}`);
  return obj(r.body).conversation_id as string;
}

/** Starts a V1 app conversation and returns its start task. */
export async function startAppConversation(
  h: Harness,
  body: Record<string, unknown> = {},
  key: string = KEY_A,
): Promise<Record<string, unknown>> {
  const r = await h.call('POST', '/api/v1/app-conversations', { key, body });
  if (r.status !== 200) throw new Error(`start app conversation failed: ${r.status} ${r.text}`);
  return obj(r.body);
}

/** Starts a sandbox and returns its record. */
export async function startSandbox(
  h: Harness,
  key: string = KEY_A,
  path = '/api/v1/sandboxes',
): Promise<Record<string, unknown>> {
  const r = await h.call('POST', path, { key });
  if (r.status !== 200) throw new Error(`start sandbox failed: ${r.status} ${r.text}`);
  return obj(r.body);
}

/** The parts of an OpenAPI document the tests read. */
export interface OpenApiDoc {
  openapi: string;
  security?: Record<string, string[]>[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  components?: { securitySchemes?: Record<string, unknown>; schemas?: Record<string, unknown> };
}

export interface OpenApiOperation {
  operationId?: string;
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; schema?: unknown }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, { content?: Record<string, { schema: JsonSchema }> }>;
}

export interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  [key: string]: unknown;
}

export const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/** Every (path, method) of the document. */
export function operationsOf(doc: OpenApiDoc): { path: string; method: string; operation: OpenApiOperation }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => (HTTP_METHODS as readonly string[]).includes(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );
}

/** Whether an operation needs the API key (the document's default security unless it overrides it). */
export function isAuthenticated(doc: OpenApiDoc, operation: OpenApiOperation): boolean {
  const security = operation.security ?? doc.security ?? [];
  return security.length > 0;
}

/** Whether an operation takes a user's API key (SessionApiKey), not only a conversation's own key (ConversationKey). */
export function takesApiKey(doc: OpenApiDoc, operation: OpenApiOperation): boolean {
  return (operation.security ?? doc.security ?? []).some((requirement) => 'SessionApiKey' in requirement);
}

/** A concrete URL path for a template: every `{param}` replaced by `id`. */
export function concretePath(template: string, id = 'someid0123456789'): string {
  return template.replace(/\{[^}]+\}/g, encodeURIComponent(id));
}

export async function fetchOpenApi(h: Harness): Promise<OpenApiDoc> {
  const r = await h.call('GET', '/api/openapi.json');
  if (r.status !== 200) throw new Error(`openapi.json: ${r.status} ${r.text}`);
  return r.body as OpenApiDoc;
}
