/**
 * Route modules and authentication scopes (docs/architecture.md "Routes and scopes").
 *
 * A route module (`src/http/<app>/routes/<area>.routes.ts`) is a function of its dependencies that
 * returns a `RouteModule`: the prefix its paths live under and one Fastify plugin per
 * authentication scope it has routes in (most modules have one). Each app declares its scopes once,
 * in order, with the hook that authenticates every route of the scope: the web app `public`,
 * `session`, `admin` (a session of an admin) and `bridge`, the backend `public`, `agentKey` and `bearer`. No route attaches an
 * authentication hook of its own, so a route cannot forget one, and every authenticated route
 * answers 401 before its input is parsed or validated (the hook runs `onRequest`).
 *
 * Each module's plugin is its own encapsulation context: a hook, a parser or a rate limit a module
 * adds (the AI layer's per-IP limit, the webhooks' raw-body parsers) covers exactly its routes.
 *
 * `mountRoutes` also records each route it mounts (method, path, scope, declaring file) for the
 * route map, docs/routes.md (`npm run routes:map`, `mountedRoutes` below); recording changes no route.
 */
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RouteOptions } from 'fastify';
import type { App } from './base-app.ts';
import { addDocumentedHook } from './openapi.ts';

/** The routes of one module in one scope. Paths are relative to the module's prefix (`''` is the prefix itself). */
export type RoutePlugin = (app: App) => Promise<void>;

export type RouteModule<Scope extends string> = {
  /** where the module's paths live, e.g. `/api/keys` */
  prefix: string;
} & { [S in Scope]?: RoutePlugin };

/** A scope's authentication: a `documented` onRequest hook (./openapi.ts), async or callback style, or null for public routes. */
export type ScopeHook =
  | ((request: any, reply: any) => Promise<void>)
  | ((request: any, reply: any, done: (err?: Error) => void) => void)
  | null;

/**
 * Registers every module's plugins in their scopes: one child context per scope carrying its
 * hook, one grandchild per module under its prefix. Modules that a deployment does not configure
 * are passed as `false`/`undefined` and skipped.
 */
export async function mountRoutes<Scope extends string>(
  app: App,
  scopes: Record<Scope, ScopeHook>,
  modules: ReadonlyArray<RouteModule<NoInfer<Scope>> | false | undefined>,
): Promise<void> {
  if (!app.hasDecorator(MOUNTED)) app.decorate(MOUNTED, []);
  const mounted = app.getDecorator<MountedRoute[]>(MOUNTED);
  for (const name of Object.keys(scopes) as Scope[]) {
    const hook = scopes[name];
    await app.register(async (scope: App) => {
      if (hook) addDocumentedHook(scope, 'onRequest', hook);
      scope.addHook('onRoute', (route: RouteOptions) => {
        mounted.push(record(route, name));
      });
      for (const module of modules) {
        const plugin = module ? module[name] : undefined;
        if (plugin && module) await scope.register(plugin as never, { prefix: module.prefix });
      }
    });
  }
}

/** One route as `mountRoutes` registered it: a row of docs/routes.md (scripts/route-map.ts). */
export type MountedRoute = {
  method: string;
  /** the full path, prefix included, as Fastify matches it */
  url: string;
  scope: string;
  /** a host constraint (the agent proxy's own hosts, docs/agents.md), when the route has one */
  host?: string;
  /** the source file that declared the route, relative to the repository (undefined when unknown, e.g. bundled code) */
  readonly file: string | undefined;
};

const MOUNTED = Symbol('mountedRoutes');
const REPO = resolve(import.meta.dirname, '../../..');
const ROUTE_FILE = /(?:file:\/\/)?(\/[^\s()]*\/src\/http\/[^\s():]*\.ts)/g;

/**
 * The routes `mountRoutes` registered on `app`, in registration order (HEAD routes Fastify adds
 * for every GET included). Only scripts/route-map.ts and its test read this; the apps never do.
 */
export function mountedRoutes(app: App): readonly MountedRoute[] {
  return app.hasDecorator(MOUNTED) ? app.getDecorator<MountedRoute[]>(MOUNTED) : [];
}

/**
 * Fastify does not say which file declared a route, so the hook keeps the call stack of the
 * declaration (an Error, cheap until read) and the file is read from it only when asked: the
 * innermost frame in `src/http/` other than this file, preferring a `*.routes.ts` module.
 */
function record(route: RouteOptions, scope: string): MountedRoute {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 40; // hook → Fastify's route() internals → the module's plugin
  const site = new Error('route declared here');
  Error.stackTraceLimit = limit;
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  const host = (route.constraints as { host?: unknown } | undefined)?.host;
  return {
    method: methods.join(', '),
    url: route.url,
    scope,
    ...(host === undefined ? {} : { host: String(host) }),
    get file() {
      const frames = [...(site.stack ?? '').matchAll(ROUTE_FILE)].map((m) => m[1]!).filter((f) => !f.endsWith('/shared/routes.ts'));
      const found = frames.find((f) => f.endsWith('.routes.ts')) ?? frames[0];
      return found ? relative(REPO, fileURLToPath(`file://${found}`)) : undefined;
    },
  };
}
