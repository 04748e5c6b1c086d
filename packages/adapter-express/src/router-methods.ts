import type { Request, Response } from 'express';
import { HTTP_ERROR_CODES, sendError } from './http-error.js';
import type { RouteDefinition } from './route.js';

/** The methods a path takes (null: no route has it), and whether it is a literal route's path. */
export type AllowedMethods = ((path: string) => string[] | null) & { isLiteral(path: string): boolean };

/**
 * The methods each path takes. A path that is a literal route (`/api/v1/sandboxes/search`)
 * takes only its own methods, never those of a parameterised route it also matches.
 */
export function allowedMethods(routes: readonly RouteDefinition[]): AllowedMethods {
  const entries = [
    ...routes.map((r) => ({ method: r.method.toUpperCase(), path: r.path })),
    { method: 'GET', path: '/api/openapi.json' },
  ].map((r) => ({
    ...r,
    literal: !r.path.includes('{'),
    pattern: new RegExp(`^${r.path.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}/?$`, 'i'),
  }));
  const isLiteral = (path: string) => entries.some((e) => e.literal && e.pattern.test(path));
  const forPath = (path: string) => {
    const literal = isLiteral(path);
    const methods = entries.filter((e) => e.literal === literal && e.pattern.test(path)).map((e) => e.method);
    return methods.length > 0 ? [...new Set(methods)] : null;
  };
  return Object.assign(forPath, { isLiteral });
}

/** The `Allow` header of these methods: HEAD wherever GET is, and OPTIONS always. */
export function allowHeader(methods: readonly string[]): string {
  const all = new Set(methods);
  if (all.has('GET')) all.add('HEAD');
  all.add('OPTIONS');
  return [...all].join(', ');
}

export function methodNotAllowed(req: Request, res: Response, allowed: readonly string[]): void {
  res.set('Allow', allowHeader(allowed));
  sendError(
    res,
    405,
    HTTP_ERROR_CODES.METHOD_NOT_ALLOWED,
    `${req.method} is not allowed here; use ${allowed.join(' or ')}.`,
  );
}
