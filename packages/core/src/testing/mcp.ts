import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { McpConnector, McpServerTarget } from '../mcp/port.js';

export interface McpConnectorFixture {
  connector: McpConnector;
  /** A server that offers `echo` ({ text: string } → that text). */
  echoServer: McpServerTarget;
  /** A target where nothing answers the connection (a closed port). */
  unreachable: McpServerTarget;
  close?(): Promise<void>;
}

const open = () => ({ signal: new AbortController().signal, timeoutMs: 60_000 });

/**
 * What every `McpConnector` must do, whatever transport it speaks: list a server's tools with
 * their schemas, call them, and fail with an `McpFailure` tagged by `type` (never a throw): a
 * target that does not answer is `unreachable`, an aborted connect `cancelled`, a call on a
 * closed connection `closed`.
 */
export function describeMcpConnectorContract(
  name: string,
  make: () => McpConnectorFixture | Promise<McpConnectorFixture>,
): void {
  describe(`McpConnector contract: ${name}`, () => {
    let f: McpConnectorFixture;
    beforeAll(async () => {
      f = await make();
    });
    afterAll(async () => {
      await f.close?.();
    });

    it('connects, lists echo with an object schema, calls it, and a closed connection refuses calls as closed', async () => {
      const connection = (await f.connector.connect(f.echoServer, open()))._unsafeUnwrap();
      const echo = connection.tools.find((t) => t.name === 'echo');
      expect(echo?.input_schema).toMatchObject({ type: 'object' });
      expect((await connection.call('echo', { text: 'hello' }, open()))._unsafeUnwrap()).toEqual({
        content: 'hello',
        is_error: false,
      });
      await connection.close();
      await connection.close();
      expect((await connection.call('echo', { text: 'again' }, open()))._unsafeUnwrapErr().type).toBe('closed');
    });

    it('fails as unreachable when nothing answers', async () => {
      const failure = (await f.connector.connect(f.unreachable, open()))._unsafeUnwrapErr();
      expect(failure.type).toBe('unreachable');
      expect(failure.message.length).toBeGreaterThan(10);
    });

    it('ends a connect whose signal is already aborted as cancelled', async () => {
      const failure = (
        await f.connector.connect(f.echoServer, { signal: AbortSignal.abort(), timeoutMs: 60_000 })
      )._unsafeUnwrapErr();
      expect(failure.type).toBe('cancelled');
    });
  });
}
