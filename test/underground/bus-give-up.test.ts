/**
 * §4.15 bus delivery gives up (docs/underground.md "Delivery"): a webhook that never answers 2xx is
 * tried BUS_MAX_ATTEMPTS times with growing backoff, then the job is `failed` with the last error
 * and nothing tries it again. The backoff's base is the test setting `retryBaseMs` (1 ms here, 5 s
 * in production), so the ten attempts take well under a second.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUS_MAX_ATTEMPTS } from '../../src/domains/underground/bus.service.ts';
import { agents, deliveries, message, newBus, send, setupBusFixture, sign, t } from './bus-fixtures.ts';

setupBusFixture();

/** A webhook that records every call's `x-underground-attempt` and answers `status`. */
const hook = { status: 500, attempts: [] as string[], url: '' };
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    hook.attempts.push(String(req.headers['x-underground-attempt']));
    res.writeHead(hook.status).end();
  });
});
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  hook.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  // agent f's webhook is this test's to move (bus-fixtures.ts)
  await t.database.db.kysely
    .updateTable('agents')
    .set({ config: JSON.stringify({ underground: { webhookUrl: hook.url } }) })
    .where('id', '=', agents.f)
    .execute();
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('bus delivery after the last attempt', () => {
  it(`a webhook that always fails is tried ${BUS_MAX_ATTEMPTS} times, then the job is failed for good`, async () => {
    const bus = newBus(true, 1);
    try {
      const m = await sign(message({ to: agents.f }));
      expect((await send(m)).statusCode).toBe(200);
      // work the queue until the job leaves `pending`; between retries nothing is due for a few ms
      const deadline = Date.now() + 30_000;
      while ((await deliveries(m.messageId))[0]!.state === 'pending') {
        if (Date.now() > deadline) throw new Error('the job never left pending');
        if (!(await bus.processNext())) await new Promise((r) => setTimeout(r, 5));
      }
      expect(await deliveries(m.messageId)).toMatchObject([
        { state: 'failed', attempts: BUS_MAX_ATTEMPTS, last_error: 'webhook answered 500' },
      ]);
      expect(hook.attempts).toEqual(Array.from({ length: BUS_MAX_ATTEMPTS }, (_, i) => String(i + 1)));
      // given up: no job is due any more, and the webhook is not called again even once it recovers
      hook.status = 200;
      await new Promise((r) => setTimeout(r, 50));
      expect(await bus.processNext()).toBe(false);
      expect(hook.attempts).toHaveLength(BUS_MAX_ATTEMPTS);
      expect((await deliveries(m.messageId))[0]).toMatchObject({ state: 'failed', attempts: BUS_MAX_ATTEMPTS });
    } finally {
      await bus.close();
    }
  });
});
