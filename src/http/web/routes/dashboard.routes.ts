/**
 * Serves the built dashboard (dashboard/, docs/dashboard.md) from the web app: the single page at
 * `/`, `/login` and `/dashboard/*` (the addresses the specification redirects to) and
 * `/reset-password` (the mailed password reset link), its hashed
 * assets under `/assets/`. The build is a few hundred KB, so it is read into memory once at start
 * with a gzip copy of each text file: a request is a map lookup, never a disk read, and no path
 * from the request ever reaches the file system (no traversal to guard against).
 *
 * Caching: the page itself `no-cache` (a new build shows at the next load), hashed assets
 * `immutable` for a year. The page gets a strict Content-Security-Policy: scripts, styles and
 * requests only from this origin, no framing.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { notFound } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.txt']);

export const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

type File = { body: Buffer; gzip: Buffer | undefined; type: string; etag: string };

function load(dir: string): Map<string, File> {
  const files = new Map<string, File>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else {
        const ext = extname(name);
        const body = readFileSync(full);
        const gz = COMPRESSIBLE.has(ext) && body.length > 512 ? gzipSync(body, { level: 9 }) : undefined;
        files.set(`/${relative(dir, full).split(sep).join('/')}`, {
          body,
          gzip: gz,
          type: TYPES[ext] ?? 'application/octet-stream',
          etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
        });
      }
    }
  };
  walk(dir);
  return files;
}

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Dashboard not built</title>
<p>The dashboard has not been built. Run <code>npm run build:dashboard</code> (or <code>npm start</code>, which builds it when missing) and reload.
The API works without it: see <a href="/docs">/docs</a>.</p>`;

export const dashboardRoutes = (deps: { distDir: string }): RouteModule<'public'> => ({
  prefix: '',
  public: async (app) => {
    const files = existsSync(join(deps.distDir, 'index.html')) ? load(deps.distDir) : undefined;

    const send = (request: FastifyRequest, reply: FastifyReply, file: File, cache: string) => {
      reply.header('cache-control', cache).header('etag', file.etag).header('x-content-type-options', 'nosniff').type(file.type);
      if (file.type.startsWith('text/html')) {
        // the password reset page's address holds its token: no Referer at all from it (docs/security.md "Password reset")
        const referrer = request.routeOptions.url === '/reset-password' ? 'no-referrer' : 'same-origin';
        reply.header('content-security-policy', DASHBOARD_CSP).header('x-frame-options', 'DENY').header('referrer-policy', referrer);
      }
      if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
      reply.header('vary', 'accept-encoding');
      if (file.gzip && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
        return reply.header('content-encoding', 'gzip').send(file.gzip);
      }
      return reply.send(file.body);
    };

    const page = async (request: FastifyRequest, reply: FastifyReply) => {
      const index = files?.get('/index.html');
      if (!index) return reply.code(503).header('cache-control', 'no-store').type('text/html; charset=utf-8').send(NOT_BUILT);
      return send(request, reply, index, 'no-cache');
    };
    const hidden = { schema: { hide: true } };
    for (const path of ['/', '/login', '/reset-password', '/dashboard', '/dashboard/*']) app.get(path, hidden, page);

    app.get('/assets/*', hidden, async (request, reply) => {
      const file = files?.get(request.url.split('?')[0]!);
      if (!file) throw notFound();
      return send(request, reply, file, 'public, max-age=31536000, immutable');
    });
    // top-level files of the build (favicon.svg, robots.txt): short cache, they keep their names
    for (const [path, file] of files ?? []) {
      if (path.indexOf('/', 1) === -1 && path !== '/index.html')
        app.get(path, hidden, async (request, reply) => send(request, reply, file, 'public, max-age=3600'));
    }
  },
});
