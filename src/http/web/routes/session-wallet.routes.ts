/**
 * §4.4 session wallet: GET /api/wallet (without `address`), POST /api/wallet and
 * GET /api/wallet/address; and its journal, GET /api/wallet/journal (not in the specification:
 * the ledger's credits and debits of the wallet, docs/payments.md). The stablecoin balance lookup shares the GET path (with `?address=`);
 * it is served by whichever domain passes `balanceByAddress`.
 */

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { JOURNAL_PAGE_MAX, type SessionWalletService } from '../../../domains/session-wallet/index.ts';
import { AppError, badRequest } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, jsonBody } from '../../shared/schemas.ts';
import { SESSION_SECURITY } from '../../shared/security.ts';
import { currentUser, type SessionRouteConfig } from '../../shared/session.ts';

const ACTIONS = ['create', 'get_seed', 'export_seed'] as const;
const INVALID_ACTION = `Invalid action; use one of ${ACTIONS.join(', ')}`;

const walletView = z.union([
  z.object({
    address: z.string(),
    balance: z.string(),
    network: z.string(),
    hasWallet: z.literal(true),
    createdAt: z.string(),
  }),
  z.object({
    address: z.null(),
    balance: z.string().describe('"0"'),
    network: z.string(),
    hasWallet: z.literal(false),
    message: z.string(),
  }),
  z.object({
    agenticWallet: z.object({ status: z.literal('configured'), projectId: z.string().nullable(), features: z.array(z.string()) }),
    instructions: z.string(),
  }),
]);

/** §4.4 stablecoin balance lookup (`?address=`). */
const tokenBalance = z.object({
  address: z.string(),
  name: z.string(),
  symbol: z.string(),
  balance: z.string().describe('decimal string in token units'),
});
export const stablecoinBalances = z.object({
  address: z.string(),
  chain: z.string(),
  chainId: z.number(),
  testnet: z.boolean(),
  totalUsd: z.string().describe('sum of all balances (each token valued 1:1 to USD), 2 decimals'),
  primaryToken: tokenBalance.extend({ decimals: z.number() }).nullable(),
  allTokens: z.array(tokenBalance),
});

const journalView = z.object({
  address: z.string().nullable().describe('the session wallet; null before one exists (then `entries` is empty)'),
  balance: z.string().describe('decimal USD, as GET /api/wallet'),
  entries: z.array(
    z.object({
      id: z.number(),
      kind: z.string().describe('`credit`, `debit`, or a payment session movement (`session_open`, `session_close`, …)'),
      amountUsd: z.string().describe('signed decimal USD: credits positive, debits negative'),
      balanceAfterUsd: z.string().describe("the wallet's balance right after this row"),
      description: z.string().describe('what moved the money, e.g. "Credit by an admin", "Gateway call: agent"'),
      note: z.string().nullable().describe("an admin credit's note"),
      createdAt: z.string(),
    }),
  ),
  nextBefore: z.number().nullable().describe('pass as `before` for the next (older) page; null on the last page'),
});

const actionBody = jsonBody({
  action: z.string({ error: INVALID_ACTION }).describe('`create`, `get_seed` or `export_seed`'),
});

const actionResult = z.union([
  z.object({ address: z.string(), network: z.string(), message: z.string() }),
  z.object({ address: z.string(), network: z.string(), createdAt: z.string(), warning: z.string() }),
]);

export type BalanceByAddress = (request: FastifyRequest, address: string) => Promise<z.infer<typeof stablecoinBalances>>;

export const sessionWalletRoutes = (deps: {
  sessionWallet: SessionWalletService;
  balanceByAddress?: BalanceByAddress | undefined;
}): RouteModule<'session'> => {
  const { sessionWallet } = deps;

  return {
    prefix: '/api/wallet',
    // GET /api/wallet and /address also answer without a session (sessionOptional)
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['wallet'],
          summary: 'The session wallet (or the agentic wallet configuration)',
          description:
            'Without `address` (§4.4): when the custodial wallet provider (CDP) is configured, answers without auth ' +
            '`{agenticWallet:{status,projectId,features}, instructions}`. Otherwise needs the session (401) and returns ' +
            '`{address,balance,network,hasWallet,createdAt}`, or `{address:null,balance:"0",network,hasWallet:false,message}` before a wallet exists. ' +
            '`network` is `base-sepolia`. `balance` is the wallet\'s off-chain ledger balance in USD as a decimal string (e.g. "4.95"): card ' +
            'top-ups and admin credits minus paid gateway calls (docs/payments.md "The wallet\'s balance"); no chain is read. ' +
            "With `?address=` (no auth) this path is the stablecoin balance lookup of §4.4: the 11 stablecoins' `balanceOf` in one RPC " +
            'round trip on TEMPO_RPC_URL (deployless Multicall3), each valued 1:1 to USD with 6 decimals; `allTokens` lists funded tokens ' +
            'in the §4.4 order, `primaryToken` is the first of them (pathUSD with balance "0" when none is funded), `totalUsd` is rounded ' +
            'down to cents. 400 for a missing or malformed address; 500 when the RPC fails or TEMPO_RPC_URL is unset.',
          querystring: z.object({ address: z.string().optional().describe('Stablecoin balance lookup (see above)') }),
          // documented as public: two of the three answers need no session
          security: [],
          response: { 200: z.union([walletView, stablecoinBalances]), ...errorResponses(400, 401, 500) },
        },
        config: { sessionOptional: true } satisfies SessionRouteConfig,
        handler: async (request) => {
          const address = request.query.address;
          if (address !== undefined) {
            if (!deps.balanceByAddress) throw new AppError('BALANCE_LOOKUP_NOT_CONFIGURED', 'Balance lookup not configured');
            return deps.balanceByAddress(request, address);
          }
          const cdp = sessionWallet.cdpInfo();
          if (cdp) return cdp;
          // the session is needed only here (the other two answers are public)
          return sessionWallet.get(currentUser(request).id);
        },
      });

      app.get('/address', {
        schema: {
          tags: ['wallet'],
          summary: "The signed-in user's wallet address",
          description:
            '§4.4: 200 `{authenticated:true,address}` with a session (`address` is null until POST /api/wallet `create`), and 200 ' +
            '`{authenticated:false,needsAuth:true,message}` without one: being signed out is an ordinary answer here, not an error. ' +
            'The `error`/`setup` variant of §4.4 is for configuration errors; reading the session wallet address needs no ' +
            'configuration, so it does not occur here.',
          // the session is optional (§4.4's signed-out answer): documented as "cookie, or nothing"
          security: [...SESSION_SECURITY, {}],
          response: {
            200: z.union([
              z.object({ authenticated: z.literal(true), address: z.string().nullable() }),
              z.object({ authenticated: z.literal(false), needsAuth: z.literal(true), message: z.string() }),
            ]),
          },
        },
        config: { sessionOptional: true } satisfies SessionRouteConfig,
        handler: async (request) => {
          const user = request.user;
          if (!user) return { authenticated: false as const, needsAuth: true as const, message: 'Sign in to see your wallet address' };
          return { authenticated: true as const, address: await sessionWallet.address(user.id) };
        },
      });
      app.get('/journal', {
        schema: {
          tags: ['wallet'],
          summary: "The session wallet's journal: its credits and debits, newest first",
          description:
            "The ledger rows that moved the signed-in user's session wallet balance (admin credits with their note, card top-ups, paid " +
            'gateway calls, refunds, payment sessions opened and closed), newest first, with the balance after each, and the current ' +
            `\`balance\`. \`limit\` 1-${JOURNAL_PAGE_MAX} (default 50); \`before\` (a row id, from \`nextBefore\`) pages to older rows. ` +
            "Only the caller's own wallet is read (its address is found under row-level security). 401 signed out.",
          querystring: z.object({
            limit: z.coerce.number().int().min(1).max(JOURNAL_PAGE_MAX).default(50),
            before: z.coerce.number().int().min(1).optional(),
          }),
          response: { 200: journalView, ...errorResponses(400, 401) },
        },
        handler: async (request) => sessionWallet.journal(currentUser(request).id, request.query),
      });

      app.post('', {
        schema: {
          tags: ['wallet'],
          summary: 'Create the session wallet or read its metadata',
          description:
            '`action`: `create` generates a key pair on the server and returns `{address,network,message}` (400 `Wallet already exists` ' +
            'when the user has one: one wallet per user). `get_seed` returns metadata only, `{address,network,createdAt,warning}` ' +
            '(404 without a wallet); no key material is ever returned. `export_seed` always answers 403. Any other action: 400. ' +
            'The private key is stored AES-256-GCM encrypted with WALLET_ENCRYPTION_KEY.',
          body: actionBody,
          response: { 200: actionResult, ...errorResponses(400, 401, 403, 404) },
        },
        handler: async (request) => {
          const user = currentUser(request);
          switch (request.body.action) {
            case 'create':
              return sessionWallet.create(user.id);
            case 'get_seed':
              return sessionWallet.seedInfo(user.id);
            case 'export_seed':
              return sessionWallet.exportSeed();
            default:
              throw badRequest(INVALID_ACTION);
          }
        },
      });
    },
  };
};
