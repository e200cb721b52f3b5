/**
 * Card top-ups of a wallet (§4.4, §3 "Top-up", §6 payment webhook): a checkout session for one
 * of the §8 amounts, then a credit of the ledger when the processor's completed-checkout event
 * arrives, at most once per checkout session (the ledger's UNIQUE constraint on
 * `checkout:<session id>`: a processor may describe one payment in several differently-identified
 * events, but a checkout session is paid once). The credited balance is
 * what that wallet's payment sessions draw from (docs/payments.md).
 */
import { LIMITS } from '../../../config/limits.ts';
import { AppError, badRequest } from '../../../lib/errors.ts';
import type { Logger } from '../../../lib/logger.ts';
import { createMemoryRateLimiter, type RateLimiter } from '../../../lib/rate-limiter.ts';
import type { LedgerService } from '../ledger/ledger.service.ts';
import type { PaidCallCheckout } from '../paid-calls/paid-calls.service.ts';
import type { CardProcessor } from './card-processor.contract.ts';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const MICROS_PER_CENT = 10_000;

export type TopUpWebhookResult =
  | { received: true; credited: boolean; walletAddress: string; amountCents: number }
  | { received: true; ignored: string };

export function createTopUpService(deps: {
  processor: CardProcessor | undefined;
  ledger: Pick<LedgerService, 'credit'>;
  publicUrl: string;
  logger?: Logger | undefined;
}) {
  const notConfigured = () => new AppError('PROCESSOR_NOT_CONFIGURED', 'Card payments are not configured (STRIPE_SECRET_KEY)');
  return {
    /** GET /api/wallet/top-up: `amount` in cents (default 1000), `address` 0x + 40 hex. */
    async startCheckout(query: { amount?: string | undefined; address?: string | undefined }): Promise<{ url: string; sessionId: string }> {
      const amountCents = query.amount === undefined || query.amount === '' ? LIMITS.topUpDefaultCents : Number(query.amount);
      if (!(LIMITS.topUpAmountsCents as readonly number[]).includes(amountCents)) {
        throw badRequest(`Invalid amount: use one of ${LIMITS.topUpAmountsCents.join(', ')} (cents)`);
      }
      const address = query.address?.trim() ?? '';
      if (!ADDRESS.test(address)) throw badRequest('Invalid address: 0x followed by 40 hex characters');
      if (!deps.processor) throw notConfigured();
      try {
        const c = await deps.processor.createCheckout({
          amountCents,
          description: `Wallet top-up $${(amountCents / 100).toFixed(2)}`,
          successUrl: `${deps.publicUrl}/dashboard/wallet?top_up=success`,
          cancelUrl: `${deps.publicUrl}/dashboard/wallet?top_up=cancelled`,
          metadata: { type: 'wallet_top_up', walletAddress: address.toLowerCase(), amountCents: String(amountCents) },
        });
        return { url: c.url, sessionId: c.id };
      } catch (err) {
        deps.logger?.warn({ err: (err as Error).message }, 'top-up checkout creation failed');
        throw new AppError('CHECKOUT_FAILED', 'Could not create the checkout session');
      }
    },

    /**
     * POST /api/wallet/top-up (the processor's webhook). 400 for a missing or bad signature;
     * events that are not a paid wallet top-up are acknowledged and ignored (2xx, so the
     * processor does not retry them); a replayed event, or another event for an already credited
     * checkout session, credits nothing again.
     */
    async handleWebhook(rawBody: Buffer, signature: string | undefined): Promise<TopUpWebhookResult> {
      if (!deps.processor) throw notConfigured();
      if (!signature) throw badRequest('Missing payment-signature header');
      const verdict = deps.processor.verifyWebhook(rawBody, signature);
      if (!verdict.ok) throw badRequest('Invalid signature');
      const { event } = verdict;
      if (event.type !== 'checkout.session.completed') return { received: true, ignored: event.type };
      const meta = event.object.metadata ?? {};
      if (meta.type !== 'wallet_top_up') return { received: true, ignored: 'not a wallet top-up' };
      if (event.object.payment_status !== undefined && event.object.payment_status !== 'paid')
        return { received: true, ignored: `payment ${event.object.payment_status}` };
      const amountCents = Number(meta.amountCents);
      const walletAddress = String(meta.walletAddress ?? '').toLowerCase();
      // our own metadata, signed with the event: a top-up amount (or a gateway checkout's plugin
      // price), and what the processor says was paid when it says so
      const maxCents = Math.max(...LIMITS.topUpAmountsCents);
      const paid = event.object.amount_total;
      if (
        !Number.isInteger(amountCents) ||
        amountCents < 1 ||
        amountCents > maxCents ||
        (typeof paid === 'number' && paid !== amountCents) ||
        !ADDRESS.test(walletAddress)
      ) {
        // signed by the processor but not made by us: acknowledge, never credit, tell the operator
        deps.logger?.warn({ eventId: event.id }, 'top-up event with unexpected metadata ignored');
        return { received: true, ignored: 'unexpected metadata' };
      }
      const checkoutId = event.object.id;
      if (typeof checkoutId !== 'string' || checkoutId.length < 1 || checkoutId.length > 200) {
        deps.logger?.warn({ eventId: event.id }, 'completed checkout without a session id ignored');
        return { received: true, ignored: 'checkout session without id' };
      }
      const r = await deps.ledger.credit({
        address: walletAddress,
        amountMicros: amountCents * MICROS_PER_CENT,
        eventId: `checkout:${checkoutId}`,
        // versions before the checkout-session key credited under the event id
        priorEventIds: [event.id],
        source: 'card_top_up',
      });
      return { received: true, credited: r.credited, walletAddress, amountCents };
    },
  };
}

export type TopUpService = ReturnType<typeof createTopUpService>;

/** How long one gateway checkout link is handed out again for the same plugin and wallet. */
const CHECKOUT_REUSE_MS = 10 * 60 * 1000;
const CHECKOUT_CACHE_MAX = 10_000;
/** New gateway checkouts one caller (account, or client address with IPv6 taken per /64) may cause per window. */
export const GATEWAY_CHECKOUTS_PER_CALLER = 5;
/** New gateway checkouts all anonymous callers together may cause per window: the processor's API budget stays for top-ups and subscriptions. */
export const GATEWAY_CHECKOUTS_ANONYMOUS = 60;
const CHECKOUT_WINDOW_MS = 10 * 60 * 1000;

/**
 * The client part of a rate-limit key: an IPv4 address as is, an IPv6 address by its /64 (one
 * subscriber usually holds a whole /64, so single addresses would cost an attacker nothing).
 */
export function clientKey(ip: string | undefined): string {
  if (!ip) return 'unknown';
  const v4 = /^(?:::ffff:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (v4) return v4[1]!;
  if (!ip.includes(':')) return ip;
  const [head = '', tail] = ip.toLowerCase().split('%')[0]!.split('::');
  const left = head ? head.split(':') : [];
  const right = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

/**
 * The v1 gateway's 402 `stripe.checkoutUrl` (§4.8): a checkout for the plugin's price (at least
 * the processor's 50-cent minimum), crediting the named wallet like a top-up. Every unpaid call
 * answers 402, so one link per plugin and wallet is reused for 10 minutes, and a caller that keeps
 * naming new wallets gets at most GATEWAY_CHECKOUTS_PER_CALLER new checkouts per 10 minutes
 * (anonymous callers together GATEWAY_CHECKOUTS_ANONYMOUS); past that the 402 keeps its shape
 * with `checkoutUrl: null`. The counters are `limiter`'s: in-process unless a shared one is given.
 */
export function gatewayCheckout(
  processor: CardProcessor,
  publicUrl: string,
  limiter: RateLimiter = createMemoryRateLimiter(),
): PaidCallCheckout {
  const cache = new Map<string, { url: string; until: number }>();
  return async ({ amountCents, plugin, walletAddress, caller }) => {
    const key = `${plugin}:${walletAddress ?? ''}`;
    const hit = cache.get(key);
    if (hit && hit.until > Date.now()) return hit.url;
    const who = caller.userId ? `user:${caller.userId}` : `ip:${clientKey(caller.ip)}`;
    if (!(await limiter.consume(`gateway-checkout:${who}`, GATEWAY_CHECKOUTS_PER_CALLER, CHECKOUT_WINDOW_MS)).allowed) return null;
    if (!caller.userId && !(await limiter.consume('gateway-checkout:anonymous', GATEWAY_CHECKOUTS_ANONYMOUS, CHECKOUT_WINDOW_MS)).allowed)
      return null;
    const cents = Math.max(amountCents, 50);
    const { url } = await processor.createCheckout({
      amountCents: cents,
      description: `Plugin call: ${plugin}`,
      successUrl: `${publicUrl}/dashboard/wallet?top_up=success`,
      cancelUrl: `${publicUrl}/dashboard/wallet?top_up=cancelled`,
      metadata: walletAddress
        ? { type: 'wallet_top_up', walletAddress, amountCents: String(cents), plugin }
        : { type: 'plugin_call', plugin },
    });
    if (cache.size >= CHECKOUT_CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(key, { url, until: Date.now() + CHECKOUT_REUSE_MS });
    return url;
  };
}
