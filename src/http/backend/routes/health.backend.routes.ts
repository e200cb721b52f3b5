/** §4.12 backend health: always 200; says whether provisioning can work. */
import { z } from 'zod';
import type { Config } from '../../../config/env.ts';
import type { RouteModule } from '../../shared/routes.ts';

/** §4.12: "provider is a fixed legacy string". */
export const LEGACY_PROVIDER = 'hosting';

export const backendHealthRoutes = (deps: { config: Pick<Config, 'configured' | 'HOSTING_DRIVER'> }): RouteModule<'public'> => {
  return {
    prefix: '',
    public: async (app) => {
      app.get('/health', {
        schema: {
          tags: ['health'],
          summary: 'Backend health',
          description:
            'Always 200. `docker` says whether a hosting driver is usable (the local driver always is; remote drivers need HOSTING_API_KEY); ' +
            '`provisioning` follows it; `provider` is a fixed legacy string. `driver` (added) names HOSTING_DRIVER.',
          response: {
            200: z.object({
              status: z.literal('ok'),
              timestamp: z.string(),
              docker: z.enum(['available', 'unavailable']),
              provisioning: z.enum(['enabled', 'disabled']),
              provider: z.string(),
              driver: z.string(),
            }),
          },
        },
        handler: async () => {
          const usable = deps.config.configured.hosting;
          return {
            status: 'ok' as const,
            timestamp: new Date().toISOString(),
            docker: usable ? ('available' as const) : ('unavailable' as const),
            provisioning: usable ? ('enabled' as const) : ('disabled' as const),
            provider: LEGACY_PROVIDER,
            driver: deps.config.HOSTING_DRIVER,
          };
        },
      });
    },
  };
};
