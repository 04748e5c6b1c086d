/**
 * A real git server for tests: Debian's git-http-backend (smart HTTP, fetch and push) behind a
 * small node:http CGI bridge on 127.0.0.1 that checks the token in `Authorization: Basic`.
 * Sandboxes reach it in host network mode.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';
/** A git smart-HTTP server on 127.0.0.1: git-http-backend behind a CGI bridge that wants `Basic <any user>:<token>` (401 otherwise). */
export class GitServer {
  readonly root = mkdtempSync(join(tmpdir(), 'acs-git-server-'));
  readonly requests: { path: string; authorized: boolean; status: number }[] = [];
  #server: Server | null = null;
  port = 0;

  constructor(readonly token: string) {}

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!existsSync(HTTP_BACKEND))
      throw new Error(`These tests need ${HTTP_BACKEND}: install git (apt-get install git)`);
    this.#server = createServer((req, res) => this.#handle(req, res));
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as AddressInfo).port;
  }

  async stop() {
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
    rmSync(this.root, { recursive: true, force: true });
  }

  #handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://x');
    const auth = req.headers.authorization ?? '';
    const password = auth.startsWith('Basic ')
      ? Buffer.from(auth.slice(6), 'base64').toString().split(':').slice(1).join(':')
      : null;
    const authorized = password === this.token;
    if (!authorized) {
      this.requests.push({ path: url.pathname, authorized, status: 401 });
      res
        .writeHead(401, { 'WWW-Authenticate': 'Basic realm="acs test git"', 'Content-Type': 'text/plain' })
        .end('authentication required\n');
      return;
    }
    const cgi = spawn(HTTP_BACKEND, [], {
      env: {
        GIT_PROJECT_ROOT: this.root,
        GIT_HTTP_EXPORT_ALL: '1',
        REMOTE_USER: 'agent',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: req.headers['git-protocol'] as string } : {}),
      },
    });
    req.pipe(cgi.stdin);
    const chunks: Buffer[] = [];
    cgi.stdout.on('data', (c: Buffer) => chunks.push(c));
    cgi.on('close', () => {
      const out = Buffer.concat(chunks);
      const split = out.indexOf('\r\n\r\n') >= 0 ? out.indexOf('\r\n\r\n') : out.indexOf('\n\n');
      const sep = out.indexOf('\r\n\r\n') >= 0 ? 4 : 2;
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of out.subarray(0, split).toString().split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        const key = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (key.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[key] = value;
      }
      this.requests.push({ path: url.pathname, authorized, status });
      res.writeHead(status, headers).end(out.subarray(split + sep));
    });
  }
}

export const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'T',
      GIT_AUTHOR_EMAIL: 't@x',
      GIT_COMMITTER_NAME: 'T',
      GIT_COMMITTER_EMAIL: 't@x',
    },
  });

/** acme/widgets.git with main and feature, an AGENTS.md, a microagent and a setup script. */
export function makeRepository(root: string) {
  const work = mkdtempSync(join(tmpdir(), 'acs-git-work-'));
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'AGENTS.md'), 'Always run `make lint` before committing.\n');
  mkdirSync(join(work, '.openhands', 'microagents'), { recursive: true });
  writeFileSync(
    join(work, '.openhands', 'setup.sh'),
    'echo "setup: preparing $(basename "$PWD")"\ntouch .setup-done\n',
  );
  writeFileSync(
    join(work, '.openhands', 'microagents', 'release.md'),
    '---\ntriggers:\n- release\n---\nReleases are cut with `make release`.\n',
  );
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'initial');
  git(work, 'checkout', '-q', '-b', 'feature');
  writeFileSync(join(work, 'feature.txt'), 'feature work\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'feature');
  mkdirSync(join(root, 'acme'), { recursive: true });
  git(root, 'clone', '-q', '--bare', work, join(root, 'acme', 'widgets.git'));
  git(join(root, 'acme', 'widgets.git'), 'config', 'http.receivepack', 'true');
  rmSync(work, { recursive: true, force: true });
  return join(root, 'acme', 'widgets.git');
}
