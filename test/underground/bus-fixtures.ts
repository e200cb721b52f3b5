/**
 * Shared setup of the Underground bus tests (§4.15): a platform with UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS
 * (its receivers are local), agents of different users, wallets with known keys, and helpers that
 * sign messages in the documented canonical form. The bindings are filled by setupBusFixture's beforeAll.
 */

import { type Hex, keccak256, toBytes } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll } from 'vitest';
import { type BusServiceOptions, createBusService } from '../../src/domains/underground/bus.service.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { createUndergroundBusWorker } from '../../src/workers/underground-bus.ts';
import { type FakeWebhook, startFakeWebhook } from '../fakes/webhook.ts';
import { startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

export let t: TestPlatform;
export let hookB: FakeWebhook;
export let hookC: FakeWebhook;
/** sender A (wallet), recipients B and C (webhooks), D (no webhook), F (webhook the SSRF test moves) */
export const agents: Record<'a' | 'b' | 'c' | 'd' | 'f', string> = { a: '', b: '', c: '', d: '', f: '' };
export const keyA = privateKeyToAccount(generatePrivateKey());
export const keyB = privateKeyToAccount(generatePrivateKey());
export const stranger = privateKeyToAccount(generatePrivateKey());

/** A bus service and its delivery worker, as a second backend process would run them (retries after 20 ms). */
export const newBus = (allowPrivate = true, retryBaseMs = 20, more: Partial<BusServiceOptions> = {}) => {
  const service = createBusService({ db: t.database.db, allowPrivateWebhooks: allowPrivate, ...more });
  const worker = createUndergroundBusWorker({ bus: service, retryBaseMs, pollMs: 20 });
  return {
    service,
    worker,
    /** claims one due job and delivers it, its outcome recorded; false when no job could be claimed */
    processNext: async () => (await worker.runOnce()) > 0,
    close: () => service.close(),
  };
};
export const drain = async (bus = newBus()) => {
  while (await bus.processNext()) {}
  await bus.close();
};

export type Unsigned = { messageId: string; action: string; from: string; to: string; payload: Record<string, unknown>; timestamp: number };
let seq = 0;
export const message = (over: Partial<Unsigned> = {}): Unsigned => ({
  messageId: `msg-${Date.now()}-${seq++}`,
  action: 'HELLO',
  from: agents.a,
  to: agents.b,
  payload: { text: 'hi' },
  timestamp: Date.now(),
  ...over,
});
/** The documented canonical form's keccak256, written out here rather than imported, so a change to it fails the bus tests. */
export function canonicalHash(m: Unsigned): Hex {
  const json = JSON.stringify({
    messageId: m.messageId,
    action: m.action,
    from: m.from,
    to: m.to,
    payload: m.payload,
    timestamp: m.timestamp,
  });
  return keccak256(toBytes(json));
}

export async function sign(m: Unsigned, by: PrivateKeyAccount = keyA) {
  const signature: Hex = await by.signMessage({ message: { raw: canonicalHash(m) } });
  return { ...m, signature };
}
export const send = (body: unknown) => t.backend.inject({ method: 'POST', url: '/api/underground/bus/send', payload: body as object });
export const deliveries = (messageId: string) =>
  t.database.db.kysely.selectFrom('underground_bus_deliveries').selectAll().where('message_id', '=', messageId).execute();

/** Registers the file's setup: a platform allowing private webhooks (the local receivers), agents, wallets; `env` adds settings. */
export function setupBusFixture(env: Record<string, string> = {}) {
  beforeAll(async () => {
    t = await startTestPlatform({ UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS: 'true', ...env });
    [hookB, hookC] = await Promise.all([startFakeWebhook(), startFakeWebhook()]);
    const k = t.database.db.kysely;
    // agents of different users; the rows are setup, not the behaviour under test
    for (const name of Object.keys(agents) as (keyof typeof agents)[]) {
      const tag = `${name}${Date.now().toString(36)}`;
      const user = await k
        .insertInto('users')
        .values({ email: `bus-${tag}@example.com`, name: tag, referral_code: `BUS-${tag.toUpperCase()}` })
        .returning('id')
        .executeTakeFirstOrThrow();
      agents[name] = `bus-agent-${tag}`;
      await k
        .insertInto('agents')
        .values({ id: agents[name], user_id: user.id, name, subdomain: agents[name], url: 'http://agent.test' })
        .execute();
    }
    const hooks: Record<string, string> = {
      [agents.b]: hookB.url,
      [agents.c]: hookC.url,
      [agents.f]: hookC.url,
    };
    for (const [id, url] of Object.entries(hooks))
      await k
        .updateTable('agents')
        .set({ config: JSON.stringify({ underground: { webhookUrl: url } }) })
        .where('id', '=', id)
        .execute();
    for (const [id, acct] of [
      [agents.a, keyA],
      [agents.b, keyB],
    ] as const) {
      const owner = await k.selectFrom('agents').select('user_id').where('id', '=', id).executeTakeFirstOrThrow();
      await k
        .insertInto('underground_agent_wallets')
        .values({
          agent_id: id,
          user_id: owner.user_id,
          address: acct.address,
          private_key_enc: encryptSecret(TEST_SECRETS.walletEncryptionKey, 'unused'),
        })
        .execute();
    }
  });
  afterAll(async () => {
    await Promise.all([hookB?.close(), hookC?.close()]);
    await t?.close();
  });
}
