/** §4.15 Underground bus delivery: webhooks on private addresses are refused unless the operator allows them (SSRF). */

import { fetch as undiciFetch } from 'undici';
import { describe, expect, it } from 'vitest';
import { createBusService } from '../../src/domains/underground/bus.service.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { checkWebhookUrl, createGuardedDispatcher, isPublicAddress } from '../../src/lib/webhook-guard.ts';
import { startTestPlatform, TEST_SECRETS } from '../helpers/platform.ts';

import { agents, deliveries, hookB, hookC, keyA, message, newBus, send, setupBusFixture, sign, t } from './bus-fixtures.ts';

setupBusFixture();

describe('SSRF: webhooks on private addresses (§4.15 delivery)', () => {
  it('the address check allows global unicast only: loopback, private, link-local, special-purpose and IPv4-embedding forms are refused', async () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      // forms a deny-list missed: IPv4-compatible, NAT64 local-use, site-local, 6to4
      '::7f00:1',
      '64:ff9b:1::7f00:1',
      'fec0::1',
      '2002:7f00:1::',
      // the other IPv4-in-IPv6 forms, even around a public IPv4 address: what they reach depends on the network
      '::ffff:8.8.8.8',
      '::ffff:7f00:1',
      '64:ff9b::8.8.8.8',
      '2001::1', // Teredo
      // special-purpose blocks inside 2000::/3, and IPv4 ones
      '2001:db8::1',
      '3fff::1',
      '192.88.99.1',
      '198.18.0.1',
      '192.0.2.1',
      '255.255.255.255',
      '224.0.0.1',
      'ff02::1',
      'not-an-address',
    ])
      expect(isPublicAddress(a), a).toBe(false);
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e']) expect(isPublicAddress(a), a).toBe(true);
    for (const url of ['http://127.0.0.1:9/x', 'http://10.0.0.1/x', 'http://localhost:9/x', 'http://[::1]:9/x'])
      await expect(checkWebhookUrl(url, false), url).rejects.toThrow(/non-public address/);
    await expect(checkWebhookUrl('ftp://8.8.8.8/x', false)).rejects.toThrow(/http or https/);
    await expect(checkWebhookUrl('http://127.0.0.1:9/x', true)).resolves.toBeInstanceOf(URL);
  });

  it('without UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS a send to a webhook on 127.0.0.1, 10.x or localhost is refused (400) and nothing is recorded', async () => {
    const strict = createBusService({ db: t.database.db, allowPrivateWebhooks: false });
    const k = t.database.db.kysely;
    for (const url of [hookB.url, 'http://10.0.0.1/hook', hookB.url.replace('127.0.0.1', 'localhost')]) {
      await k
        .updateTable('agents')
        .set({ config: JSON.stringify({ underground: { webhookUrl: url } }) })
        .where('id', '=', agents.f)
        .execute();
      const m = await sign(message({ to: agents.f }));
      await expect(strict.send(m as never), url).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/non-public address/),
      });
      expect(await deliveries(m.messageId)).toEqual([]);
    }
    await strict.close();
    // agent F back on a webhook the other tests may use
    await k
      .updateTable('agents')
      .set({ config: JSON.stringify({ underground: { webhookUrl: hookC.url } }) })
      .where('id', '=', agents.f)
      .execute();
  });

  it('the delivery connection checks the name again when it connects (DNS rebinding): localhost refused, allowed only with the setting', async () => {
    const url = hookB.url.replace('127.0.0.1', 'localhost');
    const strict = createGuardedDispatcher(false, 2000);
    const open = createGuardedDispatcher(true, 2000);
    try {
      const refused = await undiciFetch(url, { method: 'POST', body: '{}', dispatcher: await strict.get() }).then(
        () => null,
        (err: Error) => err,
      );
      expect(String((refused?.cause as Error | undefined)?.message ?? refused)).toMatch(/non-public address/);
      const ok = await undiciFetch(url, {
        method: 'POST',
        body: '{"probe":true}',
        headers: { 'content-type': 'application/json' },
        dispatcher: await open.get(),
      });
      expect(ok.status).toBe(200);
    } finally {
      await Promise.all([strict.close(), open.close()]);
    }
  });

  it('through the route of a platform with the default settings: every non-global-unicast webhook is a 400 (the IPv6 forms a deny-list missed, loopback spellings, names resolving to loopback); a global unicast one is accepted', async () => {
    const strictPlatform = await startTestPlatform(); // UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS unset: false
    try {
      expect(strictPlatform.config.UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS).toBe(false);
      const k = strictPlatform.database.db.kysely;
      const user = await k
        .insertInto('users')
        .values({ email: 'bus-strict@example.com', name: 'strict', referral_code: 'BUS-STRICT' })
        .returning('id')
        .executeTakeFirstOrThrow();
      // same agent ids as in the main platform (another database), so `message()` and `sign()` apply
      for (const [id, url] of [
        [agents.a, null],
        [agents.b, hookB.url],
        [agents.c, 'http://10.0.0.1/hook'],
        [agents.f, hookB.url.replace('127.0.0.1', 'localhost')],
      ] as const)
        await k
          .insertInto('agents')
          .values({
            id,
            user_id: user.id,
            name: 'n',
            subdomain: id,
            url: 'http://agent.test',
            config: JSON.stringify(url ? { underground: { webhookUrl: url } } : {}),
          })
          .execute();
      await k
        .insertInto('underground_agent_wallets')
        .values({
          agent_id: agents.a,
          user_id: user.id,
          address: keyA.address,
          private_key_enc: encryptSecret(TEST_SECRETS.walletEncryptionKey, 'unused'),
        })
        .execute();
      for (const to of [agents.b, agents.c, agents.f]) {
        const res = await strictPlatform.backend.inject({
          method: 'POST',
          url: '/api/underground/bus/send',
          payload: await sign(message({ to })),
        });
        expect(res.statusCode, to).toBe(400);
        expect(res.json().error).toMatch(/non-public address/);
      }
      // agent C's webhook moved through each address; every one refused, nothing recorded
      const refused = [
        'http://[::7f00:1]:3790/h',
        'http://[64:ff9b:1::7f00:1]:3790/h',
        'http://[fec0::1]:3790/h',
        'http://[2002:7f00:1::]:3790/h',
        'http://[::ffff:127.0.0.1]:3790/h',
        'http://2130706433:3790/h',
        'http://0x7f.1:3790/h',
        'http://0:3790/h',
        'http://[::]:3790/h',
        'http://[::ffff:8.8.8.8]/h',
        'http://[64:ff9b::808:808]/h',
        'http://[2001::1]/h',
        'http://[2001:db8::1]/h',
        'http://[fd00::1]/h',
        'http://[fe80::1]/h',
        'http://169.254.169.254/latest/meta-data',
        'http://192.88.99.1/h',
        'http://255.255.255.255/h',
      ];
      const moveC = (url: string) =>
        k
          .updateTable('agents')
          .set({ config: JSON.stringify({ underground: { webhookUrl: url } }) })
          .where('id', '=', agents.c)
          .execute();
      for (const url of refused) {
        await moveC(url);
        const res = await strictPlatform.backend.inject({
          method: 'POST',
          url: '/api/underground/bus/send',
          payload: await sign(message({ to: agents.c })),
        });
        expect(res.statusCode, url).toBe(400);
        expect(res.json().error, url).toMatch(/non-public address/);
      }
      expect(await k.selectFrom('underground_bus_deliveries').select('id').execute()).toEqual([]);
      // a global unicast address is accepted (this platform runs no delivery worker: nothing is sent)
      for (const url of ['http://8.8.8.8:9/h', 'http://[2606:4700:4700::1111]:9/h']) {
        await moveC(url);
        const res = await strictPlatform.backend.inject({
          method: 'POST',
          url: '/api/underground/bus/send',
          payload: await sign(message({ to: agents.c })),
        });
        expect(res.statusCode, url).toBe(200);
        expect(res.json()).toMatchObject({ deliveries: 1 });
      }
    } finally {
      await strictPlatform.close();
    }
  });

  it('a job accepted while private targets were allowed is not delivered by a worker that refuses them (checked again at delivery)', async () => {
    const m = await sign(message());
    expect((await send(m)).statusCode).toBe(200);
    const strict = newBus(false);
    expect(await strict.processNext()).toBe(true);
    await strict.close();
    const [row] = await deliveries(m.messageId);
    expect(row).toMatchObject({ state: 'pending', attempts: 1 });
    expect(row?.last_error).toMatch(/non-public address/);
    expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(0);
    await t.database.db.kysely
      .updateTable('underground_bus_deliveries')
      .set({ state: 'failed' })
      .where('message_id', '=', m.messageId)
      .execute();
  });
});
