import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** The path and query of a request target; null when it is not an origin-form target (`/path?query`). */
export function requestTarget(url: string | undefined): { path: string; query: URLSearchParams } | null {
  if (!url || !url.startsWith('/') || url.startsWith('//')) return null;
  const mark = url.indexOf('?');
  const path = mark < 0 ? url : url.slice(0, mark);
  // URLSearchParams never throws: bad percent-encoding in the query is kept as it is.
  return { path, query: new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1)) };
}

/** A path segment's decoded text, or null when it is not valid percent-encoding. */
export function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** Whether `path` is `prefix` or below it (`prefix` ends without a slash). */
export const isUnder = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);

/** Answers an upgrade request with a plain HTTP error and closes the connection. */
export function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n\r\n${body}`,
  );
  // A client that never reads the answer must not hold the socket.
  setTimeout(() => socket.destroy(), 5_000).unref();
}
