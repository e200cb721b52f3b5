/** The web app ({base_url}): cookie sessions, accounts, dashboard APIs. */
import fastifyCookie from '@fastify/cookie';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../config/env.ts';
import type { AccountsService } from '../../domains/accounts/accounts.service.ts';
import type { HealthService } from '../../domains/health/health.service.ts';
import { createBaseApp, type App } from '../shared/base-app.ts';
import { createSessionAuth, SESSION_COOKIE, type SessionAuth } from '../shared/session.ts';
import { accountsRoutes } from './routes/accounts.routes.ts';
import { webHealthRoutes } from './routes/health.routes.ts';

export type WebServices = { accounts: AccountsService; health: HealthService };

export async function buildWebApp(config: Config, services: WebServices, options: { logger?: FastifyBaseLogger } = {}): Promise<App> {
  const app = await createBaseApp({
    title: 'Agent platform — web API',
    description:
      'The web API ({base_url}). Most routes authenticate with the `service-session` cookie set by /api/auth/login or /api/wallet-auth. ' +
      'Errors are JSON `{error}` with `code` where the specification names one.',
    version: '0.1.0',
    logLevel: config.LOG_LEVEL,
    bodyLimit: config.BODY_LIMIT,
    trustProxy: config.TRUST_PROXY,
    securitySchemes: { sessionCookie: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE } },
    ...(options.logger ? { logger: options.logger } : {}),
  });
  await app.register(fastifyCookie);
  const session: SessionAuth = createSessionAuth(services.accounts, { secure: config.secureCookies });
  accountsRoutes(app, { accounts: services.accounts, session });
  webHealthRoutes(app, { health: services.health, session });
  return app;
}
