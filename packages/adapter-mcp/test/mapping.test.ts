import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { classify, describeTarget, flattenCallResult, redact, toToolInfo } from '../src/index.js';
import { base64Bytes } from '../src/mapping.js';

const context = {
  server: 'MCP server at http://h/mcp',
  apiKey: 'secret-key-42',
  phase: 'connect' as const,
  lostReason: null,
};

describe('toToolInfo', () => {
  it('keeps the schema as sent and only the hints given', () => {
    const schema = {
      type: 'object' as const,
      properties: { q: { type: 'string', pattern: '^a' } },
      additionalProperties: false,
    };
    expect(toToolInfo({ name: 't', inputSchema: schema })).toEqual({
      name: 't',
      description: null,
      input_schema: schema,
      annotations: {},
    });
    expect(
      toToolInfo({
        name: 't',
        description: 'd',
        inputSchema: { type: 'object' },
        annotations: { destructiveHint: false, idempotentHint: true, title: 'T' },
      }).annotations,
    ).toEqual({
      destructive: false,
    });
  });
});

describe('flattenCallResult', () => {
  it('joins text and describes the rest', () => {
    expect(
      flattenCallResult({
        content: [
          { type: 'text', text: 'a' },
          { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
          { type: 'resource', resource: { uri: 'mem://blob', blob: 'AAAA' } },
          { type: 'text', text: 'b' },
        ],
        isError: true,
      }),
    ).toEqual({ content: 'a\n[audio: audio/wav, 3 bytes]\n[resource: mem://blob]\nb', is_error: true });
  });

  it('appends structured content only when there is no text', () => {
    expect(flattenCallResult({ content: [{ type: 'text', text: 'x' }], structuredContent: { a: 1 } }).content).toBe(
      'x',
    );
    expect(
      flattenCallResult({
        content: [{ type: 'image', data: 'AAAA', mimeType: 'image/gif' }],
        structuredContent: { a: 1 },
      }).content,
    ).toBe('[image: image/gif, 3 bytes]\n{"a":1}');
    expect(flattenCallResult({ content: [] })).toEqual({ content: '', is_error: false });
  });

  it('counts base64 bytes', () => {
    for (const length of [0, 1, 2, 3, 4, 5, 100])
      expect(base64Bytes(Buffer.alloc(length).toString('base64'))).toBe(length);
  });
});

describe('redact and classify', () => {
  it('removes the key, bearer tokens and URL credentials', () => {
    expect(
      redact('key secret-key-42 in Authorization: Bearer other.token and http://u:p@host/x', 'secret-key-42'),
    ).toBe('key [REDACTED] in Authorization: Bearer [REDACTED] and http://[REDACTED]@host/x');
  });

  it('maps SDK errors to the port kinds', () => {
    expect(classify(new McpError(ErrorCode.RequestTimeout, 'Request timed out'), context).type).toBe('timeout');
    expect(classify(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'), context).type).toBe('closed');
    const notFound = classify(new McpError(ErrorCode.MethodNotFound, 'no'), context);
    expect(notFound.type).toBe('protocol');
    expect(notFound.message).toContain('-32601');
    const http = classify(
      new StreamableHTTPError(403, 'Error POSTing to endpoint: forbidden for secret-key-42'),
      context,
    );
    expect(http.type).toBe('unreachable');
    expect(http.message).toContain('HTTP 403');
    expect(http.message).not.toContain('secret-key-42');
    expect(classify(new StreamableHTTPError(404, 'Session not found'), { ...context, phase: 'call' }).type).toBe(
      'closed',
    );
    expect(classify(new StreamableHTTPError(500, 'boom'), { ...context, phase: 'call' }).type).toBe('protocol');
    const refused = new TypeError('fetch failed', {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
    });
    expect(classify(refused, context).type).toBe('unreachable');
    expect(classify(refused, context).message).toContain('connection refused');
    expect(classify(refused, { ...context, phase: 'call' }).type).toBe('closed');
    const dns = new TypeError('fetch failed', {
      cause: Object.assign(new Error('getaddrinfo ENOTFOUND nope.invalid'), { code: 'ENOTFOUND' }),
    });
    expect(classify(dns, context).message).toContain('DNS');
    const zod = Object.assign(new Error('invalid'), { name: 'ZodError' });
    expect(classify(zod, context).type).toBe('protocol');
  });

  it('names servers without query strings or credentials', () => {
    expect(describeTarget({ transport: 'shttp', url: 'https://u:p@host/mcp?token=abc', api_key: null })).toBe(
      'MCP server at https://host/mcp',
    );
    expect(
      describeTarget({
        transport: 'stdio',
        name: 'git',
        start: () => {
          throw new Error('unused');
        },
      }),
    ).toBe("stdio MCP server 'git'");
  });
});
