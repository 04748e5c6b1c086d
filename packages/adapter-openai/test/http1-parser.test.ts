import { describe, expect, it } from 'vitest';
import { HttpAnswerError, ResponseParser } from '../src/http1-parser.js';

const limits = { maxHeadBytes: 1024, maxBodyBytes: 4096 };

/** Feeds `text` to a new parser `step` bytes at a time; the parser, and after how many bytes it said the response was whole (null: never). */
function feed(text: string | Buffer, step = Infinity, parserLimits = limits) {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'latin1') : text;
  const parser = new ResponseParser(parserLimits);
  let wholeAt: number | null = null;
  for (let at = 0; at < bytes.length; at += step) {
    const end = Math.min(bytes.length, at + step);
    if (parser.push(bytes.subarray(at, end)) && wholeAt === null) wholeAt = end;
  }
  return { parser, wholeAt, body: () => parser.body().toString('latin1') };
}

const chunked =
  'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nX-Twice: a\r\nx-twice: b\r\n\r\n' +
  '5;name=value\r\n{"a":\r\n' +
  'A\r\n 1234567, \r\n' +
  '2\r\n9}\r\n' +
  '0\r\nX-Trailer: done\r\n\r\n';

describe('the HTTP/1.1 response parser', () => {
  it.each([
    ['whole', Infinity],
    ['a byte at a time', 1],
    ['three bytes at a time', 3],
  ])('reads a chunked answer with extensions and trailer fields, fed %s', (_, step) => {
    const { parser, wholeAt, body } = feed(chunked, step);
    expect(wholeAt).toBe(chunked.length);
    expect(parser.status).toBe(200);
    expect(parser.headers.get('content-type')).toBe('application/json');
    expect(parser.headers.get('x-twice')).toBe('a, b');
    expect(body()).toBe('{"a": 1234567, 9}');
    expect(parser.keepAlive).toBe(true);
    expect(parser.surplus).toBe(0);
  });

  it('reads a body of a Content-Length, and is whole at its last byte, not before', () => {
    const text = 'HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\nhello world';
    const { parser, wholeAt, body } = feed(text, 1);
    expect(wholeAt).toBe(text.length);
    expect(parser.status).toBe(201);
    expect(body()).toBe('hello world');
  });

  it('keeps bytes past the end of the response as surplus (the connection is then not reused)', () => {
    const { parser, body } = feed('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n');
    expect(body()).toBe('ok');
    expect(parser.surplus).toBe(17);
  });

  it('reads a body without length to the end of the connection, which then closes', () => {
    const { parser, wholeAt } = feed('HTTP/1.0 501 Unsupported\r\nContent-Type: text/html\r\n\r\n<p>no POST</p>');
    expect(wholeAt).toBeNull();
    expect(parser.end()).toBe(true);
    expect(parser.status).toBe(501);
    expect(parser.body().toString()).toBe('<p>no POST</p>');
    expect(parser.keepAlive).toBe(false);
  });

  it('passes over interim answers to the final one, and reads no body for 204 and 304', () => {
    const { parser, wholeAt } = feed(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\nX-Final: yes\r\n\r\n',
      2,
    );
    expect(wholeAt).not.toBeNull();
    expect(parser.status).toBe(204);
    expect(parser.headers.get('link')).toBeUndefined();
    expect(parser.headers.get('x-final')).toBe('yes');
    expect(parser.body().length).toBe(0);
    expect(feed('HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n').wholeAt).not.toBeNull();
  });

  it('says whether the connection stays open: HTTP/1.1 unless it says close, HTTP/1.0 only when it says keep-alive', () => {
    const keep = (head: string) => feed(`${head}\r\nContent-Length: 0\r\n\r\n`).parser.keepAlive;
    expect(keep('HTTP/1.1 200 OK')).toBe(true);
    expect(keep('HTTP/1.1 200 OK\r\nConnection: Close')).toBe(false);
    expect(keep('HTTP/1.0 200 OK')).toBe(false);
    expect(keep('HTTP/1.0 200 OK\r\nConnection: keep-alive')).toBe(true);
    // Both framings: chunked wins, and the connection is not to be trusted after it.
    const both = feed('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n');
    expect([both.body(), both.parser.keepAlive]).toEqual(['x', false]);
  });

  it('has not started before any byte, and has once one arrived', () => {
    const parser = new ResponseParser(limits);
    expect(parser.started).toBe(false);
    parser.push(Buffer.from('H'));
    expect(parser.started).toBe(true);
    expect(parser.end()).toBe(false);
  });

  it.each([
    ['a status line of another protocol', 'SSH-2.0-OpenSSH_9.2\r\n\r\n', 'status line'],
    ['a status line without a code', 'HTTP/1.1 OK\r\n\r\n', 'status line'],
    ['a header line without a colon', 'HTTP/1.1 200 OK\r\nnot a field\r\n\r\n', 'not a field'],
    ['a folded header line', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n', 'not a field'],
    ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n', 'Content-Length'],
    [
      'two different Content-Lengths',
      'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n',
      'Content-Length',
    ],
    [
      'a chunk size that is not hexadecimal',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'hexadecimal',
    ],
    [
      'a chunk longer than its size',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n',
      'longer than its size',
    ],
    ['a switch of protocols', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', 'switched protocols'],
  ])('refuses %s', (_, text, words) => {
    expect(() => feed(text)).toThrow(HttpAnswerError);
    expect(() => feed(text)).toThrow(words);
  });

  it('bounds the header, a chunk-size line, the trailer and the body, however the bytes arrive', () => {
    const endless = (prefix: string, filler: string) => {
      const parser = new ResponseParser(limits);
      parser.push(Buffer.from(prefix));
      for (let i = 0; i < 10_000; i++) parser.push(Buffer.from(filler));
    };
    expect(() => endless('HTTP/1.1 200 OK\r\n', 'X-Long: aaaaaaaaaa\r\n')).toThrow('header is larger than 1024 bytes');
    expect(() => endless('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', '0000')).toThrow('chunk-size line');
    expect(() => endless('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n', 'X-T: 1\r\n')).toThrow(
      'trailer section',
    );
    expect(() => endless('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', '8\r\n12345678\r\n')).toThrow(
      'body is larger than 4096 bytes',
    );
    expect(() => endless('HTTP/1.0 200 OK\r\n\r\n', 'xxxxxxxxxx')).toThrow('body is larger than 4096 bytes');
    // A declared length over the limit is refused before any of the body is read.
    expect(() => feed('HTTP/1.1 200 OK\r\nContent-Length: 4097\r\n\r\n')).toThrow('body is larger than 4096 bytes');
    expect(() => feed('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n')).toThrow(
      'body is larger than 4096 bytes',
    );
  });
});
