/**
 * Which headers pass through the authenticated gateway proxy (`./agent-proxy.service.ts`,
 * docs/agents.md "Agent content and streams"): an agent is not trusted with the platform's origin,
 * so what it answers cannot set policy for it, and nothing a browser would run is served as a page.
 */
import { KEY_ID_HEADER } from '../../../config/limits.ts';

/**
 * Request headers never forwarded: hop-by-hop, our credentials, what undici sets itself, and the
 * header that names the caller's key to the agent, which only the proxy sets (a client sending it
 * would charge its calls to another of its owner's keys).
 */
export const DROP_REQUEST = new Set([
  'host',
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'cookie',
  'authorization',
  'proxy-authorization',
  'content-length',
  'expect',
  KEY_ID_HEADER,
]);
/**
 * Response headers never passed on: hop-by-hop ones, and those by which an answer would set policy
 * for the platform's whole origin — cookies, wiping its storage, HSTS, its own CSP, a credentials
 * prompt, a timed redirect — plus every `access-control-*` header, and `Location`, which
 * `proxiedLocation` decides (an agent does not decide who
 * may read the platform's answers).
 */
const DROP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'set-cookie',
  'clear-site-data',
  'strict-transport-security',
  'content-security-policy',
  'content-security-policy-report-only',
  'x-content-type-options',
  'www-authenticate',
  'proxy-authenticate',
  'refresh',
  // names a URL as the answer's own; browsers do not follow it, and one off the agent's paths says nothing true
  'content-location',
  // rewritten or dropped by proxiedLocation
  'location',
]);
export const dropResponseHeader = (name: string) => DROP_RESPONSE.has(name) || name.startsWith('access-control-');

/** On every proxied answer: no sniffing, and no script, style, frame or request if a browser renders it anyway. */
export const CONTAINMENT_HEADERS = { 'x-content-type-options': 'nosniff', 'content-security-policy': "sandbox; default-src 'none'" };
/**
 * Media types a browser shows as data and never runs, passed on as they are: what the agent's API
 * answers (JSON, event streams, text, bytes, images and audio). Any other type — HTML, SVG, XML,
 * scripts, or none — becomes a download (`application/octet-stream`, `Content-Disposition: attachment`).
 */
const INERT_TYPES =
  /^(application\/(json|x-ndjson|octet-stream)|text\/(event-stream|plain)|image\/(png|jpeg|gif|webp|avif)|audio\/[a-z0-9.+-]+)$/;
export const isInert = (contentType: string | string[] | undefined) =>
  typeof contentType === 'string' && INERT_TYPES.test(contentType.split(';', 1)[0]!.trim().toLowerCase());

/** The statuses a browser follows `Location` for; without a usable one the platform answers them itself. */
export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** Where an agent's relative URLs are resolved: a name no real host has, so nothing resolves to it by accident. */
const AGENT_SPACE = 'http://agent.invalid';

/** Where the agent's answer was asked for, and where its paths are mounted on the platform. */
export type ProxiedPlace = {
  /** the path the agent was asked for, in its own space (`/v1/…`) */
  path: string;
  /** where the agent's paths are on the platform: `/api/agents/<id>`, or '' on its own `<id>.<AGENTS_DOMAIN>` host */
  prefix: string;
  /** the agent's gateway base URL (a runtime that writes absolute URLs writes them on its origin) */
  gateway: string;
  /** the platform's own origins (PUBLIC_URL and CSRF_ALLOWED_ORIGINS) */
  platformOrigins: ReadonlySet<string>;
};

/**
 * The `Location` to pass on for an agent's answer, or undefined to drop it (docs/agents.md "Agent
 * content and streams", the open redirect N26). A redirect on the platform's origin is the
 * platform's word: an agent must not turn a platform link into one to another site. So only a
 * place among the agent's own paths passes, under the prefix it is proxied at:
 * - a relative reference, resolved against the path asked for (`../` cannot climb out of the prefix:
 *   it is resolved in the agent's space first);
 * - an absolute URL on the agent's gateway origin (what a runtime writes from its Host header);
 * - an absolute URL on a platform origin already under this agent's prefix.
 * Anything else (another host, a scheme-relative `//host`, another scheme, two values) is dropped.
 */
export function proxiedLocation(location: string | string[] | undefined, place: ProxiedPlace): string | undefined {
  if (typeof location !== 'string') return undefined;
  const base = new URL(AGENT_SPACE);
  base.pathname = place.path;
  let url: URL;
  try {
    url = new URL(location, base);
  } catch {
    return undefined;
  }
  // a path that starts with `//` would be read by the browser as another host
  const rest = `${url.pathname.replace(/^\/+/, '/')}${url.search}${url.hash}`;
  if (url.origin === AGENT_SPACE || url.origin === new URL(place.gateway).origin) return `${place.prefix}${rest}`;
  if (place.prefix && place.platformOrigins.has(url.origin) && rest.startsWith(`${place.prefix}/`)) return rest;
  return undefined;
}
