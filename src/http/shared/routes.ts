/**
 * Route modules and authentication scopes (docs/architecture.md "Routes and scopes").
 *
 * A route module (`src/http/<app>/routes/<area>.routes.ts`) is a function of its dependencies that
 * returns a `RouteModule`: the prefix its paths live under and one Fastify plugin per
 * authentication scope it has routes in (most modules have one). Each app declares its scopes once,
 * in order, with the hook that authenticates every route of the scope: the web app `public` and
 * `session` (and `bridge`), the backend `public`, `agentKey` and `bearer`. No route attaches an
 * authentication hook of its own, so a route cannot forget one, and every authenticated route
 * answers 401 before its input is parsed or validated (the hook runs `onRequest`).
 *
 * Each module's plugin is its own encapsulation context: a hook, a parser or a rate limit a module
 * adds (the AI layer's per-IP limit, the webhooks' raw-body parsers) covers exactly its routes.
 */
import type { App } from './base-app.ts';
import { addDocumentedHook } from './openapi.ts';

/** The routes of one module in one scope. Paths are relative to the module's prefix (`''` is the prefix itself). */
export type RoutePlugin = (app: App) => Promise<void>;

export type RouteModule<Scope extends string> = {
  /** where the module's paths live, e.g. `/api/keys` */
  prefix: string;
} & { [S in Scope]?: RoutePlugin };

/** A scope's authentication: a `documented` onRequest hook (./openapi.ts), or null for public routes. */
export type ScopeHook = ((request: any, reply: any) => Promise<void>) | null;

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
  for (const name of Object.keys(scopes) as Scope[]) {
    const hook = scopes[name];
    await app.register(async (scope: App) => {
      if (hook) addDocumentedHook(scope, 'onRequest', hook);
      for (const module of modules) {
        const plugin = module ? module[name] : undefined;
        if (plugin && module) await scope.register(plugin as never, { prefix: module.prefix });
      }
    });
  }
}
