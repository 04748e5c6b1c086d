/** One message of a Server-Sent Events stream: its fields (`id`, `event`, `data`…) and the comment lines before it. */
export interface SseMessage {
  fields: Record<string, string>;
  comments: string[];
}

/**
 * Reads a `text/event-stream` body message by message, as the stream delivers them (for tests
 * that follow the service's event streams over real HTTP). Ends when the body ends; abort the
 * request to stop early (the iteration then throws the abort).
 */
export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message: SseMessage = { fields: {}, comments: [] };
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) message.comments.push(line.slice(1).trim());
          else {
            const colon = line.indexOf(':');
            message.fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
          }
        }
        yield message;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
