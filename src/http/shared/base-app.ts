/**
 * What both Fastify apps share: zod validation and serialization, OpenAPI 3.1 at /docs (JSON at
 * /docs/json) generated from the route schemas, request ids, redacted logs, the one error
 * handler and the body size limit. The OpenAPI description is completed by ./openapi.ts (read its
 * header before adding a route); a wrong method on a known path gets 405 (./method-not-allowed.ts).
 */
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Config } from '../../config/env.ts';
import { badRequest } from '../../lib/errors.ts';
import { registerErrorHandler, sendError } from './error-handler.ts';
import { createLogger, type LogFormat, requestIdOptions } from './logging.ts';
import { createMethodRegistry } from './method-not-allowed.ts';
import { type AppMetrics, METRICS_SECURITY_SCHEME } from './metrics.ts';
import { openapiTransform, openapiTransformObject } from './openapi.ts';

export type App = FastifyInstance<any, any, any, FastifyBaseLogger, ZodTypeProvider>;

export type BaseAppOptions = {
  title: string;
  description: string;
  version: string;
  logLevel: string;
  /** LOG_FORMAT: json, pretty, or auto (pretty when stdout is a terminal) */
  logFormat?: LogFormat;
  bodyLimit: number;
  /** TRUST_PROXY as parsed (src/config/env.ts): false, proxy addresses/CIDRs, or a hop count */
  trustProxy: false | string[] | number;
  /** extra OpenAPI security schemes (e.g. the session cookie, the bearer key) */
  securitySchemes?: Record<string, unknown>;
  /** the app's public address, the OpenAPI `servers` entry (PUBLIC_URL, BACKEND_URL) */
  serverUrl?: string;
  /** a logger instance to share (tests pass a silent one) */
  logger?: FastifyBaseLogger;
  /** slow-client timeouts (docs/security.md "Slow clients"); Node's defaults when absent */
  timeouts?: HttpTimeouts;
  /** GET /metrics (./metrics.ts): only when METRICS_TOKEN is set, so no metric hook runs otherwise */
  metrics?: AppMetrics;
};

/**
 * How long a client may take: `requestMs` for the whole request (headers and body),
 * `headersMs` for the headers, `keepAliveMs` idle between requests on one connection. None of
 * them limits a response: a Server-Sent Events stream or an upgraded WebSocket lives on.
 */
export type HttpTimeouts = { requestMs: number; headersMs: number; keepAliveMs: number };

/** The server settings both apps take from the configuration, the same way. */
export const serverSettings = (
  config: Pick<
    Config,
    | 'LOG_LEVEL'
    | 'LOG_FORMAT'
    | 'BODY_LIMIT'
    | 'TRUST_PROXY'
    | 'HTTP_REQUEST_TIMEOUT_MS'
    | 'HTTP_HEADERS_TIMEOUT_MS'
    | 'HTTP_KEEP_ALIVE_TIMEOUT_MS'
  >,
) => ({
  logLevel: config.LOG_LEVEL,
  logFormat: config.LOG_FORMAT,
  bodyLimit: config.BODY_LIMIT,
  trustProxy: config.TRUST_PROXY,
  timeouts: {
    requestMs: config.HTTP_REQUEST_TIMEOUT_MS,
    headersMs: config.HTTP_HEADERS_TIMEOUT_MS,
    keepAliveMs: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
  },
});

function timeoutOptions(t: HttpTimeouts | undefined) {
  if (!t) return {};
  const headersMs = Math.min(t.headersMs, t.requestMs); // Node refuses headersTimeout > requestTimeout
  return {
    requestTimeout: t.requestMs,
    keepAliveTimeout: t.keepAliveMs,
    // Node checks these timeouts every connectionsCheckingInterval (30 s by default, so a 10 s
    // limit could take 40 s): check often enough that a limit means roughly what it says
    http: { headersTimeout: headersMs, connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(headersMs / 4))) },
  };
}

function trustHops(hops: number) {
  return (_address: string, hop: number) => hop < hops;
}

export async function createBaseApp(options: BaseAppOptions): Promise<App> {
  const app = Fastify({
    loggerInstance: options.logger ?? (createLogger(options.logLevel, options.logFormat) as FastifyBaseLogger),
    ...requestIdOptions,
    bodyLimit: options.bodyLimit,
    // a hop count trusts the n nearest hops (what Fastify does with a number; its types only take a function)
    trustProxy: typeof options.trustProxy === 'number' ? trustHops(options.trustProxy) : options.trustProxy,
    // §7: bad input gets a JSON 4xx; a huge or deeply odd URL must not become a 5xx either
    routerOptions: { maxParamLength: 200 },
    return503OnClosing: true,
    ...timeoutOptions(options.timeouts),
    // malformed URLs (`/api/%zz`) and similar router-level failures: our JSON shape, not Fastify's
    frameworkErrors: (error, _request, reply) => {
      void sendError(reply as FastifyReply, badRequest(error.code === 'FST_ERR_BAD_URL' ? 'Malformed URL' : 'Bad request'));
    },
  }).withTypeProvider<ZodTypeProvider>();

  // first, so every route and the not-found handler run the hook
  options.metrics?.instrument(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandler(app, createMethodRegistry(app).notFound);
  acceptEmptyJsonBody(app);
  // a callback hook, not an async one: it runs on every response, and a promise per response
  // showed in the session bench (docs/benchmarks.md)
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: options.title,
        description: options.description,
        version: options.version,
        license: { name: 'MIT', identifier: 'MIT' },
        contact: { name: 'Agent platform maintainers' },
      },
      components: {
        securitySchemes: { ...options.securitySchemes, ...(options.metrics ? METRICS_SECURITY_SCHEME : {}) } as never,
      },
    },
    transform: openapiTransform,
    transformObject: openapiTransformObject(options.serverUrl ? [{ url: options.serverUrl }] : [{ url: '/' }]) as never,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  return app;
}

/**
 * Whether a JSON text could be one Fastify's parser (secure-json-parse) treats differently from
 * JSON.parse: one with a `__proto__` key, or a `constructor` key holding an object with a
 * `prototype` key (a `constructor` key alone it accepts as JSON.parse does). Either key, spelled
 * out, contains `proto`; the only other way to spell a key's letters is a `\\u` escape. A text with
 * neither substring therefore parses the same both ways. Over a ~2.5 KB chat body the two searches
 * take ~160 ns, against ~740 ns for the three of round 6 (`__proto__`, `constructor`, `\\u`: V8's
 * search skips little on `constructor`, whose last letter is common) and more for secure-json-parse's
 * two regular expressions (docs/benchmarks.md "AI proxy", round 7). Anything else still goes through the
 * full check.
 */
export function mayPoison(text: string): boolean {
  return text.includes('proto') || text.includes('\\u');
}

/**
 * A request with `Content-Type: application/json` and an empty (or blank) body has no body, not
 * an invalid one: routes that take none answer normally (§4.1 signout "always 200"); routes that
 * require one still answer their own 400 from their schema. Other JSON is parsed by Fastify's
 * own parser (prototype-poisoning protection included), or by JSON.parse when mayPoison() rules it out.
 */
function acceptEmptyJsonBody(app: App): void {
  const parseJson = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? 'error',
    app.initialConfig.onConstructorPoisoning ?? 'error',
  );
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    if (!mayPoison(text)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: the default parser below answers it, with its own 400
        return void parseJson(request, text, done);
      }
      return done(null, parsed);
    }
    // the default parser reports through `done`; it returns nothing to await
    void parseJson(request, text, done);
  });
}
