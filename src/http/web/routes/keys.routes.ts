/** §4.3 API keys (session), with the limits a key may carry and its roll (docs/payments.md "API keys"). */

import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { invalidKey, type KeysService, keyProfile, VALIDATION_DESCRIPTION, validateKeyBody } from '../../../domains/keys/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const keySummary = z.object({
  id: z.string(),
  name: z.string(),
  keyPreview: z.string().describe('The first 10 characters of the key (its lookup prefix)'),
  createdAt: z.string(),
  lastUsed: z.string().nullable().describe('When the key was last validated successfully; null if never'),
  agentIds: z.array(z.string()).nullable().describe('The agents the key reaches; null: every agent of yours'),
  monthlyBudgetUsd: z.number().nullable().describe("USD per UTC calendar month the key's model calls may cost; null: no budget"),
  monthToDateUsd: z.number().describe("USD the key's model calls cost since the first of this UTC month"),
  rateLimitPerMinute: z.number().nullable().describe('Requests per minute the key may make; null: no limit of its own'),
  expiresAt: z.string().nullable().describe('When the key stops working; null: never'),
  expired: z.boolean().describe('The key has expired: it is refused like a deleted key (401)'),
  rolledAt: z.string().nullable().describe('When the key was last rolled; null: never'),
  previousKeyExpiresAt: z
    .string()
    .nullable()
    .describe('Until when the secret the last roll replaced still works; null once it no longer does'),
});

const BUDGET_RULE = 'must be a number greater than 0 and at most 100000 (USD), or null';
const RATE_RULE = `must be a whole number from 1 to ${LIMITS.apiKeyRateLimitMax}, or null`;
/** The limits a key may be given (create and change): a field left out is unchanged, null removes the limit. */
const limitFields = {
  agentIds: z
    .array(z.string({ error: 'must be agent ids (strings)' }).min(1).max(64), { error: 'must be an array of agent ids, or null' })
    .max(LIMITS.apiKeyAgentsMax, { error: `at most ${LIMITS.apiKeyAgentsMax} agents` })
    .nullable()
    .optional()
    .describe(
      'Your agents the key reaches (through the agent proxy and in GET /api/agents); any other agent is 404 to it. Left out or null: all of them. ' +
        'An agent deleted later is gone from the list; a key whose agents are all deleted reaches none.',
    ),
  monthlyBudgetUsd: z
    .number({ error: BUDGET_RULE })
    .gt(0, { error: BUDGET_RULE })
    .gte(0.000001, { error: 'must be at least 0.000001 (USD): a budget is kept to 6 decimal places' })
    .max(100000, { error: BUDGET_RULE })
    .nullable()
    .optional()
    .describe(
      "USD per UTC calendar month the key's model calls may cost (the calls its agents' models make for its requests). Past it the key's " +
        'chat completions are 402 `KEY_BUDGET_EXCEEDED` (OpenAI shape: `insufficient_quota` / `key_budget_exceeded`) with a sentence.',
    ),
  rateLimitPerMinute: z
    .number({ error: RATE_RULE })
    .int({ error: RATE_RULE })
    .min(1, { error: RATE_RULE })
    .max(LIMITS.apiKeyRateLimitMax, { error: RATE_RULE })
    .nullable()
    .optional()
    .describe('Requests per minute the key may make on every route it reaches; past it 429 `KEY_RATE_LIMITED` with `Retry-After`.'),
  expiresAt: z
    .string({ error: 'must be a date and time (ISO 8601), or null' })
    .nullable()
    .optional()
    .describe(
      'When the key stops working (ISO 8601, in the future, within ten years); after it the key is 401 `Invalid API key` like a deleted one.',
    ),
};

const createBody = jsonBody({
  name: z
    .string({ error: (issue) => (issue.input === undefined ? 'Name required' : 'Name must be a string') })
    .describe(`1 to ${LIMITS.apiKeyNameMax} characters after trim`),
  ...limitFields,
});

const updateBody = jsonBody({
  name: z.string({ error: 'Name must be a string' }).optional().describe(`1 to ${LIMITS.apiKeyNameMax} characters after trim`),
  ...limitFields,
});

const rollBody = z
  .object(
    {
      graceSeconds: z
        .number({ error: `graceSeconds: must be a whole number from 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}` })
        .int({ error: `graceSeconds: must be a whole number from 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}` })
        .min(0, { error: `graceSeconds: must be a whole number from 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}` })
        .max(LIMITS.apiKeyRollGraceMaxSeconds, {
          error: `graceSeconds: must be a whole number from 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}`,
        })
        .optional()
        .describe(
          `How long the old secret keeps working, in seconds: 0 to ${LIMITS.apiKeyRollGraceMaxSeconds} (a week); default ` +
            `${LIMITS.apiKeyRollGraceDefaultSeconds} (24 hours)`,
        ),
    },
    { error: 'Request body must be a JSON object' },
  )
  // no body at all: the default grace
  .nullish();

/** A key with its secret: the answer of a create or a roll (the only two that ever carry it). */
const withSecret = keySummary.extend({ key: z.string().describe('The whole key: shown in this answer only') });

const idParams = z.object({ id: z.string() });

export const keysRoutes = ({ keys }: { keys: KeysService }): RouteModule<'session'> => ({
  prefix: '/api/keys',
  session: async (app) => {
    app.get('', {
      schema: {
        tags: ['keys'],
        summary: 'List my API keys',
        description:
          'Newest first. The raw key is never returned after creation; `keyPreview` is its first 10 characters. Each key with its ' +
          'limits (agents, monthly budget, rate limit, expiry), what its model calls cost this UTC month and when it was last used.',
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
          '`sk_` followed by 40 base64url characters from the CSPRNG; it is returned in this response only and stored as a SHA-256 hash. ' +
          '§4.3 answers `{id, name, key, createdAt}`; the platform also answers the key as GET /api/keys/:id does. Optional limits ' +
          '(docs/payments.md "API keys"): `agentIds` (only those agents), `monthlyBudgetUsd`, `rateLimitPerMinute`, `expiresAt`; ' +
          '400 with the field named for a limit that is not valid or an agent that is not yours.',
        body: createBody,
        response: { 201: withSecret, ...errorResponses(400, 401) },
      },
      handler: async (request, reply) => {
        const { name, ...limits } = request.body;
        return reply.code(201).send(await keys.create(currentUser(request).id, name, limits));
      },
    });

    app.patch('/:id', {
      schema: {
        tags: ['keys'],
        summary: "Change an API key's name or limits",
        description:
          'The fields of POST /api/keys; a field left out stays as it is, null removes that limit. Applies at once (other replicas: ' +
          'within seconds, the key cache). A budget applies to the whole UTC month, calls made before it was set included. ' +
          "400 for an invalid field, 404 for an unknown id and for another user's key alike.",
        params: idParams,
        body: updateBody,
        response: { 200: keySummary, ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => keys.update(currentUser(request).id, request.params.id, request.body),
    });

    app.post('/:id/roll', {
      schema: {
        tags: ['keys'],
        summary: 'Roll an API key: a new secret, the old one working for a grace period',
        description:
          'Answers the key with its new secret `key` (shown in this answer only, as at creation). The old secret keeps working for ' +
          `\`graceSeconds\` (default ${LIMITS.apiKeyRollGraceDefaultSeconds}, i.e. 24 hours; 0 to ${LIMITS.apiKeyRollGraceMaxSeconds}), ` +
          "then is refused like a deleted key (401 `Invalid API key`): time to move every client to the new secret. The key's id, " +
          'name, limits and usage stay. Rolling again while an old secret is still in its grace ends that one at once (one secret ' +
          "back only). 404 for an unknown id and for another user's key alike.",
        params: idParams,
        body: rollBody,
        response: { 200: withSecret, ...errorResponses(400, 401, 404) },
      },
      handler: async (request) => keys.roll(currentUser(request).id, request.params.id, request.body?.graceSeconds),
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
        response: { 200: keySummary, ...errorResponses(401, 404) },
      },
      handler: async (request) => keys.get(currentUser(request).id, request.params.id),
    });

    app.delete('/:id', {
      schema: {
        tags: ['keys'],
        summary: 'Delete one of my API keys',
        description:
          "The key stops validating at once; streams and sockets opened with it end. 404 for an unknown id and for another user's key alike.",
        params: idParams,
        response: { 200: z.object({ success: z.literal(true) }), ...errorResponses(401, 404) },
      },
      handler: async (request) => {
        await keys.remove(currentUser(request).id, request.params.id);
        return { success: true as const };
      },
    });
  },
});
