/**
 * Which headers pass through the authenticated gateway proxy (`src/http/web/routes/agent-proxy.routes.ts`,
 * docs/agents.md "Agent content and streams"): an agent is not trusted with the platform's origin,
 * so what it answers cannot set policy for it, and nothing a browser would run is served as a page.
 */

/** Request headers never forwarded: hop-by-hop, our credentials, and what undici sets itself. */
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
]);
/**
 * Response headers never passed on: hop-by-hop ones, and those by which an answer would set policy
 * for the platform's whole origin — cookies, wiping its storage, HSTS, its own CSP, a credentials
 * prompt, a timed redirect — plus every `access-control-*` header (an agent does not decide who
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
