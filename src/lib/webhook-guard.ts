/**
 * Where the platform may POST a webhook a user chose (SSRF guard): the Underground bus's agent
 * webhooks and the spend alerts' webhooks. The URL is chosen by a user, so without this guard any
 * user could make the platform POST into its own network (metadata services, databases' HTTP
 * ports, the other app). Unless the caller allows private targets (UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS,
 * for tests and closed networks), a webhook is refused when its host is, or resolves to, any address that is not global unicast:
 * every resolved address is checked, not the first. At delivery the connection is made through a
 * lookup that checks again and connects only to the addresses it checked, so a name that resolves
 * to a public address when the message is accepted and to a private one later (DNS rebinding) is
 * still refused.
 *
 * An allow-list, not a deny-list: a range nobody thought of (a transition mechanism that embeds an
 * IPv4 address, a deprecated site-local block) is refused by default. Allowed are:
 * - IPv4 outside the special-purpose blocks below (RFC 6890 and its IANA registry);
 * - IPv6 inside 2000::/3 (global unicast, RFC 4291 §2.4) outside the special-purpose blocks below.
 * Everything else is refused, notably every form that carries an IPv4 address inside IPv6
 * (IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
 * 2002::/16, Teredo 2001::/32): whether those reach an IPv4 host depends on the network, and the
 * IPv4 inside could be loopback or the metadata address.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import type { Agent } from 'undici';
import { undici } from './undici.ts';

const ipv4Special = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast (deprecated)
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and 255.255.255.255 broadcast
] as const)
  ipv4Special.addSubnet(net, prefix, 'ipv4');

const ipv6GlobalUnicast = new BlockList();
ipv6GlobalUnicast.addSubnet('2000::', 3, 'ipv6');

const ipv6Special = new BlockList();
for (const [net, prefix] of [
  // IETF protocol assignments: Teredo (2001::/32, embeds an IPv4 address), benchmarking, ORCHID,
  // AMT, … A few of its blocks are globally reachable (anycast services); none is a webhook host.
  ['2001::', 23],
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds an IPv4 address)
  ['3fff::', 20], // documentation (RFC 9637)
] as const)
  ipv6Special.addSubnet(net, prefix, 'ipv6');

/** True when the address is global unicast: the only addresses the bus delivers to by default. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !ipv4Special.check(address, 'ipv4');
  if (family !== 6) return false;
  // BlockList judges an IPv4-mapped address by IPv4 rules too; neither list has one that admits it
  return ipv6GlobalUnicast.check(address, 'ipv6') && !ipv6Special.check(address, 'ipv6');
}

export class WebhookAddressError extends Error {
  override name = 'WebhookAddressError';
}

const notPublic = (host: string, address: string) =>
  new WebhookAddressError(
    `webhook host ${host} is or resolves to a non-public address (${address}): only global unicast addresses are allowed`,
  );

const resolveAll = (host: string) =>
  new Promise<LookupAddress[]>((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  );

/**
 * Checks what can be checked without DNS: an http(s) URL without credentials and, unless private
 * targets are allowed, an IP-literal host that is global unicast. Returns the URL and the host to
 * resolve (undefined for an IP literal or when private targets are allowed). Throws WebhookAddressError.
 */
export function checkWebhookTarget(raw: string, allowPrivate: boolean): { url: URL; name: string | undefined } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookAddressError('webhook URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookAddressError('webhook URL must be http or https');
  if (url.username || url.password) throw new WebhookAddressError('webhook URL must not carry credentials');
  if (allowPrivate) return { url, name: undefined };
  // the WHATWG parser already wrote IPv4 in dotted form (2130706433, 0x7f.1 → 127.0.0.1)
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!isIP(host)) return { url, name: host };
  if (!isPublicAddress(host)) throw notPublic(host, host);
  return { url, name: undefined };
}

/**
 * Checks a webhook URL when a message is accepted: checkWebhookTarget, and a host name that
 * resolves only to global unicast addresses. Throws WebhookAddressError with the reason.
 */
export async function checkWebhookUrl(raw: string, allowPrivate: boolean): Promise<URL> {
  const { url, name } = checkWebhookTarget(raw, allowPrivate);
  if (name === undefined) return url;
  const addresses = await resolveAll(name).then(
    (a) => a.map((x) => x.address),
    () => [],
  );
  if (addresses.length === 0) throw new WebhookAddressError(`webhook host ${name} does not resolve`);
  const bad = addresses.find((a) => !isPublicAddress(a));
  if (bad) throw notPublic(name, bad);
  return url;
}

/**
 * An undici dispatcher for deliveries: every connection's name lookup returns only addresses that
 * passed isPublicAddress (or all of them when private targets are allowed), failing otherwise, and
 * the connection is made to those very addresses (no second lookup a rebinding name could answer
 * differently). IP-literal hosts skip the lookup, so checkWebhookTarget runs before each delivery.
 * `timeoutMs` bounds the connection and each wait for the answer's headers or body. Made on the
 * first delivery (`get`), as undici is loaded then (src/lib/undici.ts).
 */
export function createGuardedDispatcher(allowPrivate: boolean, timeoutMs: number) {
  let made: Promise<Agent> | undefined;
  return {
    get: (): Promise<Agent> => (made ??= undici().then(({ Agent }) => guardedAgent(Agent, allowPrivate, timeoutMs))),
    async close(): Promise<void> {
      if (made) await (await made).close();
    },
  };
}

function guardedAgent(Agent: typeof import('undici').Agent, allowPrivate: boolean, timeoutMs: number): Agent {
  return new Agent({
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: {
      timeout: timeoutMs,
      lookup(hostname, options, callback) {
        dnsLookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
          if (err) return callback(err, '', 0);
          const list = addresses as LookupAddress[];
          if (list.length === 0) return callback(new WebhookAddressError(`webhook host ${hostname} does not resolve`), '', 0);
          const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
          if (bad) return callback(notPublic(hostname, bad.address), '', 0);
          if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
          const first = list[0] as LookupAddress;
          callback(null, first.address, first.family);
        });
      },
    },
  });
}
