import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import type { ProxyTrust } from './origin.js';

/**
 * Who a request comes from, for limits counted per client: an IPv4 address as it is, an IPv6
 * address by its /64 prefix (one host is commonly given a whole /64, so counting single IPv6
 * addresses would let one client take billions of places), an IPv4-mapped IPv6 address as
 * IPv4. With `trustProxy` the proxy in front says who its client is: the last address of
 * `X-Forwarded-For`, the one the proxy itself appended (the ones before it are whatever the
 * client sent). Something that is no address (a Unix socket's peer) counts as one client.
 */
export function clientAddressOf(req: IncomingMessage, proxy: ProxyTrust): string {
  const forwarded = proxy.trustProxy ? lastForwarded(req.headers['x-forwarded-for']) : undefined;
  return addressGroup(forwarded ?? req.socket.remoteAddress ?? '');
}

function lastForwarded(value: string | string[] | undefined): string | undefined {
  const raw = Array.isArray(value) ? value.at(-1) : value;
  const last = raw?.split(',').at(-1)?.trim();
  return last ? last : undefined;
}

/** The group an address counts in: IPv4 alone, IPv6 by its /64. */
function addressGroup(address: string): string {
  if (!ipaddr.isValid(address)) return 'unknown';
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const hextets = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `${hextets.join(':')}::/64`;
}
