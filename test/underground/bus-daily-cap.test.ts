/**
 * §2 Plans "A2A messages/day" on the Underground bus (docs/underground.md "Daily cap"): an
 * account's agents together send at most their owner's plan's messages per UTC day (solo 100,
 * collective 500, label 2,000, network 10,000; admins network's). Past it POST
 * /api/underground/bus/send answers 429 with a sentence and `retryAfter` (seconds to the next
 * midnight UTC) and records nothing. The count lives in PostgreSQL, so it is exact when many
 * sends race on several replicas; a replay of an accepted message is not counted again; each
 * recipient of an AMPLIFY_ message counts.
 */
import { sql } from 'kysely';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import { type BusServiceOptions, createBusService } from '../../src/domains/underground/bus.service.ts';
import { encryptSecret } from '../../src/lib/crypto.ts';
import { AppError } from '../../src/lib/errors.ts';
import { agents, keyB, message, send, setupBusFixture, sign, t } from './bus-fixtures.ts';

// the per-minute send rate is another limit (bus-send-rate.test.ts): out of the way here
setupBusFixture({ UNDERGROUND_BUS_RATE_LIMIT: '100000' });

const noAdmins = { isAdmin: (o: { is_admin: boolean }) => o.is_admin };

/** A bus service as another backend replica runs it, on the same database. */
const replica = (more: Partial<BusServiceOptions> = {}) =>
  createBusService({ db: t.database.db, allowPrivateWebhooks: true, dailyCap: noAdmins, ...more });

let n = 0;
/** A new agent with an Underground wallet of `key`, owned by `userId` or by a new (solo) user. */
async function sender(key: PrivateKeyAccount, userId?: string): Promise<{ id: string; userId: string }> {
  const k = t.database.db.kysely;
  const tag = `cap${n++}${Date.now().toString(36)}`;
  const owner =
    userId ??
    (
      await k
        .insertInto('users')
        .values({ email: `${tag}@example.com`, name: tag, referral_code: `CAP-${tag.toUpperCase()}` })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
  const id = `bus-agent-${tag}`;
  await k.insertInto('agents').values({ id, user_id: owner, name: tag, subdomain: id, url: 'http://agent.test' }).execute();
  await k
    .insertInto('underground_agent_wallets')
    .values({ agent_id: id, user_id: owner, address: key.address, private_key_enc: encryptSecret(Buffer.alloc(32, 1), 'unused') })
    .execute();
  return { id, userId: owner };
}

const ownerOf = async (agentId: string) =>
  (await t.database.db.kysely.selectFrom('agents').select('user_id').where('id', '=', agentId).executeTakeFirstOrThrow()).user_id;
const counted = (userId: string) =>
  t.database.db.kysely
    .selectFrom('underground_a2a_daily')
    .select([sql<string>`day::text`.as('day'), 'sent'])
    .where('user_id', '=', userId)
    .orderBy('day')
    .execute();
const recorded = async (from: string[]) =>
  Number(
    (
      await t.database.db.kysely
        .selectFrom('underground_bus_messages')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('from_agent_id', 'in', from)
        .executeTakeFirstOrThrow()
    ).n,
  );
/** What a replica's send answered: its status, as the HTTP route would. */
const status = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (err: unknown) => (err instanceof AppError ? err.status : 500),
  );
const secondsToMidnightUtc = (at = new Date()) =>
  Math.ceil((Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1) - at.getTime()) / 1000);

describe('daily A2A cap per account (§2 Plans)', () => {
  it("solo: 100 a day for all of the owner's agents; 20 concurrent sends on two replicas at the edge pass exactly 10; replays are free", async () => {
    const owner = await ownerOf(agents.a);
    const keyA2 = privateKeyToAccount(generatePrivateKey());
    const a2 = await sender(keyA2, owner); // a second agent of the same account shares the allowance
    const other = replica({ sendRate: undefined });
    try {
      // 90 accepted, from both agents, 10 at a time
      const first = [];
      for (let batch = 0; batch < 9; batch++) {
        const ms = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? sign(message({ from: a2.id }), keyA2) : sign(message()))),
        );
        const codes = (await Promise.all(ms.map(send))).map((r) => r.statusCode);
        expect(codes, `batch ${batch}`).toEqual(Array(10).fill(200));
        first.push(...ms);
      }
      expect(await counted(owner)).toEqual([{ day: new Date().toISOString().slice(0, 10), sent: 90 }]);

      // 20 at once at the edge: 10 through this replica's HTTP route, 10 through another replica's service
      const edge = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? sign(message({ from: a2.id }), keyA2) : sign(message()))),
      );
      const outcomes = await Promise.all(
        edge.map(async (m, i) => {
          if (i < 10) {
            const res = await send(m);
            return { m, code: res.statusCode, body: res.json(), retryAfterHeader: res.headers['retry-after'] };
          }
          return { m, code: await status(other.send(m)) };
        }),
      );
      const accepted = outcomes.filter((o) => o.code === 200);
      const refused = outcomes.filter((o) => o.code === 429);
      expect(accepted).toHaveLength(10);
      expect(refused).toHaveLength(10);
      expect(await recorded([agents.a, a2.id])).toBe(100);
      expect((await counted(owner))[0]?.sent).toBe(100);
      // a refused message left nothing behind
      for (const { m } of refused)
        expect(
          await t.database.db.kysely
            .selectFrom('underground_bus_messages')
            .select('message_id')
            .where('message_id', '=', m.messageId)
            .execute(),
        ).toEqual([]);

      // over the cap, through the route: the sentence, retryAfter to midnight UTC, the header
      const over = await send(await sign(message()));
      expect(over.statusCode).toBe(429);
      const body = over.json();
      expect(body.error).toMatch(/Daily agent-to-agent message limit reached: the solo plan allows 100 messages a day \(UTC\)/);
      expect(body.error).toMatch(/100 have been sent today/);
      expect(body).toMatchObject({ limit: 100, sent: 100, plan: 'solo' });
      expect(Math.abs(body.retryAfter - secondsToMidnightUtc())).toBeLessThanOrEqual(5);
      expect(over.headers['retry-after']).toBe(String(body.retryAfter));
      // the other agent of the account is refused too
      expect((await send(await sign(message({ from: a2.id }), keyA2))).statusCode).toBe(429);

      // a replay of an accepted message (the recipient re-posts it) is acknowledged, not refused, not counted
      for (const m of [first[0], accepted[0]!.m]) {
        const again = await send(m);
        expect(again.statusCode).toBe(200);
        expect(again.json()).toMatchObject({ replayed: true, deliveries: 0 });
      }
      expect((await counted(owner))[0]?.sent).toBe(100);

      // the cap is the account's: another account's agent still sends
      expect((await send(await sign(message({ from: agents.b, to: agents.c }), keyB))).statusCode).toBe(200);
    } finally {
      await other.close();
    }
  });

  it("the owner's plan sets the cap (collective above solo), and an admin gets network's", async () => {
    const perDay = { solo: 2, collective: 4, label: 6, network: 8 };
    const bus = replica({ dailyCap: { ...noAdmins, perDay } });
    const key = privateKeyToAccount(generatePrivateKey());
    const s = await sender(key);
    const k = t.database.db.kysely;
    const sendAs = async () => status(bus.send(await sign(message({ from: s.id }), key)));
    try {
      await k.updateTable('users').set({ plan: 'collective' }).where('id', '=', s.userId).execute();
      for (let i = 0; i < 4; i++) expect(await sendAs()).toBe(200);
      const refused = await bus.send(await sign(message({ from: s.id }), key)).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).status).toBe(429);
      expect((refused as AppError).message).toMatch(/the collective plan allows 4 messages a day/);

      await k.updateTable('users').set({ is_admin: true }).where('id', '=', s.userId).execute();
      for (let i = 0; i < 4; i++) expect(await sendAs()).toBe(200);
      const overAdmin = await bus.send(await sign(message({ from: s.id }), key)).catch((e: unknown) => e);
      expect((overAdmin as AppError).message).toMatch(/the network plan allows 8 messages a day/);
      expect((await counted(s.userId))[0]?.sent).toBe(8);
    } finally {
      await bus.close();
    }
  });

  it('each recipient of an AMPLIFY_ message counts; a message that would pass the cap is refused whole', async () => {
    const bus = replica({ dailyCap: { ...noAdmins, perDay: { solo: 4 } } });
    const key = privateKeyToAccount(generatePrivateKey());
    const s = await sender(key);
    const amplify = () => sign(message({ from: s.id, action: 'AMPLIFY_EVENT', payload: { recipients: [agents.c, agents.f] } }), key);
    try {
      expect(await bus.send(await amplify())).toMatchObject({ replayed: false, deliveries: 3 });
      expect((await counted(s.userId))[0]?.sent).toBe(3);
      const m = await amplify();
      const err = (await bus.send(m).catch((e: unknown) => e)) as AppError;
      expect(err.status).toBe(429);
      expect(err.message).toMatch(/This message has 3 recipients and counts 3; 1 remain today/);
      expect(await recorded([s.id])).toBe(1);
      // the one left is still there for a plain message
      expect(await status(bus.send(await sign(message({ from: s.id }), key)))).toBe(200);
      expect((await counted(s.userId))[0]?.sent).toBe(4);
    } finally {
      await bus.close();
    }
  });

  it('the day is the UTC day: retryAfter counts to midnight UTC, and the next day the allowance is back', async () => {
    const key = privateKeyToAccount(generatePrivateKey());
    const s = await sender(key);
    const late = new Date('2031-03-04T23:59:30.000Z');
    const next = new Date('2031-03-05T00:00:05.000Z');
    const at = (d: Date) => replica({ now: () => d, dailyCap: { ...noAdmins, perDay: { solo: 1 } } });
    const [busLate, busNext] = [at(late), at(next)];
    const msg = (d: Date) => sign(message({ from: s.id, timestamp: d.getTime() }), key);
    try {
      expect(await status(busLate.send(await msg(late)))).toBe(200);
      const err = (await busLate.send(await msg(late)).catch((e: unknown) => e)) as AppError;
      expect(err.status).toBe(429);
      expect(err.extra).toMatchObject({ retryAfter: 30, limit: 1, sent: 1 });
      expect(await status(busNext.send(await msg(next)))).toBe(200);
      expect(await counted(s.userId)).toEqual(
        expect.arrayContaining([
          { day: '2031-03-04', sent: 1 },
          { day: '2031-03-05', sent: 1 },
        ]),
      );
    } finally {
      await Promise.all([busLate.close(), busNext.close()]);
    }
  });
});
