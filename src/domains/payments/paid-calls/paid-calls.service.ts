/**
 * The v1 gateway (§4.8 POST /api/v1/gateway): picks the plugin and the payment method, charges
 * before the call (so N parallel calls can never spend more than is there), runs the plugin and
 * gives the charge back when the plugin fails before answering. docs/payments.md has the rules.
 *
 * Method priority (§4.8): header X-Payment-Method, then an `Authorization: Payment` header (mpp),
 * then the card method (`stripe`): callers with an account pay from the card-funded ledger
 * balance of their wallet (top-ups, §4.4); everyone else gets the 402 challenge.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../../db/client.ts';
import { ERROR_CODES, type FixedTextCode } from '../../../lib/error-codes.ts';
import { badRequest, isAppError } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { microsToUsd, normalizeAddress } from '../../../lib/money.ts';
import type { AiActor } from '../../ai/index.ts';
import type { LedgerService } from '../ledger/ledger.service.ts';
import { sessionsRepo } from '../sessions/sessions.repo.ts';
import type { PaymentSessionsService } from '../sessions/sessions.service.ts';
import type { Plugin, PluginCallerKey, PluginOutput } from './plugins.service.ts';

export const PAYMENT_METHODS = ['stripe', 'mpp', 'session'] as const;
export type PaymentMethod = (typeof PAYMENT_METHODS)[number];

/** MPP (Machine Payments Protocol) challenge and verification (mpp.ts). */
export type MppMethod = {
  /** the `mpp` part of a 402 body and the WWW-Authenticate value; null when MPP_RECIPIENT is unset */
  challenge(amountMicros: number, plugin: string): { mpp: Record<string, unknown>; wwwAuthenticate: string } | null;
  /** verifies `Authorization: Payment <credential>` on the chain and spends it once */
  verify(credential: string, amountMicros: number, plugin: string): Promise<{ ok: true; txHash: string } | { ok: false; reason: string }>;
};

/** Who a 402 answers: the account when signed in, else the client address (limits checkout creation, top-up.service.ts). */
export type GatewayCaller = { userId: string | null; ip: string | undefined };

/**
 * Card checkout for a 402 (§4.8 `stripe:{checkoutUrl, amount, currency}`); null when no processor
 * is configured or the caller has had its share of new checkouts.
 */
export type PaidCallCheckout = (o: {
  amountCents: number;
  plugin: string;
  walletAddress: string | null;
  caller: GatewayCaller;
}) => Promise<string | null>;

export type PaidCallAccount = {
  userId: string;
  email: string;
  plan: AiActor['plan'];
  isAdmin: boolean;
  /** the API key the caller came with, when any: the `agent` plugin reaches only the agents it may */
  key?: PluginCallerKey | null | undefined;
};

export type PaidCallRequest = {
  pluginId: string;
  body: Record<string, unknown>;
  paymentMethod: string | undefined;
  authorization: string | undefined;
  sessionId: string | undefined;
  walletAddress: string | undefined;
  stream: boolean;
  /** the caller's account (cookie or API key), when any */
  account: PaidCallAccount | null;
  /** the client's address (request.ip, TRUST_PROXY applied) */
  clientIp?: string | undefined;
  signal: AbortSignal;
};

export type PaidCallPayment = { method: PaymentMethod; receipt: string; signature?: string };

export type PaidCallOutcome =
  | {
      ok: true;
      plugin: string;
      payment: PaidCallPayment;
      headers: Record<string, string>;
      output: PluginOutput;
      refund: () => Promise<void>;
    }
  | { ok: false; status: number; body: Record<string, unknown>; headers: Record<string, string> };

/**
 * A refusal as §4.8 writes it: the catalogue gives the status and the `error` identifier, which
 * comes first in the body; `fields` (message, challenge, session) follow. A value, not a throw: the
 * route sends it with the refusal's own headers (WWW-Authenticate).
 */
const fail = (code: FixedTextCode, fields: Record<string, unknown>, headers: Record<string, string> = {}): PaidCallOutcome => ({
  ok: false,
  status: ERROR_CODES[code].status,
  body: { error: ERROR_CODES[code].error, ...fields },
  headers,
});

export function createPaidCallsService(deps: {
  db: Db;
  /** the card method debits and refunds wallets through the ledger (docs/payments.md "The ledger") */
  ledger: Pick<LedgerService, 'tryDebit' | 'credit' | 'balance'>;
  plugins: Record<string, Plugin>;
  sessions: PaymentSessionsService;
  mpp: MppMethod;
  checkout?: PaidCallCheckout | undefined;
  logger?: Logger | undefined;
}) {
  const { plugins, sessions, ledger } = deps;

  async function paymentRequired(
    req: PaidCallRequest,
    plugin: Plugin,
    walletAddress: string | null,
    message: string,
    extra: Record<string, unknown> = {},
  ): Promise<PaidCallOutcome> {
    const amountCents = Math.ceil(plugin.priceMicros / 10_000);
    const challenge = deps.mpp.challenge(plugin.priceMicros, plugin.id);
    let checkoutUrl: string | null = null;
    try {
      const caller = { userId: req.account?.userId ?? null, ip: req.clientIp };
      checkoutUrl = (await deps.checkout?.({ amountCents, plugin: plugin.id, walletAddress, caller })) ?? null;
    } catch (err) {
      deps.logger?.warn({ err: (err as Error).message }, 'gateway checkout creation failed');
    }
    return fail(
      'PAYMENT_REQUIRED',
      { message, ...extra, mpp: challenge?.mpp ?? null, stripe: { checkoutUrl, amount: amountCents, currency: 'usd' } },
      challenge ? { 'www-authenticate': challenge.wwwAuthenticate } : {},
    );
  }

  /**
   * The card method for a caller with an account (session or `sk_` key): their wallets' ledger
   * balance (card top-ups, admin credits), session wallet first. Each debit is one conditional
   * journal insert, so parallel calls never overdraw. Short on every wallet: the session wallet's
   * balance, for the refusal.
   */
  async function payByCard(account: PaidCallAccount, plugin: Plugin) {
    const addresses = (await deps.db.withUser(account.userId, (trx) => sessionsRepo.userAddresses(trx, account.userId))).filter(
      (a) => normalizeAddress(a) !== undefined,
    );
    for (const address of addresses) {
      const reference = `gateway:${randomUUID()}`;
      const r = await ledger.tryDebit({ address, amountMicros: plugin.priceMicros, reference, source: `gateway:${plugin.id}` });
      // a short balance on this wallet: try the next (a used reference cannot happen, it is new)
      if (!r.ok || !r.debited) continue;
      return {
        ok: true as const,
        receipt: reference,
        refund: async () => {
          await ledger.credit({ address, amountMicros: plugin.priceMicros, eventId: `refund:${reference}`, source: 'plugin_failed' });
        },
      };
    }
    return { ok: false as const, balanceMicros: addresses[0] ? await ledger.balance(addresses[0]) : 0 };
  }

  return {
    plugins,

    async handle(req: PaidCallRequest): Promise<PaidCallOutcome> {
      let method: PaymentMethod;
      if (req.paymentMethod !== undefined) {
        const m = req.paymentMethod.trim().toLowerCase();
        if (!(PAYMENT_METHODS as readonly string[]).includes(m)) throw badRequest('Invalid payment method; use stripe, mpp or session');
        method = m as PaymentMethod;
      } else if (req.authorization && /^Payment\s+/i.test(req.authorization)) method = 'mpp';
      else method = 'stripe';

      const plugin = Object.hasOwn(plugins, req.pluginId) ? plugins[req.pluginId] : undefined;
      if (!plugin) {
        return method === 'session'
          ? fail('UNKNOWN_PLUGIN', { message: `Plugin ${req.pluginId} has no price for session billing` })
          : fail('NO_PLUGIN', { message: `No plugin ${req.pluginId}` });
      }
      // validate before charging: bad input costs nothing (400)
      const call = plugin.prepare(req.body);
      const walletAddress = req.walletAddress === undefined ? null : (normalizeAddress(req.walletAddress) ?? null);

      let payment: PaidCallPayment;
      let headers: Record<string, string> = {};
      let refund: () => Promise<void> = async () => {};
      let payer: string | null = req.account?.userId ?? null;

      if (method === 'session') {
        if (!req.sessionId || !req.walletAddress) {
          return fail('SESSION_REQUIRED', {
            message: 'Session billing needs X-Session-Id and X-Wallet-Address (open one with POST /api/wallet/sessions)',
          });
        }
        const r = await sessions.debit(req.sessionId, req.walletAddress, plugin.priceMicros, plugin.id);
        if (!r.ok) {
          if (r.code === 'INSUFFICIENT_BALANCE') {
            return fail(r.code, {
              message: 'The session does not cover this call',
              session: { remaining: microsToUsd(r.remainingMicros), cost: microsToUsd(r.costMicros) },
            });
          }
          if (r.code === 'SESSION_INVALID') return fail(r.code, { message: 'Unknown, closed or expired session, or another wallet' });
          return fail(r.code, { message: 'The voucher could not be recorded; nothing was charged' });
        }
        payment = { method, receipt: r.receipt, signature: r.signature };
        headers = {
          'payment-receipt': r.receipt,
          'x-session-remaining': microsToUsd(r.remainingMicros),
          'payment-receipt-signature': r.signature,
        };
        refund = async () => {
          await sessions.refund(r.debitId);
        };
        payer ??= `wallet:${walletAddress}`;
      } else if (method === 'mpp') {
        const m = req.authorization && /^Payment\s+(.+)$/is.exec(req.authorization.trim());
        if (!m) return paymentRequired(req, plugin, walletAddress, 'Pay with an MPP credential: Authorization: Payment <credential>');
        const v = await deps.mpp.verify(m[1]!.trim(), plugin.priceMicros, plugin.id);
        if (!v.ok) return paymentRequired(req, plugin, walletAddress, `MPP credential refused: ${v.reason}`);
        payment = { method, receipt: v.txHash };
        headers = { 'payment-receipt': v.txHash };
      } else {
        if (!req.account) return paymentRequired(req, plugin, walletAddress, 'Payment required');
        const paid = await payByCard(req.account, plugin);
        if (!paid.ok) {
          // §4.8 402 `payment_required`; `balance` and `cost` say by how much (docs/payments.md)
          const balance = microsToUsd(paid.balanceMicros);
          const cost = microsToUsd(plugin.priceMicros);
          return paymentRequired(
            req,
            plugin,
            walletAddress,
            `Your balance ($${balance}) does not cover this call ($${cost}): top up, or ask an admin for a credit`,
            { balance, cost },
          );
        }
        payment = { method, receipt: paid.receipt };
        headers = { 'payment-receipt': paid.receipt };
        refund = paid.refund;
      }

      const actor: AiActor = req.account
        ? {
            userId: req.account.userId,
            email: req.account.email,
            role: undefined,
            plan: req.account.plan,
            isAdmin: req.account.isAdmin,
            // the model call is the key's: held against its monthly budget and counted in its usage
            keyId: req.account.key?.id,
          }
        : { userId: payer ?? 'gateway', email: undefined, role: undefined, plan: 'solo', isAdmin: false };
      try {
        const output = await call(
          { actor, userId: req.account?.userId ?? null, key: req.account?.key ?? null },
          { stream: req.stream && plugin.streaming, signal: req.signal },
        );
        return { ok: true, plugin: plugin.id, payment, headers, output, refund };
      } catch (err) {
        // the plugin did not answer: the charge goes back (once)
        await refund().catch((e) => deps.logger?.error({ err: e }, 'gateway refund failed'));
        // A refusal is the caller's answer, not a failure: the agent's monthly budget or a rate limit
        // (429), a plan or balance the model call needs (402), passed on with its status and its
        // sentence (docs/payments.md "When a paid call is refused").
        if (isAppError(err) && err.status < 500) throw err;
        // a failure, whatever its kind, is one line in the log saying why: the body keeps it generic
        const reason = (err as Error).message;
        deps.logger?.error({ plugin: plugin.id, reason }, `gateway plugin ${plugin.id} failed (the charge was given back): ${reason}`);
        if (isAppError(err) && err.status === 502) return fail('NO_PLUGIN', err.extra ?? {});
        return fail('PLUGIN_FAILED', { message: 'The plugin failed; nothing was charged' });
      }
    },
  };
}

export type PaidCallsService = ReturnType<typeof createPaidCallsService>;
