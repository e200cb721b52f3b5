/**
 * §4.11 x402 gateway: GET /api/x402 (health, no session) and POST /api/x402 (one route, five
 * actions). The POST is in the session scope with the session optional, because `endpoints` needs
 * none; every other action needs one, which this route decides after the action is known (400
 * first), with §4.11's 401 text `Authentication required`.
 */
import { z } from 'zod';
import {
  X402_ACTIONS,
  X402_COLONY_JOIN_TIMEOUT_MS,
  X402_ERRORS,
  X402_HEALTH_TIMEOUT_MS,
  X402_MAX_AMOUNT,
  type X402Service,
  x402Action,
} from '../../../domains/x402/index.ts';
import { unauthorized } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema } from '../../shared/schemas.ts';
import type { SessionRouteConfig } from '../../shared/session.ts';

const field = (text: string) => z.unknown().optional().describe(text);
const actionBody = z
  .object(
    {
      action: field(`Required, one of: ${X402_ACTIONS.join(', ')}`),
      agentId: field(
        `string; required for every action but \`endpoints\` (400 \`${X402_ERRORS.agentIdRequired}\`): one of the caller's agents (404 \`${X402_ERRORS.agentNotFound}\`)`,
      ),
      walletAddress: field(
        `string; \`join-colony\` only, required (400 \`${X402_ERRORS.walletRequired}\`): an EVM or Solana address (400 \`${X402_ERRORS.invalidWallet}\`)`,
      ),
      amount: field(
        `number, US dollars; \`pay\` only, required: > 0 with at most 6 decimals (400 \`${X402_ERRORS.invalidAmount}\`) and <= ${X402_MAX_AMOUNT} (400 \`${X402_ERRORS.amountTooHigh}\`)`,
      ),
      currency: field('string; `pay` only, default `USDC`, forwarded as is (letters, digits, `._:-`, at most 64)'),
      recipient: field(
        `string; \`pay\` only, required (400 \`${X402_ERRORS.recipientRequired}\`): an EVM address (0x plus exactly 40 hex digits) or a Solana address (Base58, 32 to 44 characters), else 400 \`${X402_ERRORS.invalidRecipient}\``,
      ),
      endpoint: field('string; `pay` only, optional: the slug of a paid endpoint (see `endpoints`)'),
      method: field('string; `pay` only, default `default`, forwarded as is'),
    },
    { error: 'Request body must be a JSON object' },
  )
  .loose();

const ACTIONS_DESCRIPTION = [
  'One route, five actions (§4.11), each passed to the x402 gateway at X402_GATEWAY_URL (docs/payments.md "x402" gives the upstream contract):',
  '- `endpoints` (no session): `{endpoints:[{slug, description, price (string)}]}`.',
  `- \`join-colony\` (\`agentId\`, \`walletAddress\`): the gateway's answer; cut at ${X402_COLONY_JOIN_TIMEOUT_MS / 1000} s (§8). ` +
    'A gateway 402 gives 402 `Colony join failed: 402 <its text>`; another status 502 `Colony join failed: <status> <its text>`; ' +
    `no answer in time or none at all 503 \`${X402_ERRORS.colonyUnreachable}\`.`,
  '- `fitness` (`agentId`): `{score (0 to 100), tier, details:{prediction, execution, coordination}}`.',
  '- `pricing` (`agentId`): `{agentId, tier, pricing:{rate, discount}, fitness:{score, tier}}`.',
  "- `pay` (`agentId`, `amount`, `recipient`, optional `currency`, `endpoint`, `method`): the gateway's result. " +
    'When the gateway answers HTTP 402 with x402 payment requirements, the platform pays them with its own account ' +
    '(X402_PAYER_PRIVATE_KEY, signed with the official `@x402/fetch` client, never more than `amount` US dollars) and retries once; ' +
    'without a payer, or when no requirement fits the amount, or the gateway refuses the signed payment: 502 `x402 payment failed: …`. ' +
    "The user pays: `amount` is debited from the caller's wallet balance (GET /api/wallet) before the gateway is called and given back " +
    'when the call fails (unless an x402 payment was signed for it). A balance that does not cover it: 402 ' +
    '(`error` `insufficient_balance`, with `message`, `balance`, `cost`); past the per-user daily cap X402_USER_DAILY_CAP_USD (UTC day, net of ' +
    'refunds): 429 `{error:"Daily x402 limit reached: …", dailyCap, spentToday}`; both audited as `refused`, the gateway not called.',
  'Every `pay` attempt of a signed-in user, accepted or refused, is recorded in an audit the user cannot change ' +
    '(user email, agent, amount, currency, recipient, endpoint, method, outcome); a call that reaches the gateway is recorded before it is made.',
  `Order of checks: \`action\` (400 \`${X402_ERRORS.invalidAction}\`), the session (401 \`${X402_ERRORS.authRequired}\`), the fields, ` +
    `that \`agentId\` is one of the caller's agents (404 \`${X402_ERRORS.agentNotFound}\`, also for another user's agent; for \`pay\` ` +
    'audited as `refused`, nothing charged), ' +
    `then the gateway (503 \`${X402_ERRORS.notConfigured}\` when X402_GATEWAY_URL is unset). ` +
    `A gateway failure, timeout, error status or unreadable answer for fitness, pricing, endpoints or pay: 500 \`${X402_ERRORS.gatewayError}\`.`,
  'For unauthenticated fitness or pricing calls the dashboard shows fallback defaults (score 50, tier `new`).',
].join('\n');

export const x402Routes = (deps: { x402: X402Service }): RouteModule<'public' | 'session'> => ({
  prefix: '/api/x402',
  public: async (app) => {
    app.get('', {
      schema: {
        tags: ['x402'],
        summary: 'x402 gateway health',
        description:
          "The gateway's `GET /health` fields (such as `service`, `agents`, `colonies`, `timestamp`) plus `gateway` (the upstream URL) and " +
          "`status` (the gateway's own, else `ok`). No session. " +
          `503 \`{gateway, status:'unreachable', error}\` when the gateway does not answer within ${X402_HEALTH_TIMEOUT_MS / 1000} s, ` +
          'cannot be reached, answers an error status or something that is not a JSON object; ' +
          `503 \`{gateway:null, status:'unconfigured', error:'${X402_ERRORS.notConfigured}'}\` when X402_GATEWAY_URL is unset.`,
        response: {
          200: z.object({ gateway: z.string(), status: z.string() }).loose(),
          503: errorSchema.describe('`{error, gateway, status}`: status `unreachable` or `unconfigured`'),
        },
      },
      handler: async () => deps.x402.health(),
    });
  },
  session: async (app) => {
    app.post('', {
      schema: {
        tags: ['x402'],
        summary: 'x402 gateway actions: join-colony, fitness, pricing, endpoints, pay',
        description: ACTIONS_DESCRIPTION,
        body: actionBody,
        // documented as public, as before: `endpoints` needs no session
        security: [],
        response: {
          200: z.unknown().describe("The gateway's JSON answer, unchanged"),
          404: errorSchema.describe(`\`${X402_ERRORS.agentNotFound}\`: \`agentId\` is not one of the caller's agents`),
          402: errorSchema.describe(
            'join-colony: the gateway answered 402; pay: the wallet balance does not cover `amount` (`insufficient_balance`)',
          ),
          429: errorSchema.describe('pay: the daily cap X402_USER_DAILY_CAP_USD is reached'),
          500: errorSchema.describe(`\`${X402_ERRORS.gatewayError}\``),
          502: errorSchema.describe('join-colony refused by the gateway, or an x402 payment that could not be made'),
          503: errorSchema.describe('X402_GATEWAY_URL unset, or (join-colony) the gateway did not answer in time'),
          ...errorResponses(400, 401),
        },
      },
      // a session is optional here: `endpoints` answers without one, the other actions need it (§4.11)
      config: { sessionOptional: true } satisfies SessionRouteConfig,
      handler: async (request) => {
        const body = request.body as Record<string, unknown>;
        const action = x402Action(body);
        if (action === 'endpoints') return deps.x402.endpoints();
        const user = request.user;
        if (!user) throw unauthorized(X402_ERRORS.authRequired);
        return deps.x402.act({ id: user.id, email: user.email }, action, body);
      },
    });
  },
});
