/**
 * Where the Underground bus may deliver (SSRF guard). An agent's webhook URL is chosen by its owner,
 * so without this guard any user could make the backend POST into its own network (metadata
 * services, databases' HTTP ports, the other app). Unless UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS is set,
 * a webhook is refused when its host is, or resolves to, any address that is not public unicast:
 * every resolved address is checked, not the first. At delivery the connection is made through a
 * lookup that checks again and connects only to the addresses it checked, so a name that resolves
 * to a public address when the message is accepted and to a private one later (DNS rebinding) is
 * still refused.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent } from 'undici';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96], // NAT64 (embeds IPv4)
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/** True when the address may be reached from the public internet (IPv4-mapped IPv6 judged as its IPv4). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped?.[1]) return isPublicAddress(mapped[1]);
    if (/^::ffff:/i.test(address)) return false; // hex-written mapped form: refuse rather than parse
    return !blocked.check(address, 'ipv6');
  }
  return !blocked.check(address, 'ipv4');
}

export class WebhookAddressError extends Error {
  override name = 'WebhookAddressError';
}

const resolveAll = (host: string) =>
  new Promise<LookupAddress[]>((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * Checks a webhook URL: http(s) only, and (unless private targets are allowed) a host that is or
 * resolves only to public addresses. Throws WebhookAddressError with the reason.
 */
export async function checkWebhookUrl(raw: string, allowPrivate: boolean): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookAddressError('webhook URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookAddressError('webhook URL must be http or https');
  if (url.username || url.password) throw new WebhookAddressError('webhook URL must not carry credentials');
  if (allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host)
    ? [host]
    : await resolveAll(host).then(
        (a) => a.map((x) => x.address),
        () => [],
      );
  if (addresses.length === 0) throw new WebhookAddressError(`webhook host ${host} does not resolve`);
  const bad = addresses.find((a) => !isPublicAddress(a));
  if (bad) throw new WebhookAddressError(`webhook host ${host} resolves to a private or loopback address (${bad})`);
  return url;
}

/**
 * An undici dispatcher for deliveries: every connection's name lookup returns only addresses that
 * passed isPublicAddress (or all of them when private targets are allowed), failing otherwise.
 * IP-literal hosts skip the lookup, so checkWebhookUrl runs before each delivery too.
 */
export function createGuardedDispatcher(allowPrivate: boolean, timeoutMs: number): Agent {
  return new Agent({
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: {
      timeout: timeoutMs,
      lookup(hostname, options, callback) {
        dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
          if (err) return callback(err, '', 0);
          const list = addresses as LookupAddress[];
          const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
          if (bad || list.length === 0)
            return callback(new WebhookAddressError(`webhook host ${hostname} resolves to a private or loopback address`), '', 0);
          if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
          const first = list[0] as LookupAddress;
          callback(null, first.address, first.family);
        });
      },
    },
  });
}
