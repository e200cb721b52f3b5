/**
 * Plans and subscriptions through the card processor (§2 Plans, §4.7 402 SUBSCRIPTION_REQUIRED,
 * docs/payments.md "Subscriptions"). A signed-in user starts a monthly checkout for a plan; the
 * processor's webhooks set the user's plan and subscription status, which provisioning and the
 * plan limits read. Each event applies at most once (billing_events' primary key) and never
 * over a newer one (users.subscription_event_at), so replays and out-of-order deliveries change
 * nothing twice.
 */
import { type Kysely, sql } from 'kysely';
import type { Db } from '../../../db/client.ts';
import type { DB } from '../../../db/schema.ts';
import { AppError, badRequest } from '../../../lib/errors.ts';
import type { SessionCache } from '../../../lib/evicting-cache.ts';
import type { CardEvent, CardProcessor } from './card-processor.contract.ts';

export const PLANS = ['solo', 'collective', 'label', 'network'] as const;
export type Plan = (typeof PLANS)[number];
/** §2 Plans: monthly prices in pence (GBP). */
export const PLAN_PRICE_PENCE: Record<Plan, number> = { solo: 2_900, collective: 6_900, label: 14_900, network: 49_900 };

/** The processor's subscription states, reduced to what provisioning checks (`active` or not). */
const STATUS: Record<string, string> = {
  active: 'active',
  trialing: 'active',
  past_due: 'past_due',
  unpaid: 'past_due',
  incomplete: 'incomplete',
  incomplete_expired: 'canceled',
  canceled: 'canceled',
  paused: 'paused',
};

type Change = { userId?: string | undefined; subscriptionId?: string | undefined; plan?: Plan | undefined; status?: string | undefined };

const isPlan = (p: unknown): p is Plan => typeof p === 'string' && (PLANS as readonly string[]).includes(p);
const str = (v: unknown) => (typeof v === 'string' && v ? v : undefined);

/** What an event means for a user's subscription, or null when it is not about one. */
function changeOf(e: CardEvent): Change | null {
  const o = e.object;
  const meta = (o.metadata ?? {}) as Record<string, string>;
  switch (e.type) {
    case 'checkout.session.completed':
      if (meta.type !== 'subscription') return null;
      return {
        userId: meta.userId,
        subscriptionId: str(o.subscription),
        plan: isPlan(meta.plan) ? meta.plan : undefined,
        status: 'active',
      };
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
      return {
        userId: meta.userId,
        subscriptionId: str(o.id),
        plan: isPlan(meta.plan) ? meta.plan : undefined,
        status: STATUS[String(o.status)] ?? String(o.status),
      };
    case 'customer.subscription.deleted':
      return { userId: meta.userId, subscriptionId: str(o.id), status: 'canceled' };
    case 'invoice.payment_failed':
      return { subscriptionId: str(o.subscription), status: 'past_due' };
    default:
      return null;
  }
}

export function createSubscriptionsService(deps: {
  db: Db;
  processor: CardProcessor | undefined;
  publicUrl: string;
  sessionCache?: SessionCache | undefined;
}) {
  const k: Kysely<DB> = deps.db.kysely;
  const notConfigured = () => new AppError('PROCESSOR_NOT_CONFIGURED', 'Card payments are not configured (STRIPE_SECRET_KEY)');
  return {
    async startCheckout(user: { id: string; email: string }, plan: string): Promise<{ url: string; sessionId: string }> {
      if (!isPlan(plan)) throw badRequest(`Invalid plan: use one of ${PLANS.join(', ')}`);
      if (!deps.processor) throw notConfigured();
      try {
        const c = await deps.processor.createSubscriptionCheckout({
          amount: PLAN_PRICE_PENCE[plan],
          currency: 'gbp',
          description: `Agent platform ${plan} plan`,
          customerEmail: user.email,
          successUrl: `${deps.publicUrl}/dashboard?subscription=success`,
          cancelUrl: `${deps.publicUrl}/dashboard?subscription=cancelled`,
          metadata: { type: 'subscription', userId: user.id, plan },
        });
        return { url: c.url, sessionId: c.id };
      } catch {
        throw new AppError('CHECKOUT_FAILED', 'Could not create the checkout session');
      }
    },

    /**
     * The processor's webhook for subscription events. 400 for a missing or bad signature;
     * anything else is acknowledged (`applied` says whether it changed a user).
     */
    async handleWebhook(rawBody: Buffer, signature: string | undefined): Promise<{ received: true; applied: boolean; ignored?: string }> {
      if (!deps.processor) throw notConfigured();
      if (!signature) throw badRequest('Missing signature header');
      const verdict = deps.processor.verifyWebhook(rawBody, signature);
      if (!verdict.ok) throw badRequest('Invalid signature');
      const event = verdict.event;
      const change = changeOf(event);
      if (!change) return { received: true, applied: false, ignored: event.type };
      const at = new Date(event.created * 1000);
      const userId = await k.transaction().execute(async (trx) => {
        // one application per event id, even when deliveries race
        const first = await trx
          .insertInto('billing_events')
          .values({ event_id: event.id, type: event.type })
          .onConflict((oc) => oc.doNothing())
          .returning('event_id')
          .executeTakeFirst();
        if (!first) return null;
        const target =
          change.userId && /^[0-9a-f-]{36}$/i.test(change.userId)
            ? await trx.selectFrom('users').select('id').where('id', '=', change.userId).forUpdate().executeTakeFirst()
            : change.subscriptionId
              ? await trx
                  .selectFrom('users')
                  .select('id')
                  .where('subscription_id', '=', change.subscriptionId)
                  .forUpdate()
                  .executeTakeFirst()
              : undefined;
        if (!target) return null;
        const updated = await trx
          .updateTable('users')
          .set({
            ...(change.plan ? { plan: change.plan } : {}),
            ...(change.status ? { subscription_status: change.status } : {}),
            ...(change.subscriptionId ? { subscription_id: change.subscriptionId } : {}),
            subscription_event_at: at,
            updated_at: sql`now()`,
          })
          .where('id', '=', target.id)
          // an older event never overwrites a newer one
          .where((eb) => eb.or([eb('subscription_event_at', 'is', null), eb('subscription_event_at', '<=', at)]))
          .returning('id')
          .executeTakeFirst();
        await trx.updateTable('billing_events').set({ user_id: target.id }).where('event_id', '=', event.id).execute();
        return updated?.id ?? null;
      });
      if (userId) deps.sessionCache?.evictUser(userId);
      return { received: true, applied: userId !== null };
    },
  };
}

export type SubscriptionsService = ReturnType<typeof createSubscriptionsService>;
