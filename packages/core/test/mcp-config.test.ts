import { describe, expect, it } from 'vitest';
import { splitShellWords } from '../src/index.js';
import { McpConfigSchema } from '../src/schemas.js';
import { issuePaths, parseOk } from './helpers.js';

const parse = (input: unknown) => parseOk(McpConfigSchema, input);
const rejected = (input: unknown) => issuePaths(McpConfigSchema, input);
const stdio = (server: Record<string, unknown>) => {
  const [first, ...rest] = parse({ stdio_servers: [{ name: 's', command: 'run', ...server }] }).stdio_servers;
  if (!first || rest.length > 0) throw new Error('expected exactly one stdio server');
  return first;
};

describe('McpConfigSchema: top level', () => {
  it('defaults every list to []', () => {
    expect(parse({})).toEqual({ sse_servers: [], stdio_servers: [], shttp_servers: [] });
    expect(parse({ sse_servers: ['https://a.example.com/sse'] })).toEqual({
      sse_servers: [{ url: 'https://a.example.com/sse', api_key: null }],
      stdio_servers: [],
      shttp_servers: [],
    });
  });

  it('rejects unknown top-level keys', () => {
    expect(rejected({ sse_servers: [], servers: [] })).toEqual(['']);
    const result = McpConfigSchema.safeParse({ extra: 1 });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.code).toBe('unrecognized_keys');
  });

  it('rejects null and non-objects', () => {
    expect(McpConfigSchema.safeParse(null).success).toBe(false);
    expect(McpConfigSchema.safeParse([]).success).toBe(false);
    expect(McpConfigSchema.safeParse({ sse_servers: 'https://a.example.com' }).success).toBe(false);
  });
});

describe('McpConfigSchema: sse and shttp servers', () => {
  it('normalises a bare sse URL to {url, api_key: null}', () => {
    expect(parse({ sse_servers: ['https://a.example.com/sse'] }).sse_servers).toEqual([
      { url: 'https://a.example.com/sse', api_key: null },
    ]);
  });

  it('normalises a bare shttp URL to {url, api_key: null, timeout: 60}', () => {
    expect(parse({ shttp_servers: ['https://a.example.com/mcp'] }).shttp_servers).toEqual([
      { url: 'https://a.example.com/mcp', api_key: null, timeout: 60 },
    ]);
  });

  it('fills absent api_key and timeout in objects', () => {
    expect(parse({ sse_servers: [{ url: 'https://a.example.com' }] }).sse_servers).toEqual([
      { url: 'https://a.example.com', api_key: null },
    ]);
    expect(
      parse({ shttp_servers: [{ url: 'https://a.example.com', api_key: 'k', timeout: null }] }).shttp_servers,
    ).toEqual([{ url: 'https://a.example.com', api_key: 'k', timeout: 60 }]);
  });

  it.each([
    'http://a.example.com/sse',
    'https://a.example.com:8443/sse',
    'ws://localhost:3001',
    'wss://a.example.com/ws',
  ])('accepts the URL %s for both kinds', (url) => {
    const parsed = parse({ sse_servers: [url], shttp_servers: [{ url }] });
    expect(parsed.sse_servers[0]?.url).toBe(url);
    expect(parsed.shttp_servers[0]?.url).toBe(url);
  });

  it.each([
    'ftp://a.example.com/x',
    'file:///etc/passwd',
    'a.example.com/sse',
    'localhost:3000',
    'javascript:alert(1)',
    'http://',
    'http:///sse',
    'http:a.example.com',
    '',
    '   ',
  ])('rejects the URL %j, bare or in an object, for both kinds', (url) => {
    expect(rejected({ sse_servers: [url] })).toEqual(['sse_servers.0']);
    expect(rejected({ sse_servers: [{ url }] })).toEqual(['sse_servers.0.url']);
    expect(rejected({ shttp_servers: [url] })).toEqual(['shttp_servers.0']);
    expect(rejected({ shttp_servers: [{ url }] })).toEqual(['shttp_servers.0.url']);
  });

  it('trims the URL', () => {
    const parsed = parse({
      sse_servers: ['  https://a.example.com/sse \n'],
      shttp_servers: [{ url: '\thttps://b.example.com/mcp ' }],
    });
    expect(parsed.sse_servers[0]?.url).toBe('https://a.example.com/sse');
    expect(parsed.shttp_servers[0]?.url).toBe('https://b.example.com/mcp');
  });

  it('rejects a missing url', () => {
    expect(McpConfigSchema.safeParse({ sse_servers: [{ api_key: 'k' }] }).success).toBe(false);
    expect(McpConfigSchema.safeParse({ shttp_servers: [{ timeout: 5 }] }).success).toBe(false);
  });

  it('rejects unknown keys in server objects', () => {
    expect(McpConfigSchema.safeParse({ sse_servers: [{ url: 'https://a.example.com', token: 'x' }] }).success).toBe(
      false,
    );
    expect(McpConfigSchema.safeParse({ sse_servers: [{ url: 'https://a.example.com', timeout: 5 }] }).success).toBe(
      false,
    );
    expect(McpConfigSchema.safeParse({ shttp_servers: [{ url: 'https://a.example.com', headers: {} }] }).success).toBe(
      false,
    );
  });

  it.each([1, 60, 3600])('accepts shttp timeout %d', (timeout) => {
    expect(parse({ shttp_servers: [{ url: 'https://a.example.com', timeout }] }).shttp_servers[0]?.timeout).toBe(
      timeout,
    );
  });

  it.each([0, -5, 3601, 1.5, '60'])('rejects shttp timeout %j', (timeout) => {
    expect(McpConfigSchema.safeParse({ shttp_servers: [{ url: 'https://a.example.com', timeout }] }).success).toBe(
      false,
    );
  });
});

describe('McpConfigSchema: stdio servers', () => {
  it('fills args and env defaults', () => {
    expect(stdio({})).toEqual({ name: 's', command: 'run', args: [], env: {} });
  });

  it('trims the name and command', () => {
    expect(stdio({ name: '  my-server_1 ', command: ' npx\t' })).toEqual({
      name: 'my-server_1',
      command: 'npx',
      args: [],
      env: {},
    });
  });

  it.each(['my server', 'a.b', 'srv/1', 'émoji', '', '   '])('rejects the name %j', (name) => {
    expect(rejected({ stdio_servers: [{ name, command: 'x' }] })).toEqual(['stdio_servers.0.name']);
  });

  it.each(['npx -y server', 'a\tb', '', '  '])('rejects the command %j', (command) => {
    expect(rejected({ stdio_servers: [{ name: 'n', command }] })).toEqual(['stdio_servers.0.command']);
  });

  it('requires name and command', () => {
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ command: 'x' }] }).success).toBe(false);
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ name: 'x' }] }).success).toBe(false);
  });

  it('rejects unknown keys in a stdio server', () => {
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ name: 'n', command: 'c', cwd: '/tmp' }] }).success).toBe(
      false,
    );
  });

  it('keeps args given as an array verbatim', () => {
    expect(stdio({ args: ['-y', 'a b', '"q"'] }).args).toEqual(['-y', 'a b', '"q"']);
  });

  it('splits args given as a string shell-style', () => {
    expect(stdio({ args: `-y  @scope/server --dir 'my dir' "say \\"hi\\"" a\\ b` }).args).toEqual([
      '-y',
      '@scope/server',
      '--dir',
      'my dir',
      'say "hi"',
      'a b',
    ]);
  });

  it.each(['--name "unterminated', "it's"])('rejects args %j with an unterminated quote', (args) => {
    expect(rejected({ stdio_servers: [{ name: 'n', command: 'c', args }] })).toEqual(['stdio_servers.0.args']);
  });

  it('rejects args that are neither an array of strings nor a string', () => {
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ name: 'n', command: 'c', args: [1, 2] }] }).success).toBe(
      false,
    );
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ name: 'n', command: 'c', args: { a: 1 } }] }).success).toBe(
      false,
    );
  });

  it('turns number and boolean env values into strings', () => {
    expect(stdio({ env: { PORT: 8080, DEBUG: true, OFF: false, NAME: 'x', EMPTY: '' } }).env).toEqual({
      PORT: '8080',
      DEBUG: 'true',
      OFF: 'false',
      NAME: 'x',
      EMPTY: '',
    });
  });

  it('parses env given as a "K=V,K2=V2" string', () => {
    expect(stdio({ env: 'API_URL=https://x.example.com/?a=b, _DEBUG=1 ,EMPTY=' }).env).toEqual({
      API_URL: 'https://x.example.com/?a=b',
      _DEBUG: '1',
      EMPTY: '',
    });
    expect(stdio({ env: '' }).env).toEqual({});
  });

  it.each([
    { 'BAD-NAME': 'x' },
    { '1ABC': 'x' },
    { 'A B': 'x' },
    { '': 'x' },
    'GOOD=1,BAD-NAME=2',
    '1ABC=x',
    'NOVALUE',
    '=value',
  ])('rejects the env %j', (env) => {
    expect(rejected({ stdio_servers: [{ name: 'n', command: 'c', env }] })).toEqual(['stdio_servers.0.env']);
  });

  it('rejects env values that are objects or null', () => {
    expect(
      McpConfigSchema.safeParse({ stdio_servers: [{ name: 'n', command: 'c', env: { A: { b: 1 } } }] }).success,
    ).toBe(false);
    expect(McpConfigSchema.safeParse({ stdio_servers: [{ name: 'n', command: 'c', env: { A: null } }] }).success).toBe(
      false,
    );
  });

  it('rejects duplicate stdio names, also after trimming, and names the duplicate', () => {
    expect(
      rejected({
        stdio_servers: [
          { name: 'a', command: 'x' },
          { name: 'b', command: 'x' },
          { name: ' a ', command: 'y' },
        ],
      }),
    ).toEqual(['stdio_servers.2.name']);
  });

  it('accepts distinct stdio names that differ only in case', () => {
    expect(
      parse({
        stdio_servers: [
          { name: 'a', command: 'x' },
          { name: 'A', command: 'x' },
        ],
      }).stdio_servers.map((s) => s.name),
    ).toEqual(['a', 'A']);
  });
});

describe('splitShellWords', () => {
  it.each([
    ['', []],
    ['   \t\n ', []],
    ['a', ['a']],
    ['  a   b\tc\nd  ', ['a', 'b', 'c', 'd']],
    ["'a b' c", ['a b', 'c']],
    ['"a b" c', ['a b', 'c']],
    ["''", ['']],
    ['"" x', ['', 'x']],
    ['a\'b c\'"d"e', ['ab cde']],
    ["'a\\\"b'", ['a\\"b']],
    ['"a\\"b"', ['a"b']],
    ['"a\\\\b"', ['a\\b']],
    ['"a\\nb"', ['a\\nb']],
    ['a\\ b', ['a b']],
    ['\\"x\\"', ['"x"']],
    ['"it\'s"', ["it's"]],
    ['--opt=value "--x=1 2"', ['--opt=value', '--x=1 2']],
  ])('splits %j into %j', (input, words) => {
    expect(splitShellWords(input)).toEqual(words);
  });

  it.each(['"abc', "'abc", 'a "b c', "a 'b c", '"a\\"'])('returns null for the unterminated quote in %j', (input) => {
    expect(splitShellWords(input)).toBeNull();
  });
});
