import type { IncomingMessage } from 'node:http';
import type { Request } from 'express';
import type { Caller } from './auth/caller.js';

/**
 * What the router notes on a request as it passes: where the host mounted it (paths below that
 * are what the route table knows) and the caller it let in.
 */
const MOUNT = Symbol('acs.mount');
const CALLER = Symbol('acs.caller');
type Noted = { [MOUNT]?: string; [CALLER]?: Caller };

/** Notes where the router is mounted: the request's own base URL as it enters the router. */
export function noteMount(req: Request): void {
  (req as Noted)[MOUNT] = req.baseUrl;
}

/** Where the router is mounted, as noted on this request; undefined for one the router did not see (a realtime upgrade). */
export function mountOf(req: IncomingMessage): string | undefined {
  return (req as Noted)[MOUNT];
}

/** Lets the request on as this caller's. */
export function admit(req: Request, caller: Caller): void {
  (req as Noted)[CALLER] = caller;
}

/** The caller the router let in, if any yet. */
export function callerOf(req: Request): Caller | undefined {
  return (req as Noted)[CALLER];
}

/** The path below the router's mount point, e.g. `/api/v1/sandboxes/search` wherever the host mounted it. */
export function routePathOf(req: Request): string {
  return (req.baseUrl + req.path).slice(mountOf(req)?.length ?? 0);
}
