/** Backend API key validation (§4.3 flow; the shape, "not shown" in §4.18, is documented here). Bearer key. */

import { invalidKey, type KeysService, keyProfile, VALIDATION_DESCRIPTION, validateKeyBody } from '../../../domains/keys/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';

/** Register inside the bearer-protected scope. */
export const backendKeysRoutes = (deps: { keys: KeysService }): RouteModule<'bearer'> => {
  return {
    prefix: '/api',
    bearer: async (app) => {
      app.post('/validate-key', {
        schema: {
          tags: ['keys'],
          summary: 'Validate a user API key',
          description:
            "For agents and services holding a user's `sk_` key (needs the bearer key). Body `{apiKey}`; 200 " +
            '`{valid:true, userId, email, plan, subscriptionStatus, features[]}`. ' +
            VALIDATION_DESCRIPTION +
            ' Bearer-key failures answer as on every core route (401 `Unauthorized`, 403 `Forbidden`, 500 `Server misconfigured`).',
          body: validateKeyBody,
          response: { 200: keyProfile, 401: invalidKey, ...errorResponses(400, 403, 500) },
        },
        handler: async (request, reply) => {
          const result = await deps.keys.validate(request.body.apiKey);
          return result.valid ? result : reply.code(401).send(result);
        },
      });
    },
  };
};
