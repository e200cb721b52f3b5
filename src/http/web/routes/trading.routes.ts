/** §4.5 trading service: the personal trading key and calls passed through to the trading service. */

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import { isTradingJobId, type TradingService } from '../../../domains/trading/index.ts';
import { badRequest } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const success = z.object({ success: z.literal(true) });
const passthrough = z.unknown().describe("The trading service's JSON body, unchanged");
const needsKeyError = errorSchema.describe(
  '503: `{error, needsKey:true}` when neither a personal key nor TRADING_API_KEY exists; `{error}` when TRADING_API_URL is unset, ' +
    'the trading service is unreachable, or it does not answer within TRADING_TIMEOUT_MS',
);
const upstreamError = errorSchema.describe(
  '500: the trading service answered a non-2xx status (`upstreamStatus` gives it) or a body that is not JSON',
);
const PASSTHROUGH_NOTE =
  'Key resolution (§4.5): the personal key, else the platform key TRADING_API_KEY, else 503 `{error, needsKey:true}`. ' +
  'The key travels as `Authorization: Bearer <key>`; each call has a TRADING_TIMEOUT_MS deadline (default 15 s). ' +
  'A 2xx answer is passed through with its status and JSON body; a non-2xx answer or invalid JSON gives 500; unreachable or timed out gives 503.';

const APIKEY_REQUIRED = 'API key required';
const keyBody = jsonBody({
  apiKey: z
    .string({ error: APIKEY_REQUIRED })
    .trim()
    .min(1, { error: APIKEY_REQUIRED })
    .max(LIMITS.tradingKeyMax, { error: `API key must be at most ${LIMITS.tradingKeyMax} characters` }),
});

const PROMPT_REQUIRED = 'Prompt required';
const promptBody = jsonBody({
  prompt: z
    .string({ error: PROMPT_REQUIRED })
    .trim()
    .min(1, { error: PROMPT_REQUIRED })
    .max(LIMITS.tradingPromptMax, { error: `Prompt must be at most ${LIMITS.tradingPromptMax} characters` }),
  threadId: z
    .string({ error: 'Invalid threadId' })
    .min(1, { error: 'Invalid threadId' })
    .max(LIMITS.tradingIdMax, { error: `Invalid threadId: at most ${LIMITS.tradingIdMax} characters` })
    .optional()
    .describe('Continues an earlier conversation thread of the trading service'),
});

const CHAIN = /^[A-Za-z0-9_-]{1,32}$/;
const balancesQuery = z.object({
  chains: z
    .string()
    .max(1000, { error: 'Invalid chains' })
    .optional()
    .describe(`Comma-separated chain names; default \`${LIMITS.tradingDefaultChains.join(',')}\``),
});
const jobQuery = z.object({
  jobId: z
    .string()
    .optional()
    .describe(
      'Job id returned by POST /api/trading/prompt (required): letters, digits and `.`, `_`, `:`, `-`, starting with a letter or digit',
    ),
});

/** §4.5 `chains`: comma list, default list when absent or empty. */
function parseChains(raw: string | undefined): string[] {
  const chains = (raw ?? '')
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  if (chains.length === 0) return [...LIMITS.tradingDefaultChains];
  if (chains.length > LIMITS.tradingChainsMax || !chains.every((c) => CHAIN.test(c))) throw badRequest('Invalid chains');
  return chains;
}

export const tradingRoutes = (deps: { trading: TradingService }): RouteModule<'session'> => {
  const { trading } = deps;
  const userId = async (request: FastifyRequest) => currentUser(request).id;

  return {
    prefix: '/api',
    session: async (app) => {
      app.get('/user/trading-key', {
        schema: {
          tags: ['trading'],
          summary: 'Whether a personal trading key is saved',
          description: 'Never returns the key itself (it is stored AES-256-GCM encrypted with SECRETS_ENCRYPTION_KEY).',
          response: { 200: z.object({ configured: z.boolean() }), 401: errorSchema },
        },
        handler: async (request) => ({ configured: await trading.hasKey(await userId(request)) }),
      });

      app.post('/user/trading-key', {
        schema: {
          tags: ['trading'],
          summary: 'Save the personal trading key',
          description: `\`apiKey\`: non-empty after trim, at most ${LIMITS.tradingKeyMax} characters (§8). Replaces an existing key. Encrypted at rest; never returned.`,
          body: keyBody,
          response: { 200: success, ...errorResponses(400, 401) },
        },
        handler: async (request) => {
          await trading.saveKey(await userId(request), request.body.apiKey);
          return { success: true as const };
        },
      });

      app.delete('/user/trading-key', {
        schema: {
          tags: ['trading'],
          summary: 'Delete the personal trading key',
          description: 'Later trading calls fall back to the platform key (TRADING_API_KEY). Succeeds when no key was saved.',
          response: { 200: success, 401: errorSchema },
        },
        handler: async (request) => {
          await trading.deleteKey(await userId(request));
          return { success: true as const };
        },
      });

      app.get('/trading/balances', {
        schema: {
          tags: ['trading'],
          summary: 'Balances from the trading service',
          description: `Calls \`GET {TRADING_API_URL}/balances?chains=<list>\`. ${PASSTHROUGH_NOTE}`,
          querystring: balancesQuery,
          response: { 200: passthrough, 500: upstreamError, 503: needsKeyError, ...errorResponses(400, 401) },
        },
        handler: async (request, reply) => {
          const chains = parseChains(request.query.chains);
          const r = await trading.balances(await userId(request), chains);
          return reply.code(r.status as 200).send(r.body);
        },
      });

      app.post('/trading/prompt', {
        schema: {
          tags: ['trading'],
          summary: 'Send a prompt to the trading agent',
          description: `Calls \`POST {TRADING_API_URL}/prompt\` with \`{prompt, threadId?}\`; the answer (typically a job id) is passed through. ${PASSTHROUGH_NOTE}`,
          body: promptBody,
          response: { 200: passthrough, 500: upstreamError, 503: needsKeyError, ...errorResponses(400, 401) },
        },
        handler: async (request, reply) => {
          const r = await trading.submitPrompt(await userId(request), { prompt: request.body.prompt, threadId: request.body.threadId });
          return reply.code(r.status as 200).send(r.body);
        },
      });

      app.get('/trading/prompt', {
        schema: {
          tags: ['trading'],
          summary: 'Status of a trading prompt job',
          description: `Calls \`GET {TRADING_API_URL}/prompt/<jobId>\`. 400 \`jobId required\` without a jobId. ${PASSTHROUGH_NOTE}`,
          querystring: jobQuery,
          response: { 200: passthrough, 500: upstreamError, 503: needsKeyError, ...errorResponses(400, 401) },
        },
        handler: async (request, reply) => {
          const jobId = request.query.jobId?.trim();
          if (!jobId) throw badRequest('jobId required');
          // the job id becomes a path segment upstream: a plain token only, so `..` or `/` can never
          // point the platform's trading key at another upstream path (docs/security.md)
          if (jobId.length > LIMITS.tradingIdMax || !isTradingJobId(jobId)) throw badRequest('Invalid jobId');
          const r = await trading.jobStatus(await userId(request), jobId);
          return reply.code(r.status as 200).send(r.body);
        },
      });
    },
  };
};
