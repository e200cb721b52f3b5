/** The backend app ({backend_url}): bearer-key API for agents, deployments, the AI layer. */
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import { createBaseApp, type App } from '../shared/base-app.ts';
import { backendHealthRoutes } from './routes/health.routes.ts';

export type BackendServices = Record<string, never>;

export async function buildBackendApp(config: Config, _services: BackendServices, options: { logger?: FastifyBaseLogger } = {}): Promise<App> {
  const app = await createBaseApp({
    title: 'Agent platform — backend API',
    description:
      'The backend API ({backend_url}). Core routes need `Authorization: Bearer <INTERNAL_API_KEY>`: 401 `Unauthorized` without it, ' +
      '403 `Forbidden` for a wrong key, 500 `Server misconfigured` when the server has no key set.',
    version: '0.1.0',
    logLevel: config.LOG_LEVEL,
    bodyLimit: config.BODY_LIMIT,
    trustProxy: config.TRUST_PROXY,
    securitySchemes: { bearerKey: { type: 'http', scheme: 'bearer' } },
    ...(options.logger ? { logger: options.logger } : {}),
  });
  backendHealthRoutes(app, { config });
  return app;
}
