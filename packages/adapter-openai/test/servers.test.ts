import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { createDefaultTransport } from '../src/default-transport.js';
import type { Exchange, Post } from '../src/transport.js';

/**
 * The adapter's default client (undici's fetch) against HTTP servers we did not write: uvicorn (h11, what
 * LiteLLM's proxy and vLLM's OpenAI server run on) from the OpenHands SDK's venv, and Python's
 * http.server. The venv is made by scripts/python-venv.sh openhands-sdk and kept by .ci/run
 * (ACS_OPENHANDS_PYTHON, default /var/cache/acs/openhands-sdk-venv/bin/python).
 */

const VENV_PYTHON = process.env.ACS_OPENHANDS_PYTHON ?? '/var/cache/acs/openhands-sdk-venv/bin/python';
const SYSTEM_PYTHON = '/usr/bin/python3';
const DEADLINE_MS = 60_000;

/** A chat-completions server as a raw ASGI app: the client's port (one per connection) and the prompt back, with a length or in chunks. */
const UVICORN_APP = `
import json, socket, sys, uvicorn

async def app(scope, receive, send):
    if scope['type'] == 'lifespan':
        while True:
            message = await receive()
            if message['type'] == 'lifespan.startup':
                await send({'type': 'lifespan.startup.complete'})
            elif message['type'] == 'lifespan.shutdown':
                await send({'type': 'lifespan.shutdown.complete'})
                return
    body = b''
    while True:
        message = await receive()
        body += message.get('body', b'')
        if not message.get('more_body'):
            break
    prompt = json.loads(body)['messages'][0]['content']
    answer = json.dumps({'port': scope['client'][1], 'prompt': prompt}, ensure_ascii=False).encode()
    headers = [(b'content-type', b'application/json')]
    if scope['path'].endswith('/chunked'):
        await send({'type': 'http.response.start', 'status': 200, 'headers': headers})
        for at in range(0, len(answer), 7):
            await send({'type': 'http.response.body', 'body': answer[at:at + 7], 'more_body': True})
        await send({'type': 'http.response.body', 'body': b''})
    else:
        headers.append((b'content-length', str(len(answer)).encode()))
        await send({'type': 'http.response.start', 'status': 200, 'headers': headers})
        await send({'type': 'http.response.body', 'body': answer})

sock = socket.socket()
sock.bind(('127.0.0.1', 0))
sock.listen(16)  # connections wait in the backlog until uvicorn accepts them
print('port', sock.getsockname()[1], flush=True)
uvicorn.Server(uvicorn.Config(app, log_level='warning')).run(sockets=[sock])
`;

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

/** Starts `args` and waits for it to print its port (`pattern`); fails with its output when it does not within the deadline. */
async function startServer(command: string, args: string[], pattern: RegExp): Promise<number> {
  if (!existsSync(command))
    throw new Error(
      `${command} is missing: make the OpenHands SDK venv with scripts/python-venv.sh openhands-sdk (.ci/run does)`,
    );
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  });
  children.push(child);
  let output = '';
  return new Promise<number>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${command} ${why}; its output:\n${output}`));
    };
    const timer = setTimeout(() => fail(`printed no port within ${DEADLINE_MS} ms`), DEADLINE_MS);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const port = pattern.exec(output)?.[1];
      if (port) {
        clearTimeout(timer);
        resolve(Number(port));
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => fail(`exited (${code})`));
  });
}

const post = (url: string): Post => ({
  url,
  headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-test' },
  body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'é and 日本 ✓' }] }),
  signal: undefined,
  timeoutMs: DEADLINE_MS,
});

const answered = (exchange: Exchange) => {
  if (exchange.outcome !== 'answered') throw new Error(`not answered: ${JSON.stringify(exchange)}`);
  return exchange;
};

describe('the default client against other servers', () => {
  it('reads uvicorn’s answers, with a length and in chunks, on kept connections', async () => {
    const port = await startServer(VENV_PYTHON, ['-c', UVICORN_APP], /^port (\d+)$/m);
    const send = createDefaultTransport();
    const answers = [];
    const paths = ['/v1/chat/completions', '/v1/chunked'];
    for (const path of [...paths, ...paths, ...paths, ...paths])
      answers.push(answered(await send(post(`http://127.0.0.1:${port}${path}`))));
    const bodies = answers.map((a) => JSON.parse(a.text) as { port: number; prompt: string });
    expect(bodies.map((b) => b.prompt)).toEqual(Array(8).fill('é and 日本 ✓'));
    expect(answers[1]!.header('Transfer-Encoding')).toBe('chunked');
    expect(answers[0]!.header('content-length')).toBe(String(Buffer.byteLength(answers[0]!.text)));
    // Eight calls one after another over one or two connections (undici may open a second while
    // the first is being handed back after a chunked answer): kept and reused, not one per call.
    expect(new Set(bodies.map((b) => b.port)).size).toBeLessThanOrEqual(2);
  });

  it('reads the error page of Python’s http.server, which answers POST with 501 and closes', async () => {
    const port = await startServer(
      SYSTEM_PYTHON,
      ['-m', 'http.server', '--bind', '127.0.0.1', '0'],
      /Serving HTTP on \S+ port (\d+)/,
    );
    const send = createDefaultTransport();
    for (let n = 0; n < 2; n++) {
      const answer = answered(await send(post(`http://127.0.0.1:${port}/v1/chat/completions`)));
      expect(answer.status).toBe(501);
      expect(answer.header('connection')).toBe('close');
      expect(answer.text).toContain('Unsupported method');
    }
  });
});
