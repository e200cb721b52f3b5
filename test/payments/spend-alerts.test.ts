/**
 * Spend alerts (docs/payments.md "Spend alerts"): a threshold on a user's balance and on an agent's
 * monthly spend; crossing it sends one email (the fake SMTP server) and one webhook call (a local
 * receiver), and GET /api/alerts shows it fired. It is told once per crossing, and armed again when
 * the balance is back above the threshold. Webhooks on private addresses are refused unless the
 * operator allows them; another user's agent is 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSpendAlertsWorker } from '../../src/workers/spend-alerts.ts';
import { type FakeSmtp, startFakeSmtp } from '../fakes/smtp.ts';
import { type FakeWebhook, startFakeWebhook } from '../fakes/webhook.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
let closed: TestPlatform;
let smtp: FakeSmtp;
let hook: FakeWebhook;

beforeAll(async () => {
  [smtp, hook] = await Promise.all([startFakeSmtp(), startFakeWebhook()]);
  t = await startTestPlatform({ SMTP_URL: smtp.url, UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS: 'true', REGISTER_RATE_LIMIT: '1000' });
  closed = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' });
});
afterAll(async () => {
  await Promise.allSettled([t?.close(), closed?.close(), smtp?.close(), hook?.close()]);
});

const put = (p: TestPlatform, cookie: string, url: string, payload: unknown) =>
  p.web.inject({ method: 'PUT', url, headers: { cookie, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
const list = async (cookie: string) => (await t.web.inject({ method: 'GET', url: '/api/alerts', headers: { cookie } })).json().alerts;
/** One pass of the worker: claims what crossed and tells it. */
const tick = async () => {
  const w = createSpendAlertsWorker({ alerts: t.platform.services.spendAlerts, pollMs: 60_000 });
  while (await w.runOnce()) {}
};
const credit = async (userId: string, usd: number) => {
  const address = await t.platform.services.sessionWallet.ensureAddress(userId);
  await t.platform.services.ledger.credit({
    address,
    amountMicros: usd * 1e6,
    eventId: `alert-credit-${Math.random()}`,
    source: 'card_top_up',
  });
};

describe('a balance alert', () => {
  it('fires once when the balance is below the threshold (one email, one webhook call), and again only after a credit re-arms it', async () => {
    const u = await signUp(t.web);
    const set = await put(t, u.cookie, '/api/alerts/balance', { thresholdUsd: 2, webhookUrl: hook.url });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json().alerts).toEqual([
      { kind: 'balance', agentId: null, thresholdUsd: 2, webhookUrl: hook.url, state: 'armed', firedAt: null, firedValueUsd: null },
    ]);
    await credit(u.id, 1); // $1 < $2: crossed
    const mailsBefore = smtp.messages.length;
    const hooksBefore = hook.received.length;
    await tick();
    await tick(); // told once, not per pass
    const mail = await smtp.waitFor((m) => m.to.includes(u.email));
    expect(mail.subject).toBe('Your balance is below $2.00');
    expect(mail.text).toContain('Your balance is $1.00, below the alert threshold of $2.00');
    expect(smtp.messages.length - mailsBefore).toBe(1);
    expect(hook.received.slice(hooksBefore)).toEqual([
      expect.objectContaining({ type: 'balance_below_threshold', thresholdUsd: 2, valueUsd: 1, agentId: null }),
    ]);
    const [fired] = await list(u.cookie);
    expect(fired).toMatchObject({ state: 'fired', firedValueUsd: 1 });
    expect(Date.parse(fired.firedAt)).not.toBeNaN();

    // a credit brings it back above: armed again (nothing sent), and told again on the next crossing
    await credit(u.id, 5);
    await tick();
    expect((await list(u.cookie))[0].state).toBe('armed');
    expect(smtp.messages.length - mailsBefore).toBe(1);
  });

  it('refuses a bad threshold, and a webhook on a private address unless the operator allows them', async () => {
    const u = await signUp(closed.web);
    for (const thresholdUsd of [0, -1, 100_001, 'x']) {
      const r = await put(closed, u.cookie, '/api/alerts/balance', { thresholdUsd });
      expect(r.statusCode, String(thresholdUsd)).toBe(400);
    }
    const r = await put(closed, u.cookie, '/api/alerts/balance', { thresholdUsd: 1, webhookUrl: 'http://127.0.0.1:9/hook' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error).toContain('webhookUrl');
    expect((await closed.web.inject({ method: 'GET', url: '/api/alerts', headers: { cookie: u.cookie } })).json().alerts).toEqual([]);
    expect((await closed.web.inject({ method: 'GET', url: '/api/alerts' })).statusCode).toBe(401);
  });
});

describe("an agent's spend alert", () => {
  it("fires when the agent's month-to-date spend reaches the threshold; another user's agent is 404", async () => {
    const u = await signUp(t.web);
    const stranger = await signUp(t.web);
    const agentId = `alert-agent-${Date.now().toString(36)}`;
    await t.database.db.kysely
      .insertInto('agents')
      .values({ id: agentId, user_id: u.id, name: 'Spender', status: 'running', subdomain: agentId, url: `https://${agentId}.example` })
      .execute();
    expect((await put(t, stranger.cookie, `/api/agents/${agentId}/alert`, { thresholdUsd: 1 })).statusCode).toBe(404);
    expect((await put(t, u.cookie, `/api/agents/${agentId}/alert`, { thresholdUsd: 0.5 })).statusCode).toBe(200);
    await tick();
    expect((await list(u.cookie))[0].state).toBe('armed'); // nothing spent yet
    t.platform.services.ai.usage.record({
      userId: u.id,
      agentId,
      model: 'openai/gpt-4o-mini',
      provider: 'router',
      promptTokens: 10,
      completionTokens: 10,
      totalTokens: 20,
      cost: 0.75,
      priced: true,
      billTo: null,
      createdAt: new Date(),
    });
    await t.platform.services.ai.usage.flush();
    await tick();
    const mail = await smtp.waitFor((m) => m.to.includes(u.email) && m.subject.startsWith('Agent Spender'));
    expect(mail.text).toContain('has spent $0.75 on models this month, reaching the alert threshold of $0.50');
    expect((await list(u.cookie))[0]).toMatchObject({ kind: 'budget', agentId, state: 'fired', firedValueUsd: 0.75 });
  });
});
