import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { HTTP_ERROR_CODES, type ErrorBody } from './http-error.js';

/** Node's own answers to requests it cannot parse, as it writes them when nobody listens for `clientError`. */
const NODE_ANSWERS: Record<string, string> = {
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
};
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';

/**
 * Makes the HTTP server answer a request line and headers over its limit (Node: 16 KiB by
 * default, `maxHeaderSize`) with 431 and the common JSON error body, as the document says, instead
 * of Node's bare 431. Other requests Node cannot parse get the answer Node gives them. Call
 * once on the server the router is served by.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (socket.writable && socket.bytesWritten === 0) {
      if (error.code === 'HPE_HEADER_OVERFLOW') {
        const message =
          'The request line and headers are larger than this server accepts; shorten the URL (fewer or shorter ids, a shorter path) or the headers.';
        const body = JSON.stringify({
          code: HTTP_ERROR_CODES.REQUEST_HEADERS_TOO_LARGE,
          message,
          detail: message,
        } satisfies ErrorBody);
        socket.write(
          `HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\n\r\n${body}`,
        );
      } else {
        socket.write(NODE_ANSWERS[error.code ?? ''] ?? BAD_REQUEST);
      }
    }
    socket.destroy(error);
  });
}
