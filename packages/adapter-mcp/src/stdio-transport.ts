import type { SandboxProcess } from '@acs/core/ports';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export interface SandboxProcessTransportOptions {
  /** Receives the process's stderr, decoded (logs only; never parsed). */
  onStderr?: (text: string) => void;
  /** Receives stdout lines that are not JSON-RPC (some servers print banners); they are skipped. */
  onNoise?: (error: Error) => void;
  /** Most bytes of one unfinished stdout line; beyond this the buffer is dropped. Default 10 MiB. */
  maxLineBytes?: number;
}

/**
 * An MCP `Transport` over a process in a sandbox, speaking newline-delimited JSON-RPC on its
 * stdin and stdout (the MCP stdio transport). The transport owns the process: `close()` kills
 * it, and the process ending closes the transport.
 */
export class SandboxProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** How the process ended, once it has (null: still running). */
  exit: { exit_code: number | null } | null = null;

  private readonly buffer: ReadBuffer;
  private readonly decoder = new TextDecoder();
  private started = false;
  private closed = false;

  constructor(
    readonly process: SandboxProcess,
    private readonly options: SandboxProcessTransportOptions = {},
  ) {
    this.buffer = new ReadBuffer({ maxBufferSize: options.maxLineBytes ?? 10 * 1024 * 1024 });
    // Listen at once: output written before start() would otherwise be lost.
    process.onStdout((chunk) => this.receive(chunk));
    process.onStderr((chunk) => {
      const text = this.decoder.decode(chunk, { stream: true });
      if (text !== '') this.options.onStderr?.(text);
    });
    void process.exited.then(
      (exit) => this.ended(exit),
      () => this.ended({ exit_code: null }),
    );
  }

  start(): Promise<void> {
    if (this.started) return Promise.reject(new Error('SandboxProcessTransport already started'));
    this.started = true;
    this.drain();
    // The process may have ended before the client attached.
    if (this.exit !== null) this.finish();
    return Promise.resolve();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed || this.exit !== null) throw new Error('Not connected: the process has ended');
    await this.process.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.process.kill();
    this.finish();
  }

  private receive(chunk: Uint8Array): void {
    try {
      this.buffer.append(Buffer.from(chunk));
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (this.started) this.drain();
  }

  private drain(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        // ReadBuffer drops the bad line before parsing it, so reading on is safe.
        const wrapped = error instanceof Error ? error : new Error(String(error));
        if (this.options.onNoise) this.options.onNoise(wrapped);
        else this.onerror?.(wrapped);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  private ended(exit: { exit_code: number | null }): void {
    if (this.exit !== null) return;
    this.exit = exit;
    if (this.started) {
      this.drain();
      this.finish();
    }
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
