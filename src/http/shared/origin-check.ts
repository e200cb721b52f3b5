/**
 * Cross-site request refusal for the web app (docs/security.md "Cross-site requests").
 * `SameSite=Lax` alone lets same-site pages (an agent at `<id>.<AGENTS_DOMAIN>` shares the site of
 * the platform when both sit under one registrable domain) post to us with the cookie, and a
 * body-less POST (start/stop/restart, sign-out) needs no CORS preflight. So every state-changing
 * request that carries the session cookie, and every sign-in (login CSRF), must come from the
 * platform's own origin:
 *
 * - `Origin` present: it must be PUBLIC_URL's origin (with its loopback aliases, see ownOrigins)
 *   or one of CSRF_ALLOWED_ORIGINS; `null`
 *   (sandboxed frames, file:) is refused;
 * - else `Sec-Fetch-Site` present: `same-origin` or `none` (typed by the user) passes;
 *   `same-site` (agent subdomains) and `cross-site` are refused;
 * - neither header: not a browser (curl, SDKs, server-to-server), so it passes: a browser
 *   always sends one of them on a cross-origin POST.
 * Refusal is 403 `{error}` before the body is read.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { forbidden } from '../../lib/errors.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** routes that create a session without one: a forged sign-in would log the victim into the attacker's account */
const SIGN_IN_PATHS = new Set(['/api/auth/login', '/api/wallet-auth', '/api/register']);

export const CROSS_SITE_MESSAGE = 'Cross-site request refused';

const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

/**
 * PUBLIC_URL's origin, and when it is a loopback address (the default `http://localhost:3000`),
 * the other loopback names for the same scheme and port: a person who opens
 * http://127.0.0.1:3000 reaches the same server on the same machine, and no other site can be
 * served from those origins, so refusing them would only lock out the platform's own dashboard.
 */
export function ownOrigins(publicUrl: string): string[] {
  const u = new URL(publicUrl);
  if (!LOOPBACK.includes(u.hostname)) return [u.origin];
  const port = u.port ? `:${u.port}` : '';
  return [u.origin, ...LOOPBACK.map((h) => `${u.protocol}//${h}${port}`)];
}

export function createOriginCheck(options: { publicUrl: string; allowedOrigins?: readonly string[]; sessionCookie: string }) {
  const allowed = new Set([...ownOrigins(options.publicUrl), ...(options.allowedOrigins ?? []).map((o) => new URL(o).origin)]);
  /** Throws 403 for a refused request; `hook` below is what the web app registers. */
  function refuseCrossSite(request: FastifyRequest): void {
    if (SAFE_METHODS.has(request.method)) return;
    const path = request.url.split('?', 1)[0]!;
    const cookieHeader = request.headers.cookie;
    const hasSession = typeof cookieHeader === 'string' && cookieHeader.includes(`${options.sessionCookie}=`);
    if (!hasSession && !SIGN_IN_PATHS.has(path)) return;
    const origin = request.headers.origin;
    if (typeof origin === 'string') {
      if (!allowed.has(origin)) throw forbidden(CROSS_SITE_MESSAGE);
      return;
    }
    const site = request.headers['sec-fetch-site'];
    if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') throw forbidden(CROSS_SITE_MESSAGE);
  }
  // a callback hook, not an async one: it runs on every web request and decides synchronously
  const hook = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    try {
      refuseCrossSite(request);
    } catch (err) {
      done(err as Error);
      return;
    }
    done();
  };
  return { check: refuseCrossSite, hook };
}
