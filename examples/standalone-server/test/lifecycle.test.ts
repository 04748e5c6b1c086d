import { connect, createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freeze, freezerAvailable } from './freezer.js';
import {
  body,
  call,
  freshDataDir,
  spawnServer,
  spawnServerUnreaped,
  startServer,
  waitFor,
  waitForOutput,
} from './process.js';

const KEY = 'lifecycle-key-0123456789abcdef';

/** The key the server printed for user default. */
const printedKey = (stderr: string) => /API key of user "default" \([^)]*\)[^\n]*\n\n\s+(\S+)/.exec(stderr)?.[1];

/** The state letter of a process (field 3 of /proc/<pid>/stat: R, S, D, Z…), or null when there is no such process. */
const processState = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
};

describe('the data directory', () => {
  it('keeps a generated API key (0600) and reuses it after a restart, printing it at each start', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ DATA_DIR: dataDir });
    // The key is printed once listening, so it may come just after the listening line.
    await waitForOutput(first, 'API key of user "default"', 'the printed key');
    const key = printedKey(first.stderr());
    expect(key, first.stderr()).toBeDefined();
    expect(readFileSync(join(dataDir, 'api.key'), 'utf8').trim()).toBe(key);
    expect(statSync(join(dataDir, 'api.key')).mode & 0o777).toBe(0o600);
    await body(call(first.url, '/api/settings', key!, { llm_model: 'openai/gpt-4o' }));
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const second = await startServer({ DATA_DIR: dataDir });
    await waitForOutput(second, 'API key of user "default"', 'the printed key');
    expect(printedKey(second.stderr())).toBe(key);
    expect(second.stderr()).toContain('made at the first start');
    expect((await body<{ llm_model: string }>(call(second.url, '/api/settings', key!))).llm_model).toBe(
      'openai/gpt-4o',
    );
  });

  it('is used by one server at a time: a second refuses to start, naming the directory and the process holding it', async () => {
    const dataDir = freshDataDir();
    const first = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    const second = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY }, { expectExit: true });
    expect(await second.exited).toBe(1);
    expect(second.stderr()).toContain(`The data directory ${dataDir} is in use by process ${first.child.pid}`);
    // The first one is unharmed.
    expect((await call(first.url, '/api/settings', KEY)).status).toBe(404);
  });

  it('is taken over after its server was killed (a stale lock), and given back on a clean stop', async () => {
    const dataDir = freshDataDir();
    const killed = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    await body(call(killed.url, '/api/settings', KEY, { llm_model: 'openai/kept' }));
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(existsSync(join(dataDir, 'server.lock'))).toBe(true);

    const next = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    expect((await body<{ llm_model: string }>(call(next.url, '/api/settings', KEY))).llm_model).toBe('openai/kept');
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
    expect(existsSync(join(dataDir, 'server.lock'))).toBe(false);
  });

  it('takes over a lock whose pid now belongs to another program', async () => {
    const dataDir = freshDataDir();
    // This test process is alive, but it is not the holder the lock names (another start time).
    writeFileSync(
      join(dataDir, 'server.lock'),
      JSON.stringify({
        pid: process.pid,
        host: (await import('node:os')).hostname(),
        process_start: '1',
        started_at: '2020-01-01T00:00:00.000Z',
      }),
    );
    const server = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    expect((await call(server.url, '/alive', null)).status).toBe(200);
  });

  it('is taken over from a killed server that is still a zombie, its parent not having reaped it', async () => {
    const dataDir = freshDataDir();
    // As under a container's PID 1 that does not reap: the killed server stays a zombie for as long as its parent lives.
    const killed = spawnServerUnreaped({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    const { url } = JSON.parse(
      await waitForOutput(killed, '"agent conversation service listening"', 'its listening line'),
    ) as { url: string };
    await body(call(url, '/api/settings', KEY, { llm_model: 'openai/kept' }));
    const pid = killed.serverPid();
    process.kill(pid, 'SIGKILL');
    await waitFor(
      `the killed server (process ${pid}) to be a zombie`,
      () => (processState(pid) === 'Z' ? true : undefined),
      30_000,
    );

    const next = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
    expect((await body<{ llm_model: string }>(call(next.url, '/api/settings', KEY))).llm_model).toBe('openai/kept');
    // Taken over from the zombie itself, not from a process gone meanwhile.
    expect(processState(pid)).toBe('Z');
  });

  it.skipIf(!freezerAvailable)(
    'waits for a killed server that is still exiting, then takes over (held in its exit by the cgroup v1 freezer; needs root)',
    async () => {
      const dataDir = freshDataDir();
      const killed = await startServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
      await body(call(killed.url, '/api/settings', KEY, { llm_model: 'openai/kept' }));
      const frozen = await freeze(killed.child.pid!);
      try {
        // Killed, but it cannot finish exiting until it is thawed.
        killed.child.kill('SIGKILL');
        const next = spawnServer({ DATA_DIR: dataDir, SESSION_API_KEY: KEY });
        const waiting = await waitForOutput(next, 'still exiting', 'its line saying it waits for the killed holder');
        expect(waiting).toContain(`process ${killed.child.pid}`);
        frozen.thaw();
        const { url } = JSON.parse(
          await waitForOutput(next, '"agent conversation service listening"', 'its listening line'),
        ) as { url: string };
        expect((await body<{ llm_model: string }>(call(url, '/api/settings', KEY))).llm_model).toBe('openai/kept');
      } finally {
        await frozen.remove();
      }
    },
  );
});

describe('shutting down', () => {
  it('ends live event streams cleanly at once, so clients can resume elsewhere, and exits 0', async () => {
    const server = await startServer({
      SESSION_API_KEY: KEY,
      ACS_STORAGE: 'memory',
      ACS_SHUTDOWN_TIMEOUT_SECONDS: '600',
    });
    await body(call(server.url, '/api/settings', KEY, { llm_model: 'openai/gpt-4o', llm_api_key: 'sk-x' }));
    const { conversation_id } = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { initial_user_msg: 'hello' }),
    );
    const stream = await fetch(`${server.url}/api/v1/app-conversations/${conversation_id}/events/stream`, {
      headers: { 'X-Session-API-Key': KEY },
    });
    expect(stream.status).toBe(200);
    const reader: ReadableStreamDefaultReader<Uint8Array> = stream.body!.getReader();
    let text = '';
    while (!text.includes('event: message')) text += new TextDecoder().decode((await reader.read()).value);

    server.child.kill('SIGTERM');
    // The stream ends (done), not cut (a socket error): the server ended it before closing.
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    expect(text).toContain('id: 1\n');
    expect(await server.exited).toBe(0);
    expect(server.stdout()).toContain('"agent conversation service stopped"');
  });

  describe('when something holds it up', () => {
    const sockets: Socket[] = [];
    afterEach(() => {
      for (const socket of sockets.splice(0)) socket.destroy();
    });

    /** A request whose body never arrives: the HTTP server cannot close while it is in progress. */
    const hangingRequest = async (url: string) => {
      const { port } = new URL(url);
      const socket = connect(Number(port), '127.0.0.1');
      sockets.push(socket);
      await once(socket, 'connect');
      socket.write(
        `POST /api/settings HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Session-API-Key: ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"llm`,
      );
    };

    it('exits 1 after ACS_SHUTDOWN_TIMEOUT_SECONDS, saying what it was waiting for', async () => {
      const server = await startServer({
        SESSION_API_KEY: KEY,
        ACS_STORAGE: 'memory',
        ACS_SHUTDOWN_TIMEOUT_SECONDS: '1',
      });
      await hangingRequest(server.url);
      await new Promise((r) => setTimeout(r, 200));
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(1);
      const line = server
        .stdout()
        .split('\n')
        .find((l) => l.includes('shutdown did not finish within 1 s'));
      expect(line, server.stdout()).toBeDefined();
      expect(JSON.parse(line!)).toMatchObject({
        waitingFor: 'HTTP requests in progress to finish (1 connection open)',
      });
    });

    it('exits at once on a second signal, saying what it was waiting for', async () => {
      const server = await startServer({
        SESSION_API_KEY: KEY,
        ACS_STORAGE: 'memory',
        ACS_SHUTDOWN_TIMEOUT_SECONDS: '600',
      });
      await hangingRequest(server.url);
      await new Promise((r) => setTimeout(r, 200));
      server.child.kill('SIGTERM');
      await waitForOutput(server, '"shutting down"', 'its shutting-down line');
      server.child.kill('SIGINT');
      expect(await server.exited).toBe(130);
      expect(server.stdout()).toMatch(
        /second SIGINT: exiting now without waiting for HTTP requests in progress to finish \(1 connection open\)/,
      );
    });
  });

  it('a server stuck while starting (its database never answers) exits on SIGTERM, saying where it was', async () => {
    let connected!: () => void;
    const reached = new Promise<void>((resolve) => (connected = resolve));
    const silent: Server = createServer((socket) => {
      socket.on('error', () => {});
      connected();
    });
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    try {
      const port = (silent.address() as { port: number }).port;
      const server = spawnServer({ SESSION_API_KEY: KEY, DATABASE_URL: `postgres://acs:acs@127.0.0.1:${port}/never` });
      // It is stuck once it has connected to the database that never answers.
      await Promise.race([
        reached,
        server.exited.then((code) => Promise.reject(new Error(`exited (${code}) first:\n${server.stderr()}`))),
      ]);
      expect(server.child.exitCode, server.stderr()).toBeNull();
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(143);
      expect(server.stderr()).toContain('SIGTERM while starting (opening storage); exiting now');
    } finally {
      silent.close();
    }
  });
});
