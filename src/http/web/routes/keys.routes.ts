/** §4.3 API keys (session). */

import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { invalidKey, type KeysService, keyProfile, VALIDATION_DESCRIPTION, validateKeyBody } from '../../../domains/keys/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const keySummary = z.object({
  id: z.string(),
  name: z.string(),
  keyPreview: z.string().describe('The first 10 characters of the key (its lookup prefix)'),
  createdAt: z.string(),
  lastUsed: z.string().nullable().describe('When the key was last validated successfully; null if never'),
});

const createBody = jsonBody({
  name: z
    .string({ error: (issue) => (issue.input === undefined ? 'Name required' : 'Name must be a string') })
    .describe(`1 to ${LIMITS.apiKeyNameMax} characters after trim`),
});

const idParams = z.object({ id: z.string() });

export const keysRoutes = ({ keys }: { keys: KeysService }): RouteModule<'session'> => ({
  prefix: '/api/keys',
  session: async (app) => {
    app.get('', {
      schema: {
        tags: ['keys'],
        summary: 'List my API keys',
        description: 'Newest first. The raw key is never returned after creation; `keyPreview` is its first 10 characters.',
        response: { 200: z.object({ keys: z.array(keySummary) }), 401: errorSchema },
      },
      handler: async (request) => ({ keys: await keys.list(currentUser(request).id) }),
    });

    app.post('', {
      schema: {
        tags: ['keys'],
        summary: 'Create an API key',
        description:
          `\`name\` is required, 1 to ${LIMITS.apiKeyNameMax} characters after trim (400 \`Name required\` / too long). The key is ` +
          '`sk_` followed by 40 base64url characters from the CSPRNG; it is returned in this response only and stored as a SHA-256 hash.',
        body: createBody,
        response: {
          201: z.object({ id: z.string(), name: z.string(), key: z.string(), createdAt: z.string() }),
          400: errorSchema,
          401: errorSchema,
        },
      },
      handler: async (request, reply) => reply.code(201).send(await keys.create(currentUser(request).id, request.body.name)),
    });

    app.post('/validate', {
      schema: {
        tags: ['keys'],
        summary: 'Validate an API key',
        description:
          'Marked "planned; unavailable" in §4.3; implemented here with the same service call as the backend\'s POST /api/validate-key. ' +
          'Needs a session (the section is S); the key may belong to any user, since holding it is the credential. ' +
          VALIDATION_DESCRIPTION,
        body: validateKeyBody,
        response: { 200: keyProfile, 400: errorSchema, 401: invalidKey },
      },
      handler: async (request, reply) => {
        const result = await keys.validate(request.body.apiKey);
        return result.valid ? result : reply.code(401).send(result);
      },
    });

    app.get('/:id', {
      schema: {
        tags: ['keys'],
        summary: 'One of my API keys',
        description: "404 for an unknown id and for another user's key alike.",
        params: idParams,
        response: { 200: keySummary, 401: errorSchema, 404: errorSchema },
      },
      handler: async (request) => keys.get(currentUser(request).id, request.params.id),
    });

    app.delete('/:id', {
      schema: {
        tags: ['keys'],
        summary: 'Delete one of my API keys',
        description: "The key stops validating at once. 404 for an unknown id and for another user's key alike.",
        params: idParams,
        response: { 200: z.object({ success: z.literal(true) }), 401: errorSchema, 404: errorSchema },
      },
      handler: async (request) => {
        await keys.remove(currentUser(request).id, request.params.id);
        return { success: true as const };
      },
    });
  },
});
