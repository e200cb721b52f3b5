/**
 * Plans and subscriptions through the card processor (§2 Plans, §4.7): a subscription checkout
 * for a plan, and the processor's webhooks setting the plan and status that provisioning reads.
 * Replays and out-of-order deliveries change nothing twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, startAgentsPlatform } from '../agents/helpers.ts';
import { type FakeStripe, startFakeStripe } from '../fakes/stripe-api.ts';
import { signUp } from '../helpers/platform.ts';

let stripe: FakeStripe;
let t: AgentsTestPlatform;
beforeAll(async () => {
  stripe = await startFakeStripe();
  t = await startAgentsPlatform({
    env: {
      STRIPE_SECRET_KEY: stripe.secretKey,
      STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
      STRIPE_API_URL: stripe.url,
      PUBLIC_URL: 'https://p.example.com',
    },
  });
});
afterAll(async () => {
  await t?.close();
  await stripe?.close();
});

const hook = (e: { body: string; signature: string }) =>
  t.web.inject({
    method: 'POST',
    url: '/api/webhooks/stripe',
    headers: { 'content-type': 'application/json', 'stripe-signature': e.signature },
    payload: e.body,
  });
const userRow = (id: string) =>
  t.database.db.kysely
    .selectFrom('users')
    .select(['plan', 'subscription_status', 'subscription_id'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
const provision = (cookie: string, name: string, tier?: string) =>
  t.web.inject({ method: 'POST', url: '/api/agents/provision', headers: { cookie }, payload: { name, ...(tier ? { tier } : {}) } });

describe('subscriptions', () => {
  it('checkout for a plan → completed webhook activates it → provisioning works on that plan; 402 before', async () => {
    const u = await signUp(t.web);
    expect((await provision(u.cookie, 'before')).json()).toMatchObject({ code: 'SUBSCRIPTION_REQUIRED' });
    const res = await t.web.inject({
      method: 'POST',
      url: '/api/billing/checkout',
      headers: { cookie: u.cookie },
      payload: { plan: 'collective' },
    });
    expect(res.statusCode).toBe(200);
    const s = stripe.sessions.find((x) => x.id === res.json().sessionId)!;
    expect(s).toMatchObject({
      mode: 'subscription',
      amount_total: 6_900,
      currency: 'gbp',
      metadata: { type: 'subscription', userId: u.id, plan: 'collective' },
    });

    const done = stripe.signedEvent('checkout.session.completed', {
      id: s.id,
      object: 'checkout.session',
      subscription: 'sub_A',
      metadata: s.metadata,
    });
    expect((await hook(done)).json()).toMatchObject({ received: true, applied: true });
    expect(await userRow(u.id)).toEqual({ plan: 'collective', subscription_status: 'active', subscription_id: 'sub_A' });
    expect((await provision(u.cookie, 'now', 'pro')).statusCode).toBe(201);
  });

  it('payment failed → past_due (402 again); deleted → canceled; replays and older events change nothing', async () => {
    const u = await signUp(t.web);
    const now = Math.floor(Date.now() / 1000);
    const meta = { type: 'subscription', userId: u.id, plan: 'label' };
    await hook(
      stripe.signedEvent('checkout.session.completed', { id: 'cs_x', subscription: 'sub_B', metadata: meta }, { created: now - 100 }),
    );
    const failed = stripe.signedEvent(
      'invoice.payment_failed',
      { id: 'in_1', object: 'invoice', subscription: 'sub_B' },
      { created: now - 50 },
    );
    // 10 parallel deliveries of one event: applied once
    const results = await Promise.all(Array.from({ length: 10 }, () => hook(failed)));
    expect(results.filter((r) => r.json().applied)).toHaveLength(1);
    expect((await userRow(u.id)).subscription_status).toBe('past_due');
    expect((await provision(u.cookie, 'x')).json()).toMatchObject({ code: 'SUBSCRIPTION_REQUIRED' });
    // an older "active" update delivered late changes nothing
    const stale = stripe.signedEvent(
      'customer.subscription.updated',
      { id: 'sub_B', object: 'subscription', status: 'active', metadata: meta },
      { created: now - 80 },
    );
    expect((await hook(stale)).json().applied).toBe(false);
    expect((await userRow(u.id)).subscription_status).toBe('past_due');
    // a newer one does: recovered, and an upgrade through the subscription's metadata
    await hook(
      stripe.signedEvent(
        'customer.subscription.updated',
        { id: 'sub_B', object: 'subscription', status: 'active', metadata: { ...meta, plan: 'network' } },
        { created: now - 10 },
      ),
    );
    expect(await userRow(u.id)).toMatchObject({ plan: 'network', subscription_status: 'active' });
    await hook(
      stripe.signedEvent(
        'customer.subscription.deleted',
        { id: 'sub_B', object: 'subscription', status: 'canceled', metadata: meta },
        { created: now },
      ),
    );
    expect((await userRow(u.id)).subscription_status).toBe('canceled');
  });

  it('bad input: 400 for a bad signature or plan, 401 signed out, ignored events acknowledged; nothing changes', async () => {
    const u = await signUp(t.web);
    const forged = stripe.signedEvent(
      'checkout.session.completed',
      { subscription: 'sub_C', metadata: { type: 'subscription', userId: u.id, plan: 'network' } },
      { secret: 'whsec_other' },
    );
    expect((await hook(forged)).statusCode).toBe(400);
    expect(
      (
        await t.web.inject({
          method: 'POST',
          url: '/api/webhooks/stripe',
          headers: { 'content-type': 'application/json' },
          payload: forged.body,
        })
      ).statusCode,
    ).toBe(400);
    expect((await hook(stripe.signedEvent('customer.created', { id: 'cus_1' }))).json()).toMatchObject({
      applied: false,
      ignored: 'customer.created',
    });
    expect(
      (await t.web.inject({ method: 'POST', url: '/api/billing/checkout', headers: { cookie: u.cookie }, payload: { plan: 'gold' } }))
        .statusCode,
    ).toBe(400);
    expect((await t.web.inject({ method: 'POST', url: '/api/billing/checkout', payload: { plan: 'solo' } })).statusCode).toBe(401);
    expect(await userRow(u.id)).toMatchObject({ subscription_status: 'none', subscription_id: null });
  });
});
