/**
 * The admin page's model prices (docs/payments.md "Model calls from the balance", docs/admin.md
 * "Model prices"): every model with the price in force and where it comes from, and an admin's own
 * price per model, which wins over MODEL_PRICES and the catalogue's. Admins only: 401 without a
 * session, 403 `ADMIN_REQUIRED` for other users.
 */
import { z } from 'zod';
import type { AiService } from '../../../domains/ai/index.ts';
import { MODEL_PRICE_MAX } from '../../../domains/ai/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';
import { currentUser } from '../../shared/session.ts';

const PRICE_RULE = `a number of USD per million tokens, 0 to ${MODEL_PRICE_MAX}`;
const usdPerM = (name: string) =>
  z
    .number({ error: `Invalid ${name}: ${PRICE_RULE}` })
    .min(0, { error: `Invalid ${name}: ${PRICE_RULE}` })
    .max(MODEL_PRICE_MAX, { error: `Invalid ${name}: ${PRICE_RULE}` });
const modelId = z
  .string({ error: 'Invalid modelId: 1 to 200 characters' })
  .min(1, { error: 'Invalid modelId: 1 to 200 characters' })
  .max(200, { error: 'Invalid modelId: 1 to 200 characters' })
  .describe('the model id as agents and GET /api/ai/models name it, e.g. `custom/house-model`');

const price = z.object({ input: z.number(), output: z.number() });
const modelPrice = z.object({
  modelId: z.string(),
  name: z.string().nullable().describe("the catalogue's name; null for a priced model the catalogue does not list (yet)"),
  provider: z.string().nullable(),
  input: z.number().nullable().describe('USD per million input tokens in force; null when unpriced'),
  output: z.number().nullable().describe('USD per million output tokens in force; null when unpriced'),
  source: z
    .enum(['catalogue', 'setting', 'admin', 'none'])
    .describe("where the price comes from: the catalogue (or the router's list), MODEL_PRICES, this page, or nowhere (unpriced)"),
  setting: price.nullable().describe('what MODEL_PRICES says of this model, when it names it'),
  updatedAt: z.string().nullable().describe("this page's price: when it was set"),
  updatedBy: z.string().nullable().describe("this page's price: the admin's email (null when that account is gone)"),
});
const pricesView = z.object({
  billing: z.enum(['off', 'balance']).describe('AI_BILLING: with `balance` an unpriced model is refused (403 MODEL_UNPRICED)'),
  models: z.array(modelPrice),
  changes: z
    .array(
      z.object({
        modelId: z.string(),
        input: z.number().nullable().describe('null: the price was removed'),
        output: z.number().nullable(),
        by: z.string().nullable().describe("the admin's email"),
        at: z.string(),
      }),
    )
    .describe('the newest 20 changes made on this page, newest first (all of them: table model_price_changes)'),
});
const adminErrors = { ...errorResponses(401, 403) };

export const modelPricesRoutes = (deps: { ai: Pick<AiService, 'prices'>; billing: 'off' | 'balance' }): RouteModule<'admin'> => {
  const { prices } = deps.ai;
  const view = async (actor: { id: string; isAdmin: boolean }) => ({ billing: deps.billing, ...(await prices.list(actor)) });
  return {
    prefix: '/api/admin/model-prices',
    admin: async (app) => {
      app.get('', {
        schema: {
          tags: ['admin'],
          summary: 'Every model with its price and where it comes from (admins)',
          description:
            "The models of the catalogue (and of the router's list) and every model MODEL_PRICES or this page prices, each with the " +
            'price in force in USD per million tokens and its `source`: `catalogue`, `setting` (MODEL_PRICES), `admin` (this page: ' +
            'wins over both) or `none` (unpriced: metered at $0 and shown "unpriced" on the Usage page with AI_BILLING=off, refused ' +
            'with 403 `MODEL_UNPRICED` with AI_BILLING=balance). `changes`: the newest changes made here, each naming its admin.',
          response: { 200: pricesView, ...adminErrors },
        },
        handler: async (request) => view(currentUser(request)),
      });

      app.put('', {
        schema: {
          tags: ['admin'],
          summary: "Set a model's price (admins)",
          description:
            "Sets this page's price of `modelId` (any id: a model the router lists later is priced when it appears), USD per million " +
            "input and output tokens, 0 to 100,000 each. It wins over MODEL_PRICES and the catalogue's price, and applies to the next " +
            'call at once in this process, in every other replica at once with REDIS_URL (else within 30 s). Recorded with the admin ' +
            '(`changes`). Answers the list as GET does. 400 for a bad id or price.',
          body: jsonBody({ modelId, input: usdPerM('input'), output: usdPerM('output') }),
          response: { 200: pricesView, 400: errorSchema, ...adminErrors },
        },
        handler: async (request) => {
          const user = currentUser(request);
          const { modelId: id, input, output } = request.body;
          await prices.set(user, id, { input, output });
          request.log.info({ admin: user.id, modelId: id, input, output }, 'admin set a model price');
          return view(user);
        },
      });

      app.delete('', {
        schema: {
          tags: ['admin'],
          summary: "Remove a model's price set on this page (admins)",
          description:
            "Removes this page's price of `modelId`: MODEL_PRICES' or the catalogue's applies again, else the model is unpriced. " +
            'Applies as PUT does and is recorded likewise. Answers the list as GET does. 404 when this page sets no price for it.',
          querystring: z.object({ modelId }),
          response: { 200: pricesView, ...adminErrors, ...errorResponses(400, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          await prices.remove(user, request.query.modelId);
          request.log.info({ admin: user.id, modelId: request.query.modelId }, 'admin removed a model price');
          return view(user);
        },
      });
    },
  };
};
