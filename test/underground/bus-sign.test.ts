/**
 * Agents sign bus messages without ever holding their wallet key (docs/underground.md "Signing for
 * an agent"): POST /api/underground/bus/sign with the agent's own platform key returns an
 * AgentMessage whose `from` is that agent, signed by its Underground wallet, which the bus accepts
 * and delivers. The key is never in the answer; another agent's key, the internal key or none is 401.
 */
import { type Hex, recoverMessageAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newPlatformKey } from '../../src/domains/agents/credentials.rules.ts';
import { createBusService } from '../../src/domains/underground/bus.service.ts';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { createUndergroundBusWorker } from '../../src/workers/underground-bus.ts';
import { type FakeWebhook, startFakeWebhook } from '../fakes/webhook.ts';
import { startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';
import { canonicalHash } from './bus-fixtures.ts';
import { as, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
let hook: FakeWebhook;
let sender: Owner & { key: string; wallet: string };
let receiver: Owner & { key: string };

/** A platform key for an agent inserted as setup (deploys issue them; that is not under test here). */
async function platformKey(who: Owner): Promise<string> {
  const k = newPlatformKey();
  await t.database.db.kysely
    .insertInto('agent_credentials')
    .values({
      agent_id: who.agentId,
      user_id: who.id,
      gateway_token_enc: 'unused',
      platform_key_hash: k.hash,
      platform_key_prefix: k.prefix,
    })
    .execute();
  return k.key;
}

beforeAll(async () => {
  t = await startTestPlatform({ UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS: 'true' });
  hook = await startFakeWebhook();
  const [a, b] = [await ownerWithAgent(t), await ownerWithAgent(t)];
  const wallet = await as(t, a, { method: 'POST', url: '/api/underground/wallets', payload: { agentId: a.agentId } });
  expect(wallet.statusCode).toBe(201);
  sender = { ...a, key: await platformKey(a), wallet: wallet.json().address };
  receiver = { ...b, key: await platformKey(b) };
  await t.database.db.kysely
    .updateTable('agents')
    .set({ config: JSON.stringify({ underground: { webhookUrl: hook.url } }) })
    .where('id', '=', receiver.agentId)
    .execute();
});
afterAll(async () => {
  await hook?.close();
  await t?.close();
});

const sign = (authorization: string | undefined, payload: object) =>
  t.backend.inject({
    method: 'POST',
    url: '/api/underground/bus/sign',
    headers: authorization ? { authorization } : {},
    payload,
  });

describe('POST /api/underground/bus/sign', () => {
  it('signs as the calling agent with its wallet; the bus accepts and delivers the message; the key is never returned', async () => {
    const before = Date.now();
    const res = await sign(`Bearer ${sender.key}`, {
      action: 'HELLO',
      to: receiver.agentId,
      payload: { text: 'hi', n: 1 },
      from: receiver.agentId, // ignored: the key decides who signs
      timestamp: 1,
    });
    expect(res.statusCode).toBe(200);
    const m = res.json();
    expect(Object.keys(m).sort()).toEqual(['action', 'from', 'messageId', 'payload', 'signature', 'timestamp', 'to']);
    expect(m).toMatchObject({ action: 'HELLO', from: sender.agentId, to: receiver.agentId, payload: { text: 'hi', n: 1 } });
    expect(m.messageId).toMatch(/^[0-9a-f-]{36}$/);
    expect(m.timestamp).toBeGreaterThanOrEqual(before);
    expect(m.timestamp).toBeLessThanOrEqual(Date.now());
    // the documented canonical form (bus-fixtures.ts) recovers to the agent's wallet
    const signer = await recoverMessageAddress({ message: { raw: canonicalHash(m) }, signature: m.signature as Hex });
    expect(signer.toLowerCase()).toBe(sender.wallet);
    // the sealed key, unsealed here, appears nowhere in the answer
    const sealed = await t.database.db.kysely
      .selectFrom('underground_agent_wallets')
      .select('private_key_enc')
      .where('agent_id', '=', sender.agentId)
      .executeTakeFirstOrThrow();
    const privateKey = decryptSecret(TEST_SECRETS.walletEncryptionKey, sealed.private_key_enc);
    expect(res.body.toLowerCase()).not.toContain(privateKey.slice(2).toLowerCase());
    expect(res.body).not.toContain(sealed.private_key_enc);

    const sent = await t.backend.inject({ method: 'POST', url: '/api/underground/bus/send', payload: m });
    expect(sent.statusCode).toBe(200);
    expect(sent.json()).toMatchObject({ success: true, messageId: m.messageId, replayed: false, deliveries: 1 });
    const bus = createBusService({ db: t.database.db, allowPrivateWebhooks: true });
    const worker = createUndergroundBusWorker({ bus, retryBaseMs: 20 });
    while (await worker.runOnce()) {}
    await bus.close();
    expect(hook.received.map((r) => r.message)).toEqual([m]);
  });

  it('keeps a messageId the agent chooses, so a retried send is acknowledged once', async () => {
    const res = await sign(`Bearer ${sender.key}`, { messageId: 'my-id-1', action: 'PING', to: receiver.agentId, payload: {} });
    expect(res.statusCode).toBe(200);
    expect(res.json().messageId).toBe('my-id-1');
  });

  it('401 without a key, with an unknown key, or with the internal key; nothing signed', async () => {
    const body = { action: 'HELLO', to: receiver.agentId, payload: {} };
    for (const auth of [undefined, 'Bearer apk_not-a-real-key', 'Bearer test-internal-key', `Basic ${sender.key}`]) {
      const res = await sign(auth, body);
      expect(res.statusCode, String(auth)).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
  });

  it('404 for an agent without an Underground wallet; 400 for a bad message', async () => {
    const none = await sign(`Bearer ${receiver.key}`, { action: 'HELLO', to: sender.agentId, payload: {} });
    expect(none.statusCode).toBe(404);
    expect(none.json().error).toMatch(/no Underground wallet/);
    for (const [payload, error] of [
      [{ action: 'hello', to: receiver.agentId, payload: {} }, /action must be upper-case/],
      [{ action: 'HELLO', payload: {} }, /to required/],
      [{ action: 'HELLO', to: receiver.agentId, payload: [1] }, /payload must be a JSON object/],
      [{ action: 'HELLO', to: receiver.agentId, payload: {}, messageId: 'x'.repeat(201) }, /messageId must be 1 to 200/],
    ] as const) {
      const res = await sign(`Bearer ${sender.key}`, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error).toMatch(error);
    }
  });
});
