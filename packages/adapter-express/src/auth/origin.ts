import type { IncomingMessage } from 'node:http';

/** Whether the router believes `X-Forwarded-Proto` and `X-Forwarded-Host` (set it only behind a proxy that sets them). */
export interface ProxyTrust {
  trustProxy: boolean;
}

/** The first value of a header that may be repeated or a comma-separated list. */
function firstValue(value: string | string[] | undefined): string | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  const first = raw?.split(',')[0]?.trim();
  return first ? first : undefined;
}

/**
 * The origin the browser sees for a request: its scheme and host. With `trustProxy`, a proxy in
 * front says them (`X-Forwarded-Proto`, `X-Forwarded-Host`); without it only the connection
 * and the Host header count, so a client cannot claim https or another host by a header.
 */
export function requestOrigin(req: IncomingMessage, proxy: ProxyTrust): { protocol: 'http' | 'https'; origin: string } {
  const forwardedProto = proxy.trustProxy ? firstValue(req.headers['x-forwarded-proto'])?.toLowerCase() : undefined;
  const direct = directProtocol(req);
  const protocol = (forwardedProto ?? direct) === 'https' ? 'https' : 'http';
  const host = (proxy.trustProxy ? firstValue(req.headers['x-forwarded-host']) : undefined) ?? req.headers.host ?? '';
  return { protocol, origin: `${protocol}://${host}` };
}

/** The scheme of the connection: Express's `req.protocol` when it is a request of an app (it honours the app's own 'trust proxy'), else the socket's. */
function directProtocol(req: IncomingMessage): string {
  const express = req as IncomingMessage & { app?: unknown; protocol?: string };
  if (express.app) return express.protocol ?? 'http';
  return (req.socket as { encrypted?: boolean } | null)?.encrypted ? 'https' : 'http';
}
