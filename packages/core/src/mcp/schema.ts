import { z } from 'zod';
import { splitShellWords } from '../shell-lexer.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SERVER_NAME = /^[A-Za-z0-9_-]+$/;
/** `scheme://` followed by an authority. WHATWG URL parsing invents a host for `http:///x` and `http:x`, so check the text too. */
const HAS_AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]/;

const serverUrl = z
  .string()
  .trim()
  .min(1, 'url is required')
  .max(2048)
  .superRefine((value, ctx) => {
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute URL (http, https, ws or wss)' });
      return;
    }
    if (!['http:', 'https:', 'ws:', 'wss:'].includes(parsed.protocol)) {
      ctx.addIssue({
        code: 'custom',
        message: `scheme ${parsed.protocol.slice(0, -1)} is not allowed; use http, https, ws or wss`,
      });
    } else if (!parsed.hostname || !HAS_AUTHORITY.test(value)) {
      ctx.addIssue({ code: 'custom', message: 'must name a host' });
    }
  });

const apiKey = z.string().max(8192).nullable().optional().meta({ format: 'password' });

/** An MCP server reached over Server-Sent Events. A bare URL string is accepted as `{url}`. */
export const McpSseServerSchema = z
  .union([serverUrl, z.strictObject({ url: serverUrl, api_key: apiKey })])
  .transform((v) => (typeof v === 'string' ? { url: v, api_key: null } : { url: v.url, api_key: v.api_key ?? null }));

/** An MCP server reached over streamable HTTP. A bare URL string is accepted as `{url}`. */
export const McpShttpServerSchema = z
  .union([
    serverUrl,
    z.strictObject({
      url: serverUrl,
      api_key: apiKey,
      timeout: z.int().min(1).max(3600).nullable().optional().meta({ description: 'Seconds; default 60.' }),
    }),
  ])
  .transform((v) =>
    typeof v === 'string'
      ? { url: v, api_key: null, timeout: 60 }
      : { url: v.url, api_key: v.api_key ?? null, timeout: v.timeout ?? 60 },
  );

const stdioArgs = z.union([z.array(z.string().max(4096)).max(256), z.string().max(16384)]).transform((v, ctx) => {
  if (Array.isArray(v)) return v;
  const words = splitShellWords(v);
  if (words === null) {
    ctx.addIssue({ code: 'custom', message: 'has an unterminated quote' });
    return z.NEVER;
  }
  return words;
});

const envValue = z.union([z.string().max(16384), z.number(), z.boolean()]).transform((v) => String(v));

const stdioEnv = z.union([z.record(z.string(), envValue), z.string().max(65536)]).transform((v, ctx) => {
  const entries: [string, string][] = [];
  if (typeof v === 'string') {
    for (const pair of v
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const eq = pair.indexOf('=');
      if (eq <= 0) {
        ctx.addIssue({ code: 'custom', message: `"${pair}" is not KEY=VALUE` });
        return z.NEVER;
      }
      entries.push([pair.slice(0, eq).trim(), pair.slice(eq + 1)]);
    }
  } else {
    entries.push(...Object.entries(v));
  }
  for (const [key] of entries) {
    if (!ENV_NAME.test(key)) {
      ctx.addIssue({ code: 'custom', message: `"${key}" is not a valid environment variable name` });
      return z.NEVER;
    }
  }
  return Object.fromEntries(entries);
});

/** An MCP server started inside the sandbox and spoken to over stdio. */
export const McpStdioServerSchema = z
  .strictObject({
    name: z
      .string()
      .trim()
      .min(1, 'name is required')
      .max(64)
      .regex(SERVER_NAME, 'may only contain letters, digits, _ and -'),
    command: z
      .string()
      .trim()
      .min(1, 'command is required')
      .max(1024)
      // eslint-disable-next-line no-control-regex -- U+0000 is left out as no store can hold it (findUnstorableText).
      .regex(/^[^\s\u0000]+$/, 'must be a single program without spaces; put its arguments in args'),
    args: stdioArgs.optional(),
    env: stdioEnv.optional(),
  })
  .transform((v) => ({ name: v.name, command: v.command, args: v.args ?? [], env: v.env ?? {} }));

/** MCP servers configured for a user or a conversation. Unknown keys are rejected. */
export const McpConfigSchema = z
  .strictObject({
    sse_servers: z.array(McpSseServerSchema).max(64).optional(),
    stdio_servers: z.array(McpStdioServerSchema).max(64).optional(),
    shttp_servers: z.array(McpShttpServerSchema).max(64).optional(),
  })
  .transform((v) => ({
    sse_servers: v.sse_servers ?? [],
    stdio_servers: v.stdio_servers ?? [],
    shttp_servers: v.shttp_servers ?? [],
  }))
  .superRefine((v, ctx) => {
    const seen = new Set<string>();
    v.stdio_servers.forEach((server, index) => {
      if (seen.has(server.name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['stdio_servers', index, 'name'],
          message: `duplicate server name "${server.name}"`,
        });
      }
      seen.add(server.name);
    });
  });

export type McpConfig = z.output<typeof McpConfigSchema>;
export type McpConfigInput = z.input<typeof McpConfigSchema>;

/** What a normalised MCP config looks like in responses. */
export const McpConfigViewSchema = z.object({
  sse_servers: z.array(z.object({ url: z.string(), api_key: z.string().nullable() })),
  stdio_servers: z.array(
    z.object({
      name: z.string(),
      command: z.string(),
      args: z.array(z.string()),
      env: z.record(z.string(), z.string()),
    }),
  ),
  shttp_servers: z.array(z.object({ url: z.string(), api_key: z.string().nullable(), timeout: z.int() })),
});

export const emptyMcpConfig = (): McpConfig => ({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
