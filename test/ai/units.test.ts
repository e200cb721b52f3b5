/** Pure rules of the AI layer: plan headers, greetings, algorithm mode, SSE parsing across chunk boundaries. */
import { describe, expect, it } from 'vitest';
import { applyAlgorithmMode, checkPlan, isTrivialGreeting, monthlyQuota } from '../../src/domains/ai/plan.rules.ts';
import { parseSse } from '../../src/domains/ai/providers/provider-http.client.ts';

const isAdmin = (e: string | undefined) => e?.toLowerCase() === 'boss@example.com';

describe('checkPlan', () => {
  it('defaults x-user-id to anonymous and keeps role and email', () => {
    const r = checkPlan(
      { 'x-user-plan': 'Label', 'x-stripe-subscription-id': 's', 'x-user-role': 'owner', 'x-user-email': 'a@b.c' },
      isAdmin,
    );
    expect(r).toEqual({ ok: true, actor: { userId: 'anonymous', email: 'a@b.c', role: 'owner', plan: 'label', isAdmin: false } });
  });
  it('admins need neither plan nor subscription', () => {
    expect(checkPlan({ 'x-user-email': 'BOSS@example.com', 'x-user-id': 'u1' }, isAdmin)).toMatchObject({
      ok: true,
      actor: { plan: 'network', isAdmin: true, userId: 'u1' },
    });
  });
  it('PLAN_REQUIRED before SUBSCRIPTION_REQUIRED', () => {
    expect(checkPlan({}, isAdmin)).toMatchObject({ ok: false, code: 'PLAN_REQUIRED' });
    expect(checkPlan({ 'x-user-plan': 'free', 'x-stripe-subscription-id': 's' }, isAdmin)).toMatchObject({
      ok: false,
      code: 'PLAN_REQUIRED',
    });
    expect(checkPlan({ 'x-user-plan': 'solo', 'x-stripe-subscription-id': '  ' }, isAdmin)).toMatchObject({
      ok: false,
      code: 'SUBSCRIPTION_REQUIRED',
    });
  });
  it('quotas per plan (§4.9)', () => {
    expect(monthlyQuota({ plan: 'solo', isAdmin: false })).toBe(2_000_000);
    expect(monthlyQuota({ plan: 'collective', isAdmin: false })).toBe(6_000_000);
    expect(monthlyQuota({ plan: 'label', isAdmin: false })).toBe(20_000_000);
    expect(monthlyQuota({ plan: 'network', isAdmin: false })).toBe(Infinity);
    expect(monthlyQuota({ plan: 'solo', isAdmin: true })).toBe(Infinity);
  });
});

describe('algorithm mode', () => {
  it.each(['hi', 'Hello!', 'hey there', 'good morning', 'thanks!', 'How are you?'])('%j is a trivial greeting', (g) =>
    expect(isTrivialGreeting(g)).toBe(true),
  );
  it.each(['hi, can you fix my build?', 'hello world program in rust', 'thanks, now write the tests'])('%j is not', (g) =>
    expect(isTrivialGreeting(g)).toBe(false),
  );
  it('only looks at the latest user message', () => {
    const msgs = [
      { role: 'user' as const, content: 'hello' },
      { role: 'assistant' as const, content: 'Hi!' },
      { role: 'user' as const, content: 'Plan a migration' },
    ];
    expect(applyAlgorithmMode(msgs)[0]!.role).toBe('system');
    expect(applyAlgorithmMode(msgs)).toHaveLength(4);
  });
});

describe('parseSse', () => {
  it('joins lines split across chunks and handles CRLF and event names', async () => {
    async function* body() {
      for (const s of ['event: mess', 'age_start\r\ndata: {"a"', ':1}\r\n\r\n', 'data: x\n', 'data: y\n\n: comment\n\ndata: [DONE]\n\n'])
        yield Buffer.from(s);
    }
    const out = [];
    for await (const m of parseSse(body())) out.push(m);
    expect(out).toEqual([
      { event: 'message_start', data: '{"a":1}' },
      { event: undefined, data: 'x\ny' },
      { event: undefined, data: '[DONE]' },
    ]);
  });
});
