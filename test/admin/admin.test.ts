/**
 * Admin rights from proof and plans without a card processor (docs/admin.md; §2 Plans, §4.7, §5):
 * the first-admin setup link, the admin users API, `npm run admin`, DEFAULT_PLAN, and the agent's
 * plan coming from its owner's plan (a client-chosen tier may only choose within it).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentsTestPlatform, eventually, startAgentsPlatform } from '../agents/helpers.ts';
import { signUp } from '../helpers/platform.ts';

const root = join(import.meta.dirname, '..', '..');
let t: AgentsTestPlatform;
// no STRIPE_SECRET_KEY: the self-hosted default (the agents helper sets one; unset it here)
beforeAll(async () => {
  t = await startAgentsPlatform({
    env: { STRIPE_SECRET_KEY: '', ADMIN_EMAILS: '', ADMIN_EMAILS_REQUIRE_VERIFIED: 'true', DEFAULT_PLAN: 'solo' },
  });
});
afterAll(() => t.close());

const call = (method: 'GET' | 'POST' | 'PATCH', url: string, cookie?: string, payload?: unknown) =>
  t.web.inject({ method, url, headers: cookie ? { cookie } : {}, ...(payload !== undefined ? { payload: payload as object } : {}) });
const isAdmin = async (cookie: string) => (await call('GET', '/api/auth/session', cookie)).json().user.isAdmin as boolean;
const agentPlan = async (id: string) =>
  (await t.database.db.kysely.selectFrom('agents').select('plan').where('id', '=', id).executeTakeFirstOrThrow()).plan;

describe('no card processor configured', () => {
  it('a new account provisions without a subscription, on DEFAULT_PLAN (was: 402 for everyone)', async () => {
    const u = await signUp(t.web);
    const res = await call('POST', '/api/agents/provision', u.cookie, { name: 'first agent' });
    expect(res.statusCode).toBe(201);
    expect(await agentPlan(res.json().agent.id)).toBe('solo');
    await eventually(async () => (await call('GET', `/api/agents/${res.json().agent.id}`, u.cookie)).json().agent.status === 'running');
  });

  it("the agent's plan is the owner's: no tier → the owner's plan (was: label); a higher tier → 402 PLAN_REQUIRED, nothing created", async () => {
    const u = await signUp(t.web);
    const over = await call('POST', '/api/agents/provision', u.cookie, { name: 'greedy', tier: 'enterprise' });
    expect(over.statusCode).toBe(402);
    expect(over.json()).toMatchObject({ code: 'PLAN_REQUIRED', plan: 'solo', requiredPlan: 'label' });
    expect((await call('GET', '/api/agents', u.cookie)).json().count).toBe(0);
    const ok = await call('POST', '/api/agents/provision', u.cookie, { name: 'modest', tier: 'starter' });
    expect(ok.statusCode).toBe(201);
    expect(await agentPlan(ok.json().agent.id)).toBe('solo');
    await eventually(async () => t.driver.deploys.some((d) => d.agentId === ok.json().agent.id));
    expect(t.driver.deploys.find((d) => d.agentId === ok.json().agent.id)?.plan).toBe('solo');
  });
});

describe('admin rights come from proof', () => {
  it('the setup link makes the signed-in opener an admin, once; concurrent openers: exactly one wins', async () => {
    const link = await t.platform.services.admin.setupLinkIfNoAdmin();
    // the dashboard's page on PUBLIC_URL (it signs the visitor in, then spends the token with the API)
    expect(link).toMatch(new RegExp(`^${t.config.PUBLIC_URL}/dashboard/setup\\?token=[\\w-]{20,}$`));
    expect((await call('GET', new URL(link!).pathname)).headers['content-type']).toContain('text/html');
    const path = `/api/admin/setup${new URL(link!).search}`;
    expect((await call('GET', path)).statusCode).toBe(401); // signed out: sign in first
    const [a, b] = [await signUp(t.web), await signUp(t.web)];
    const [ra, rb] = await Promise.all([call('GET', path, a.cookie), call('GET', path, b.cookie)]);
    expect([ra.statusCode, rb.statusCode].sort()).toEqual([200, 404]);
    const winner = ra.statusCode === 200 ? a : b;
    const loser = winner === a ? b : a;
    expect(await isAdmin(winner.cookie)).toBe(true); // at once, not after the session cache expires
    expect(await isAdmin(loser.cookie)).toBe(false);
    expect((await call('GET', path, loser.cookie)).json()).toMatchObject({ code: 'SETUP_LINK_INVALID' });
    // an instance with an admin prints no link
    expect(await t.platform.services.admin.setupLinkIfNoAdmin()).toBeUndefined();
    // the token is stored only as a hash, and is gone once spent
    expect(await t.database.db.kysely.selectFrom('admin_setup_tokens').selectAll().execute()).toEqual([]);
  });

  it('admins list users and set plans and admin flags; others get 403 ADMIN_REQUIRED; bad input 400/404', async () => {
    const admin = await signUp(t.web);
    await t.database.db.kysely.updateTable('users').set({ is_admin: true }).where('id', '=', admin.id).execute();
    const relog = await t.web.inject({
      method: 'POST',
      url: '/api/auth/login',
      payload: { email: admin.email, password: 'correct horse battery' },
    });
    const cookie = `service-session=${/service-session=([^;]*)/.exec(String(relog.headers['set-cookie']))![1]}`;
    const user = await signUp(t.web);

    expect((await call('GET', '/api/admin/users', user.cookie)).json()).toMatchObject({ code: 'ADMIN_REQUIRED' });
    expect((await call('GET', '/api/admin/users')).statusCode).toBe(401);
    const list = await call('GET', '/api/admin/users?limit=100', cookie);
    expect(list.statusCode).toBe(200);
    expect(list.json().users.map((u: { id: string }) => u.id)).toContain(user.id);
    expect(list.json().users.some((u: { email: string }) => u.email.endsWith('.invalid'))).toBe(false); // not the operator account

    expect((await call('PATCH', `/api/admin/users/${user.id}`, user.cookie, { plan: 'network' })).statusCode).toBe(403);
    expect((await call('PATCH', `/api/admin/users/${user.id}`, cookie, { plan: 'platinum' })).statusCode).toBe(400);
    expect((await call('PATCH', `/api/admin/users/${user.id}`, cookie, {})).statusCode).toBe(400);
    expect((await call('PATCH', '/api/admin/users/00000000-0000-4000-8000-000000000000', cookie, { plan: 'label' })).statusCode).toBe(404);
    expect((await call('PATCH', `/api/admin/users/${admin.id}`, cookie, { isAdmin: false })).statusCode).toBe(400);

    const up = await call('PATCH', `/api/admin/users/${user.id}`, cookie, { plan: 'collective' });
    expect(up.json().user).toMatchObject({ id: user.id, plan: 'collective', isAdmin: false });
    // the new plan is what provisioning uses: pro tier is now within it
    const res = await call('POST', '/api/agents/provision', user.cookie, { name: 'pro agent', tier: 'pro' });
    expect(res.statusCode).toBe(201);
    expect(await agentPlan(res.json().agent.id)).toBe('collective');
  });
});

describe('npm run admin', () => {
  const run = (...args: string[]) =>
    spawnSync(process.execPath, ['scripts/admin.ts', ...args], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: t.database.url,
        LOG_LEVEL: 'silent',
        WALLET_ENCRYPTION_KEY: 'ab'.repeat(32),
        SECRETS_ENCRYPTION_KEY: 'cd'.repeat(32),
      },
    });

  it('grants and revokes admin by email (any case), and says so when no account matches', async () => {
    const u = await signUp(t.web, { email: `shell-${Date.now()}@example.com` });
    const grant = run(u.email.toUpperCase());
    expect(grant.stdout).toMatch(/now an admin/);
    expect(grant.status).toBe(0);
    expect(await isAdmin(u.cookie)).toBe(true); // the script runs elsewhere: fresh sessions see it; this one was never cached as admin
    const revoke = run('--revoke', u.email);
    expect(revoke.status).toBe(0);
    const row = await t.database.db.kysely.selectFrom('users').select('is_admin').where('id', '=', u.id).executeTakeFirstOrThrow();
    expect(row.is_admin).toBe(false);
    const none = run('nobody-here@example.com');
    expect(none.status).toBe(1);
    expect(none.stderr).toMatch(/No account with the email/);
    expect(run().status).toBe(2);
  }, 60_000);
});
