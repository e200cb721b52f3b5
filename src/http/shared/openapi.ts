/**
 * The OpenAPI description both apps serve at /docs/json, made lint-clean by construction: `npm test`
 * lints it with Redocly (`redocly.yaml`, test/http/openapi-lint.test.ts) and fails on any error.
 *
 * How a new route stays lint-clean without knowing the rules:
 * - `operationId`: derived from method + path (`GET /api/wallet/:id` → `getApiWalletById`) unless
 *   the route's schema sets one.
 * - `security`: taken from the schema when it sets one; otherwise from an auth hook the route (or
 *   its scope) runs, when that hook was tagged with `documented(hook, { security })` (the hooks of
 *   the authentication scopes are: session, bearer key, agent key, bridge secret; ./routes.ts);
 *   otherwise the route is public and gets `security: []`. A scope-wide hook must be added with
 *   `addDocumentedHook(scope, …)` (mountRoutes does) so its routes learn about it (Fastify does
 *   not show a route its scope's hooks).
 * - Standard error responses: every route gets the responses its security scheme can produce
 *   (bearer key 401/403/500, session 401, …) and those of documented hooks (e.g. 429 of a rate
 *   limit), unless the route documents that status itself; a route that validates input and
 *   documents no 4xx gets 400.
 * - Query, path and header parameters declared `z.unknown()` (validated by the service) are
 *   documented as strings, which is what they are on the wire.
 * - Tags used by operations are declared at the top level; `servers` is the app's public address.
 * What a route must still do itself: a zod schema per request part and per response (2xx
 * included), a `summary` and a `description`, and `tags`.
 * These additions change the documentation only: runtime validation and serialization use the
 * route's own schema.
 */

import type { FastifyInstance, RouteOptions } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { errorCatalogue } from '../../lib/error-codes.ts';
import { errorSchema } from './schemas.ts';

export type SecurityRequirement = Record<string, string[]>[];

/** What a hook contributes to the description of the routes it runs on. */
export type HookDoc = {
  /** the security requirement the hook enforces */
  security?: SecurityRequirement;
  /** error responses the hook can answer with: status → description */
  responses?: Record<number, string>;
};

const DOC = Symbol.for('agent-platform.openapi.hook-doc');
const SCOPE_DOC = Symbol.for('agent-platform.openapi.scope-doc');

/** Error responses each security scheme can produce (§5). */
const SCHEME_RESPONSES: Record<string, Record<number, string>> = {
  bearerKey: {
    401: '`Unauthorized`: missing `Authorization` header, missing `Bearer ` prefix or empty key (§5)',
    403: '`Forbidden`: the key does not match INTERNAL_API_KEY (§5)',
    500: '`Server misconfigured`: INTERNAL_API_KEY is not set (§5)',
  },
  agentKey: { 401: 'Missing, unknown or revoked agent key' },
  sessionCookie: { 401: 'No valid `service-session` cookie' },
  bridgeSecret: {
    401: '`unauthorized`: `x-bridge-secret` missing or wrong',
    503: '`Bridge not configured`: BRIDGE_SECRET is not set',
  },
};

/** Tags a hook with what it adds to the OpenAPI description of routes that run it. */
export function documented<F extends (...args: any[]) => unknown>(hook: F, doc: HookDoc): F {
  Object.defineProperty(hook, DOC, { value: doc, enumerable: false });
  return hook;
}

const docOf = (hook: unknown): HookDoc | undefined =>
  typeof hook === 'function' ? (hook as unknown as Record<symbol, HookDoc | undefined>)[DOC] : undefined;

/**
 * Adds a hook to every route of a scope and tells those routes' descriptions about it (a route
 * registered in the scope does not otherwise see its scope's hooks).
 */
export function addDocumentedHook(
  scope: FastifyInstance<any, any, any, any, any>,
  name: 'onRequest' | 'preValidation' | 'preHandler',
  hook: (...args: any[]) => unknown,
  doc: HookDoc | undefined = docOf(hook),
): void {
  scope.addHook(name as 'onRequest', hook as never);
  if (!doc) return;
  scope.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config ?? {}) as Record<symbol, HookDoc[] | undefined>;
    route.config = { ...config, [SCOPE_DOC]: [...(config[SCOPE_DOC] ?? []), doc] } as never;
  });
}

function hookDocs(route: RouteOptions): HookDoc[] {
  const docs: HookDoc[] = [...(((route.config ?? {}) as Record<symbol, HookDoc[] | undefined>)[SCOPE_DOC] ?? [])];
  for (const name of ['onRequest', 'preValidation', 'preHandler'] as const) {
    const hooks = route[name];
    for (const h of Array.isArray(hooks) ? hooks : [hooks]) {
      const d = docOf(h);
      if (d) docs.push(d);
    }
  }
  return docs;
}

type RouteSchema = {
  hide?: boolean;
  security?: SecurityRequirement;
  response?: Record<string | number, unknown>;
  body?: unknown;
  querystring?: unknown;
  params?: unknown;
  headers?: unknown;
};

/** `@fastify/swagger` `transform`: security and standard responses, then zod → JSON Schema. */
export function openapiTransform(input: Parameters<typeof jsonSchemaTransform>[0]) {
  const schema = input.schema as RouteSchema | undefined;
  if (!schema || schema.hide) return jsonSchemaTransform(input);
  const docs = hookDocs(input.route as RouteOptions);
  const security = schema.security ?? docs.find((d) => d.security)?.security ?? [];
  const response: Record<string, unknown> = { ...schema.response };
  const add = (status: number, text: string) => {
    if (!(String(status) in response)) response[status] = errorSchema.describe(text);
  };
  for (const requirement of security) {
    for (const scheme of Object.keys(requirement)) {
      for (const [status, text] of Object.entries(SCHEME_RESPONSES[scheme] ?? {})) add(Number(status), text);
    }
  }
  for (const d of docs) for (const [status, text] of Object.entries(d.responses ?? {})) add(Number(status), text);
  const validatesInput =
    schema.body !== undefined || schema.querystring !== undefined || schema.params !== undefined || schema.headers !== undefined;
  if (validatesInput && !Object.keys(response).some((s) => s.startsWith('4'))) add(400, 'Missing or invalid input');
  return jsonSchemaTransform({ ...input, schema: { ...schema, security, response } as never });
}

/** `GET /api/wallet/:id` → `getApiWalletById` (paths arrive in OpenAPI form, `{id}`). */
export function operationIdFor(method: string, path: string): string {
  const words = path
    .split('/')
    .filter(Boolean)
    .flatMap((segment) => {
      const param = /^\{(.+)\}$/.exec(segment) ?? /^:(.+)$/.exec(segment);
      return param ? ['by', ...param[1]!.split(/[^A-Za-z0-9]+/)] : segment.split(/[^A-Za-z0-9]+/);
    })
    .filter(Boolean);
  return method.toLowerCase() + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

/** Descriptions of the tags routes use; a tag not listed here is declared with its name only. */
const TAG_DESCRIPTIONS: Record<string, string> = {
  accounts: 'Registration, sign-in (password, OAuth, SIWE), sessions and the current user (§4.1)',
  agents: 'Agents: provisioning, lifecycle, configuration (§4.7, §4.18)',
  ai: 'AI layer: models, cost estimates, chat (§4.9)',
  bridge: 'Internal agent message bus (§4.13)',
  channels: 'Messaging channels the platform runs for agents: Telegram and Discord bots, allow lists, pairing (§2, §4.18)',
  config: 'Per-user agent configuration with versioned backups (§4.2)',
  demo: 'Demo chat without sign-in (§4.10)',
  deployments: 'Deployments and runtime instances (§4.18)',
  health: 'Health checks (§4.12)',
  heartbeat: 'Per-agent heartbeat settings (§4.12)',
  'hosting-mcp': 'Hosting MCP gateway information (§4.16)',
  keys: 'API keys (§4.3)',
  payments: 'Payments: the v1 gateway, payment sessions, top-ups (§4.4, §4.8)',
  trading: 'Trading service (§4.5)',
  wallet: 'Wallets: session wallet, stablecoin balances, custodial wallets, top-ups (§4.4)',
  webhooks: 'Webhooks received from the hosting platform and the card processor (§6)',
  workflows: 'Workflows of nodes (§4.14)',
};

const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);
const isEmptySchema = (s: unknown) => !!s && typeof s === 'object' && Object.keys(s).filter((k) => k !== 'description').length === 0;

type Operation = {
  operationId?: string;
  security?: unknown;
  tags?: string[];
  parameters?: { in: string; schema?: Record<string, unknown> }[];
};

/** `@fastify/swagger` `transformObject`: document-wide rules (see the file header). */
export function openapiTransformObject(servers: { url: string; description?: string }[]) {
  return ({ openapiObject }: { openapiObject: Record<string, any> }) => {
    const tags = new Set<string>();
    for (const [path, item] of Object.entries((openapiObject.paths ?? {}) as Record<string, Record<string, Operation>>)) {
      for (const [method, op] of Object.entries(item)) {
        if (!METHODS.has(method)) continue;
        op.operationId ??= operationIdFor(method, path);
        op.security ??= [];
        for (const t of op.tags ?? []) tags.add(t);
        for (const p of op.parameters ?? []) {
          if (isEmptySchema(p.schema)) p.schema = { ...p.schema, type: 'string' };
        }
      }
    }
    const declared = new Set(((openapiObject.tags ?? []) as { name: string }[]).map((t) => t.name));
    return {
      ...openapiObject,
      servers,
      // every error the platform raises: status, summary, and the body `code` where clients see one
      'x-error-codes': errorCatalogue(),
      tags: [
        ...(openapiObject.tags ?? []),
        ...[...tags]
          .filter((t) => !declared.has(t))
          .sort()
          .map((name) => (TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name })),
      ],
    };
  };
}
