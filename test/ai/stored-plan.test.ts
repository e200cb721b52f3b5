/**
 * The AI plan middleware reads a platform user's stored plan (issue "payments" item 2, §4.9 with
 * §2): when `x-user-id` is a user, plan and subscription come from the database, not from the
 * caller's headers; other callers keep the §4.9 header rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStoredPlans } from '../../src/domains/ai/stored-plans.service.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const KEY = 'test-internal-key';
let router: FakeOpenAi;
beforeAll(async () => {
  router = await startFakeOpenAi({ apiKey: 'router-key' });
});
afterAll(() => router?.close());

const env = () => ({
  ROUTER_API_KEY: 'router-key',
  ROUTER_BASE_URL: router.url,
  AI_RATE_LIMIT: '10000',
  REGISTER_RATE_LIMIT: '1000',
  ADMIN_EMAILS: 'boss@example.com',
});
const chat = (t: TestPlatform, headers: Record<string, string>, model?: string) =>
  t.backend.inject({
    method: 'POST',
    url: '/api/ai/chat',
    headers: { authorization: `Bearer ${KEY}`, ...headers },
    payload: { messages: [{ role: 'user', content: 'hi' }], ...(model ? { model } : {}) },
  });
const setUser = (t: TestPlatform, id: string, change: { plan?: 'solo' | 'network'; subscription_status?: string }) =>
  t.database.db.kysely.updateTable('users').set(change).where('id', '=', id).execute();

describe('without a card processor (self-hosted: DEFAULT_PLAN, no subscription needed)', () => {
  it("a user's stored plan decides: headers cannot raise it, and no subscription header is needed", async () => {
    await withTestPlatform(env(), async (t) => {
      const u = await signUp(t.web);
      // stored plan solo (DEFAULT_PLAN): no plan headers at all → served
      const plain = await chat(t, { 'x-user-id': u.id });
      expect(plain.statusCode).toBe(200);
      // claiming network in the headers does not unlock a network-only model (solo allows the first 3)
      const claimed = await chat(t, { 'x-user-id': u.id, 'x-user-plan': 'network', 'x-stripe-subscription-id': 'sub_x' }, 'x-ai/grok-4');
      expect(claimed.statusCode).toBe(403);
      expect(claimed.json()).toMatchObject({ code: 'MODEL_RESTRICTED' });
    });
  });

  it('a plan change by an admin applies: network unlocks every model', async () => {
    await withTestPlatform(env(), async (t) => {
      const u = await signUp(t.web);
      await setUser(t, u.id, { plan: 'network' });
      const res = await chat(t, { 'x-user-id': u.id }, 'x-ai/grok-4');
      expect(res.statusCode).toBe(200);
    });
  });

  it('an ADMIN_EMAILS address makes an admin only once proved, and never over a password set before the proof (§5)', async () => {
    await withTestPlatform(env(), async (t) => {
      const u = await signUp(t.web, { email: 'boss@example.com' });
      // registered with a password, never proved: whoever typed the address is not the admin
      expect((await chat(t, { 'x-user-id': u.id }, 'x-ai/grok-4')).statusCode).toBe(403);
    });
    await withTestPlatform(env(), async (t) => {
      const u = await signUp(t.web, { email: 'boss@example.com' });
      // proved later while the password from before stays: still not the admin
      await t.database.db.kysely.updateTable('users').set({ email_verified: true }).where('id', '=', u.id).execute();
      expect((await chat(t, { 'x-user-id': u.id }, 'x-ai/grok-4')).statusCode).toBe(403);
    });
    await withTestPlatform(env(), async (t) => {
      const u = await signUp(t.web, { email: 'boss@example.com' });
      // proved, then a password set after the proof (the owner's reset): the admin, every model
      await t.database.db.kysely.updateTable('users').set({ email_verified: true }).where('id', '=', u.id).execute();
      await t.database.db.kysely.updateTable('users').set({ password_hash: 'reset-by-the-owner' }).where('id', '=', u.id).execute();
      expect((await chat(t, { 'x-user-id': u.id }, 'x-ai/grok-4')).statusCode).toBe(200);
    });
  });

  it('callers that are not platform users keep the §4.9 header rules', async () => {
    await withTestPlatform(env(), async (t) => {
      expect((await chat(t, {})).json()).toMatchObject({ success: false, code: 'PLAN_REQUIRED' });
      expect((await chat(t, { 'x-user-id': 'agent-7', 'x-user-plan': 'solo' })).json()).toMatchObject({ code: 'SUBSCRIPTION_REQUIRED' });
      expect(
        (await chat(t, { 'x-user-id': '00000000-0000-4000-8000-000000000000', 'x-user-plan': 'solo', 'x-stripe-subscription-id': 's' }))
          .statusCode,
      ).toBe(200);
    });
  });
});

describe('with a card processor configured', () => {
  it('402 SUBSCRIPTION_REQUIRED until the stored subscription is active, whatever the headers say', async () => {
    await withTestPlatform(
      { ...env(), STRIPE_SECRET_KEY: 'sk_test_x', STRIPE_WEBHOOK_SECRET: 'whsec_x', STRIPE_API_URL: 'http://127.0.0.1:1' },
      async (t) => {
        const u = await signUp(t.web);
        const refused = await chat(t, { 'x-user-id': u.id, 'x-user-plan': 'network', 'x-stripe-subscription-id': 'sub_forged' });
        expect(refused.statusCode).toBe(402);
        expect(refused.json()).toEqual({ success: false, error: 'An active subscription is required', code: 'SUBSCRIPTION_REQUIRED' });
        // an admin (here by the stored right) needs no subscription; an unproved ADMIN_EMAILS registration is no admin
        const claimed = await signUp(t.web, { email: 'boss@example.com' });
        expect((await chat(t, { 'x-user-id': claimed.id }, 'x-ai/grok-4')).statusCode).toBe(402);
        const admin = await signUp(t.web);
        await t.database.db.kysely.updateTable('users').set({ is_admin: true }).where('id', '=', admin.id).execute();
        expect((await chat(t, { 'x-user-id': admin.id }, 'x-ai/grok-4')).statusCode).toBe(200);
      },
    );
  });

  it('an active subscription (as the webhook stores it) is enough', async () => {
    await withTestPlatform(
      { ...env(), STRIPE_SECRET_KEY: 'sk_test_x', STRIPE_WEBHOOK_SECRET: 'whsec_x', STRIPE_API_URL: 'http://127.0.0.1:1' },
      async (t) => {
        const u = await signUp(t.web);
        await setUser(t, u.id, { subscription_status: 'active' });
        expect((await chat(t, { 'x-user-id': u.id })).statusCode).toBe(200);
      },
    );
  });
});

it('the lookup caches per user for its TTL and never queries for ids that are not UUIDs', async () => {
  let queries = 0;
  let now = 0;
  const fakeDb = {
    kysely: {
      selectFrom: () => ({
        select: () => ({
          where: () => ({
            executeTakeFirst: async () => {
              queries++;
              return { plan: 'solo', subscription_status: 'none', is_admin: false, email: 'a@example.com' };
            },
          }),
        }),
      }),
    },
  } as never;
  const plans = createStoredPlans({ db: fakeDb, ttlMs: 1000, now: () => now });
  expect(await plans.lookup('anonymous')).toBeNull();
  expect(await plans.lookup(undefined)).toBeNull();
  expect(queries).toBe(0);
  const id = '11111111-1111-4111-8111-111111111111';
  await plans.lookup(id);
  await plans.lookup(id);
  expect(queries).toBe(1);
  now = 1001;
  await plans.lookup(id);
  expect(queries).toBe(2);
});
