/**
 * 405 for a known path asked with a method it does not serve, with an `Allow` header listing the
 * methods it does (RFC 9110 §15.5.6); 404 stays for unknown paths. Fastify's router answers both
 * with its not-found handler, so the routes are recorded here as they are registered and matched
 * against the path of a not-found request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { AppError, notFound as notFoundError } from '../../lib/errors.ts';
import { sendError } from './error-handler.ts';

type Pattern = { segments: string[]; wildcard: boolean; methods: Set<string> };

export function createMethodRegistry(app: FastifyInstance<any, any, any, any, any>) {
  const patterns = new Map<string, Pattern>();
  app.addHook('onRoute', (route: RouteOptions) => {
    const url = route.url;
    // host-constrained routes (an agent's own host, docs/agents.md) serve other hosts' paths: not
    // methods of the platform's paths
    if (!url || (route.constraints && Object.keys(route.constraints).length > 0)) return;
    let p = patterns.get(url);
    if (!p) {
      const wildcard = url.endsWith('*');
      p = { segments: (wildcard ? url.slice(0, -1) : url).split('/'), wildcard, methods: new Set() };
      patterns.set(url, p);
    }
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) p.methods.add(m.toUpperCase());
  });

  const matches = (p: Pattern, parts: string[]) => {
    if (p.wildcard ? parts.length < p.segments.length - 1 : parts.length !== p.segments.length) return false;
    return p.segments.every((seg, i) => {
      if (p.wildcard && i === p.segments.length - 1) return true; // the `*` tail
      if (seg.startsWith(':')) return parts[i] !== undefined && parts[i] !== '';
      return seg === parts[i];
    });
  };

  /** The methods served at `path`, sorted; empty for an unknown path. */
  function allowed(path: string): string[] {
    const parts = path.split('/');
    const methods = new Set<string>();
    for (const p of patterns.values()) if (matches(p, parts)) for (const m of p.methods) methods.add(m);
    return [...methods].sort();
  }

  /** The not-found handler: 405 + `Allow` for a known path, else 404. */
  function notFound(request: FastifyRequest, reply: FastifyReply) {
    const path = request.url.split('?')[0] ?? '';
    const methods = allowed(path);
    if (methods.length > 0 && !methods.includes(request.method)) {
      return sendError(reply.header('allow', methods.join(', ')), new AppError('METHOD_NOT_ALLOWED', 'Method not allowed'));
    }
    return sendError(reply, notFoundError());
  }

  return { allowed, notFound };
}
