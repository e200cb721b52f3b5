/**
 * §4.15 bus delivery with a webhook that never answers (docs/underground.md "Delivery"): one agent's
 * tarpit must not hold the bus for everyone. The attack: the sender queues messages to an agent
 * whose webhook accepts the connection and never answers, then another agent's message is sent;
 * that message must arrive at once, not after the tarpit's timeouts. Also: a claimed job is a
 * committed lease (no transaction or row lock held while the webhook answers, no second worker
 * takes it), and a job whose worker died is claimed again when its lease passes.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/config/limits.ts';
import { agents, deliveries, hookB, hookC, message, newBus, send, setupBusFixture, sign, t } from './bus-fixtures.ts';

setupBusFixture();

/** A webhook that reads the request and never answers; `held` are the requests it holds. */
const tarpit = { url: '', held: [] as { messageId: string; res: ServerResponse }[] };
const server = createServer((req, res) => {
  req.resume();
  tarpit.held.push({ messageId: String(req.headers['x-underground-message-id']), res });
});
beforeAll(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  tarpit.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  // agent f's webhook is this file's to move (bus-fixtures.ts): the tarpit
  await t.database.db.kysely
    .updateTable('agents')
    .set({ config: JSON.stringify({ underground: { webhookUrl: tarpit.url } }) })
    .where('id', '=', agents.f)
    .execute();
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const receivedBy = (hook: typeof hookC, messageId: string) => hook.received.some((b) => b.message?.messageId === messageId);

/** No transaction holds the row: locking it without waiting succeeds. */
const rowIsFree = (id: number) =>
  t.database.db.kysely.transaction().execute(async (trx) => {
    await sql`SELECT id FROM underground_bus_deliveries WHERE id = ${id} FOR UPDATE NOWAIT`.execute(trx);
    return true;
  });

describe('a webhook that never answers (tarpit)', () => {
  it('messages to the tarpit first, then one to another agent: that one arrives within a second, and the tarpit holds at most the per-host cap', async () => {
    // retries far away, so the tarpit's jobs are not retried during the test; the default 5 s timeout
    const bus = newBus(true, 60_000);
    const worker = bus.worker;
    await worker.start();
    try {
      const toTarpit = [];
      for (let i = 0; i < 5; i++) {
        const m = await sign(message({ to: agents.f }));
        expect((await send(m)).statusCode).toBe(200);
        worker.wake(); // as the platform's send does in its own process
        toTarpit.push(m.messageId);
      }
      // the tarpit holds a request now: a bus that delivers one job at a time is stuck on it
      await expect.poll(() => tarpit.held.length, { timeout: 3000, interval: 20 }).toBeGreaterThan(0);

      const m = await sign(message({ to: agents.c }));
      const t0 = Date.now();
      expect((await send(m)).statusCode).toBe(200);
      worker.wake();
      await expect.poll(() => receivedBy(hookC, m.messageId), { timeout: 1000, interval: 10 }).toBe(true);
      expect(Date.now() - t0).toBeLessThan(1000);

      // the tarpit holds as many requests as the per-host cap, and was never sent the other three meanwhile
      await expect.poll(() => tarpit.held.length, { timeout: 3000, interval: 20 }).toBe(LIMITS.undergroundBusMaxInFlightPerTarget);
      await new Promise((r) => setTimeout(r, 200));
      expect(tarpit.held).toHaveLength(LIMITS.undergroundBusMaxInFlightPerTarget);
      const rows = (await Promise.all(toTarpit.map(deliveries))).flat();
      const leased = rows.filter((r) => r.locked_by !== null);
      expect(leased).toHaveLength(LIMITS.undergroundBusMaxInFlightPerTarget);
      expect(rows.filter((r) => r.locked_by === null)).toMatchObject(Array(3).fill({ state: 'pending', attempts: 0 }));
    } finally {
      await worker.stop(); // aborts the held calls: their claims are given back, the attempts not counted
      await bus.close();
    }
    const given = await t.database.db.kysely
      .selectFrom('underground_bus_deliveries')
      .selectAll()
      .where('recipient_agent_id', '=', agents.f)
      .execute();
    expect(given.every((r) => r.state === 'pending' && r.locked_by === null && r.attempts === 0)).toBe(true);
    // leave the tarpit's jobs out of the next tests
    await t.database.db.kysely.deleteFrom('underground_bus_deliveries').where('recipient_agent_id', '=', agents.f).execute();
    for (const h of tarpit.held.splice(0)) h.res.destroy();
  });

  it('the claim is committed before the call: while the tarpit holds the request the row shows a lease, no transaction holds it, a second worker does not take it', async () => {
    const bus = newBus(true, 60_000);
    const second = newBus();
    const m = await sign(message({ to: agents.f }));
    expect((await send(m)).statusCode).toBe(200);
    const delivering = bus.processNext();
    try {
      await expect.poll(() => tarpit.held.length, { timeout: 3000, interval: 20 }).toBe(1);
      const [row] = await deliveries(m.messageId);
      expect(row).toMatchObject({ state: 'pending', attempts: 1 });
      expect(row?.locked_by).toEqual(expect.any(String));
      expect(row?.lease_until?.getTime()).toBeGreaterThan(Date.now());
      // a worker holding a transaction (the old shape) would hold the row lock: NOWAIT would fail
      expect(await rowIsFree(row!.id)).toBe(true);
      const open = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state LIKE 'idle in transaction%'`.execute(t.database.db.kysely);
      expect(open.rows[0]?.n).toBe(0);
      // a second worker finds nothing to take: the job is leased
      expect(await second.processNext()).toBe(false);
      expect(tarpit.held).toHaveLength(1);
    } finally {
      for (const h of tarpit.held.splice(0)) h.res.destroy(); // the call fails now: recorded as a failed attempt
      await delivering;
      await Promise.all([bus.close(), second.close()]);
    }
    expect(await deliveries(m.messageId)).toMatchObject([{ state: 'pending', attempts: 1, locked_by: null, lease_until: null }]);
    await t.database.db.kysely.deleteFrom('underground_bus_deliveries').where('message_id', '=', m.messageId).execute();
  });

  it('a job whose worker died after claiming it is claimed again by another worker once the lease passes, and delivered', async () => {
    const dying = newBus(true, 20, { leaseMs: 300 });
    const other = newBus();
    try {
      const m = await sign(message({ to: agents.b }));
      expect((await send(m)).statusCode).toBe(200);
      // the claim commits; its worker dies before calling the webhook (the delivery is never run)
      expect(await dying.service.claim()).toHaveLength(1);
      expect(await deliveries(m.messageId)).toMatchObject([{ state: 'pending', attempts: 1, locked_by: expect.any(String) }]);
      expect(await other.processNext()).toBe(false); // leased
      await new Promise((r) => setTimeout(r, 400));
      expect(await other.processNext()).toBe(true);
      expect(await deliveries(m.messageId)).toMatchObject([{ state: 'delivered', attempts: 2, locked_by: null }]);
      expect(hookB.received.filter((b) => b.message?.messageId === m.messageId)).toHaveLength(1);
    } finally {
      await Promise.all([dying.close(), other.close()]);
    }
  });
});
