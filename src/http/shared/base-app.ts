/**
 * What both Fastify apps share: zod validation and serialization, OpenAPI 3.1 at /docs (JSON at
 * /docs/json) generated from the route schemas, request ids, redacted logs, the one error
 * handler and the body size limit.
 */
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { registerErrorHandler } from './error-handler.ts';
import { loggerOptions, requestIdOptions } from './logging.ts';

export type App = FastifyInstance<any, any, any, FastifyBaseLogger, ZodTypeProvider>;

export type BaseAppOptions = {
  title: string;
  description: string;
  version: string;
  logLevel: string;
  bodyLimit: number;
  trustProxy: boolean;
  /** extra OpenAPI security schemes (e.g. the session cookie, the bearer key) */
  securitySchemes?: Record<string, unknown>;
  /** a logger instance to share (tests pass a silent one) */
  logger?: FastifyBaseLogger;
};

export async function createBaseApp(options: BaseAppOptions): Promise<App> {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: loggerOptions(options.logLevel) }),
    ...requestIdOptions,
    bodyLimit: options.bodyLimit,
    trustProxy: options.trustProxy,
    // §7: bad input gets a JSON 4xx; a huge or deeply odd URL must not become a 5xx either
    routerOptions: { maxParamLength: 200 },
    return503OnClosing: true,
    // malformed URLs (`/api/%zz`) and similar router-level failures: our JSON shape, not Fastify's
    frameworkErrors: (error, _request, reply) => {
      void (reply as FastifyReply).code(400).send({ error: error.code === 'FST_ERR_BAD_URL' ? 'Malformed URL' : 'Bad request' });
    },
  }).withTypeProvider<ZodTypeProvider>();

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandler(app);
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: options.title, description: options.description, version: options.version },
      components: { securitySchemes: (options.securitySchemes ?? {}) as never },
    },
    transform: jsonSchemaTransform,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  return app;
}
