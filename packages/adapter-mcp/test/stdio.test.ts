import { fileURLToPath } from 'node:url';
import type { McpConnection, McpServerTarget } from '@acs/core/ports';
import { errAsync, okAsync, ResultAsync } from 'neverthrow';
import { afterEach, describe, expect, it } from 'vitest';
import { createMcpConnector, SandboxProcessTransport } from '../src/index.js';
import { isAlive, spawnHostProcess, type HostProcess } from './child-process.js';

const NODE_SERVER = fileURLToPath(new URL('./fixtures/stdio_server.mjs', import.meta.url));
const PYTHON_SERVER = fileURLToPath(new URL('./fixtures/stdio_server.py', import.meta.url));
const FIXTURES = fileURLToPath(new URL('./fixtures', import.meta.url));

const logs: { message: string; fields: Record<string, unknown> }[] = [];
const connector = createMcpConnector({ logger: (message, fields) => logs.push({ message, fields }) });
const cleanups: (() => Promise<void>)[] = [];
const never = () => new AbortController().signal;
const callOptions = (timeoutMs = 60_000) => ({ signal: never(), timeoutMs });

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
  logs.length = 0;
});

/** A stdio target over a host process; `processes` collects what it started. */
function target(
  command: readonly string[],
  env?: Record<string, string>,
): { target: McpServerTarget; processes: HostProcess[] } {
  const processes: HostProcess[] = [];
  return {
    processes,
    target: {
      transport: 'stdio',
      name: 'test',
      start: () =>
        spawnHostProcess(command, { env, cwd: FIXTURES }).map((process) => {
          processes.push(process);
          cleanups.push(() => process.kill());
          return process;
        }),
    },
  };
}

async function connect(t: McpServerTarget, timeoutMs = 60_000): Promise<McpConnection> {
  const result = await connector.connect(t, { signal: never(), timeoutMs });
  if (result.isErr()) throw new Error(`connect failed: ${result.error.type}: ${result.error.message}`);
  cleanups.push(() => result.value.close());
  return result.value;
}

describe('stdio, an SDK server run with node', () => {
  it('lists and calls tools; stderr noise goes to the logger, not the parser', async () => {
    const { target: t } = target([process.execPath, NODE_SERVER]);
    const connection = await connect(t);
    expect(connection.tools.map((tool) => tool.name).sort()).toEqual(['add', 'crash', 'echo']);
    expect(connection.tools.find((tool) => tool.name === 'add')?.input_schema).toMatchObject({
      type: 'object',
      required: ['a', 'b'],
    });

    // The echo tool writes a JSON-RPC-looking line to stderr: it must not reach the client.
    expect((await connection.call('echo', { text: 'hi' }, callOptions()))._unsafeUnwrap()).toEqual({
      content: 'hi',
      is_error: false,
    });
    expect((await connection.call('add', { a: 1, b: 2 }, callOptions()))._unsafeUnwrap().content).toBe('3');
    await expect
      .poll(
        () =>
          logs
            .filter((l) => l.message === 'MCP server stderr')
            .map((l) => String(l.fields['text']))
            .join(''),
        { timeout: 60_000 },
      )
      .toContain('echoing hi');
  });

  it('reports a process exit once through onLost; later calls fail as closed', async () => {
    const { target: t } = target([process.execPath, NODE_SERVER]);
    const connection = await connect(t);
    const lost: string[] = [];
    connection.onLost((reason) => lost.push(reason));

    const crash = await connection.call('crash', {}, callOptions());
    expect(crash._unsafeUnwrapErr().type).toBe('closed');
    expect(crash._unsafeUnwrapErr().message).toContain('code 3');
    await expect.poll(() => lost.length, { timeout: 60_000 }).toBe(1);
    expect(lost[0]).toContain('exited with code 3');
    expect(lost[0]).toContain('crashing now');

    const later = await connection.call('echo', { text: 'x' }, callOptions());
    expect(later._unsafeUnwrapErr().type).toBe('closed');
    // A listener added after the loss still hears about it.
    const late = await new Promise<string>((resolve) => connection.onLost(resolve));
    expect(late).toBe(lost[0]);
    expect(lost).toHaveLength(1);
  });

  it('close() kills the process, does not count as lost, and is idempotent', async () => {
    const { target: t, processes } = target([process.execPath, NODE_SERVER]);
    const connection = await connect(t);
    const lost: string[] = [];
    connection.onLost((reason) => lost.push(reason));
    const pid = processes[0]?.pid ?? -1;
    expect(isAlive(pid)).toBe(true);
    await Promise.all([connection.close(), connection.close()]);
    expect(isAlive(pid)).toBe(false);
    expect(lost).toEqual([]);
    expect((await connection.call('echo', { text: 'x' }, callOptions()))._unsafeUnwrapErr().type).toBe('closed');
  });

  it('fails as unreachable when the process cannot be started', async () => {
    const t: McpServerTarget = {
      transport: 'stdio',
      name: 'broken',
      start: () => errAsync({ type: 'failed', message: 'no such program: mcp-server-nope' }),
    };
    const result = await connector.connect(t, { signal: never(), timeoutMs: 60_000 });
    expect(result._unsafeUnwrapErr().type).toBe('unreachable');
    expect(result._unsafeUnwrapErr().message).toContain('mcp-server-nope');

    const missing = await connector.connect(target(['/nonexistent/mcp-server']).target, {
      signal: never(),
      timeoutMs: 60_000,
    });
    expect(missing._unsafeUnwrapErr().type).toBe('unreachable');
  });

  it('fails as closed, quoting stderr, when the process exits during the handshake', async () => {
    const { target: t, processes } = target([
      process.execPath,
      '-e',
      'process.stderr.write("missing config file\\n"); process.exit(2)',
    ]);
    const result = await connector.connect(t, { signal: never(), timeoutMs: 60_000 });
    expect(result._unsafeUnwrapErr().type).toBe('closed');
    expect(result._unsafeUnwrapErr().message).toContain('code 2');
    expect(result._unsafeUnwrapErr().message).toContain('missing config file');
    expect(processes).toHaveLength(1);
  });

  it('times out, and kills the process, when the server never answers', async () => {
    const { target: t, processes } = target([process.execPath, '-e', 'setInterval(() => {}, 1000)']);
    // The process never answers: only our own 500 ms timer can end this.
    const result = await connector.connect(t, { signal: never(), timeoutMs: 500 });
    expect(result._unsafeUnwrapErr().type).toBe('timeout');
    const pid = processes[0]?.pid ?? -1;
    await expect.poll(() => isAlive(pid), { timeout: 60_000 }).toBe(false);
  });

  it('kills a process whose start() finished after connect gave up', async () => {
    const { target: slow, processes } = target([process.execPath, NODE_SERVER]);
    const late: McpServerTarget = {
      transport: 'stdio',
      name: 'late',
      start: () =>
        okAsync(undefined).andThen(
          () =>
            new ResultAsync(
              new Promise((resolve) => setTimeout(resolve, 400)).then(() =>
                slow.transport === 'stdio' ? slow.start() : errAsync({ type: 'failed' as const, message: 'unused' }),
              ),
            ),
        ),
    };
    const result = await connector.connect(late, { signal: never(), timeoutMs: 100 });
    expect(result._unsafeUnwrapErr().type).toBe('timeout');
    await expect.poll(() => processes.length, { timeout: 60_000 }).toBe(1);
    const pid = processes[0]?.pid ?? -1;
    await expect.poll(() => isAlive(pid), { timeout: 60_000 }).toBe(false);
  });

  it('skips stdout lines that are not JSON-RPC', async () => {
    const script = `process.stdout.write('banner: not json\\n'); await import(${JSON.stringify(NODE_SERVER)});`;
    const { target: t } = target([process.execPath, '--input-type=module', '-e', script]);
    const connection = await connect(t);
    expect((await connection.call('echo', { text: 'after banner' }, callOptions()))._unsafeUnwrap().content).toBe(
      'after banner',
    );
    expect(logs.some((l) => l.message.includes('not JSON-RPC'))).toBe(true);
  });
});

describe('stdio, the python3 stdlib server', () => {
  it('initialises, lists, calls, answers unknown methods with -32601, and crashes with code 3', async () => {
    const { target: t, processes } = target(['python3', PYTHON_SERVER], { MCP_GREETING: 'hello from env' });
    const connection = await connect(t);
    expect(connection.tools.map((tool) => tool.name)).toEqual(['echo', 'whoami', 'crash']);
    expect(connection.tools.find((tool) => tool.name === 'whoami')?.annotations).toEqual({ read_only: true });
    expect((await connection.call('echo', { text: 'py' }, callOptions()))._unsafeUnwrap()).toEqual({
      content: 'py',
      is_error: false,
    });
    expect((await connection.call('whoami', {}, callOptions()))._unsafeUnwrap().content).toBe(
      `greeting=hello from env\ncwd=${FIXTURES}`,
    );
    const unknown = await connection.call('nope', {}, callOptions());
    expect(unknown._unsafeUnwrapErr().type).toBe('protocol');
    expect(unknown._unsafeUnwrapErr().message).toContain('-32602');

    const lost = new Promise<string>((resolve) => connection.onLost(resolve));
    expect((await connection.call('crash', {}, callOptions()))._unsafeUnwrapErr().type).toBe('closed');
    expect(await lost).toContain('code 3');
    expect(isAlive(processes[0]?.pid ?? -1)).toBe(false);
  });

  it('answers ping and unknown methods over the raw transport', async () => {
    const spawned = await spawnHostProcess(['python3', PYTHON_SERVER]);
    const process = spawned._unsafeUnwrap();
    cleanups.push(() => process.kill());
    const transport = new SandboxProcessTransport(process);
    const messages: unknown[] = [];
    transport.onmessage = (message) => messages.push(message);
    const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
    await transport.start();
    await transport.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await transport.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
    await transport.send({ jsonrpc: '2.0', id: 3, method: 'resources/list' });
    await expect.poll(() => messages.length, { timeout: 60_000 }).toBe(3);
    expect(messages[0]).toMatchObject({
      id: 1,
      result: {
        protocolVersion: '2025-03-26',
        capabilities: { tools: {} },
        serverInfo: { name: 'python-stdio-test-server' },
      },
    });
    expect(messages[1]).toEqual({ jsonrpc: '2.0', id: 2, result: {} });
    expect(messages[2]).toMatchObject({ id: 3, error: { code: -32601 } });
    await transport.close();
    await closed;
    await expect(transport.send({ jsonrpc: '2.0', id: 4, method: 'ping' })).rejects.toThrow(/Not connected/);
  });
});
