import { createHash, randomBytes } from 'node:crypto';
import type { Request } from 'express';

/**
 * Where browser sessions live: an opaque session id (the cookie's value) names a user. The
 * id is never an API key, so a leaked cookie is not a leaked key, and ending the session
 * (sign-out) ends it everywhere.
 */
export interface BrowserSessionStore {
  /** Starts a session for the user; resolves to its id (at least 128 random bits). */
  create(userId: string): Promise<string>;
  /** The user of a live session, or null (unknown, ended or expired). */
  userOf(sessionId: string): Promise<string | null>;
  /** Ends the session. Idempotent. */
  end(sessionId: string): Promise<void>;
}

/**
 * Sessions in this process's memory, ended after `idleMs` without use (default 7 days). Kept
 * by the SHA-256 of their id, so a heap dump holds no usable cookie. A restart ends them all:
 * the user signs in again with the URL the server prints.
 */
export class MemoryBrowserSessions implements BrowserSessionStore {
  readonly #sessions = new Map<string, { userId: string; lastUsed: number }>();
  readonly #idleMs: number;
  readonly #now: () => number;

  constructor(options: { idleMs?: number; now?: () => number } = {}) {
    this.#idleMs = options.idleMs ?? 7 * 24 * 3600_000;
    this.#now = options.now ?? Date.now;
  }

  create(userId: string): Promise<string> {
    this.#sweep();
    const id = randomBytes(32).toString('base64url');
    this.#sessions.set(digest(id), { userId, lastUsed: this.#now() });
    return Promise.resolve(id);
  }

  userOf(sessionId: string): Promise<string | null> {
    const key = digest(sessionId);
    const session = this.#sessions.get(key);
    if (!session) return Promise.resolve(null);
    if (this.#now() - session.lastUsed > this.#idleMs) {
      this.#sessions.delete(key);
      return Promise.resolve(null);
    }
    session.lastUsed = this.#now();
    return Promise.resolve(session.userId);
  }

  end(sessionId: string): Promise<void> {
    this.#sessions.delete(digest(sessionId));
    return Promise.resolve();
  }

  /** Drops expired sessions now and then, so abandoned ones do not pile up. */
  #sweep(): void {
    if (this.#sessions.size < 1_000) return;
    const now = this.#now();
    for (const [key, session] of this.#sessions) if (now - session.lastUsed > this.#idleMs) this.#sessions.delete(key);
  }
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest('base64url');

/** The name of the session cookie. */
export const SESSION_COOKIE = 'acs_session';

/** A cookie's value from the request's Cookie header, or null. */
export function readCookie(req: Pick<Request, 'headers'>, name: string): string | null {
  const header = req.headers.cookie;
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      return null;
    }
  }
  return null;
}

/** The Set-Cookie value for a session (or, with null, for ending it). HttpOnly, SameSite=Strict, Secure behind https. */
export function sessionCookie(sessionId: string | null, options: { secure: boolean; path: string }): string {
  return [
    `${SESSION_COOKIE}=${sessionId === null ? '' : encodeURIComponent(sessionId)}`,
    `Path=${options.path}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(options.secure ? ['Secure'] : []),
    ...(sessionId === null ? ['Max-Age=0'] : []),
  ].join('; ');
}
