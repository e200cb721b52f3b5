/**
 * Row-level security on the Underground tables (§4.15, docs/security.md "Database roles"): under
 * a user's database context only that user's wallets, events, splits and recipients are visible;
 * a row for another user's agent cannot be written, neither under one's own user id (the
 * (agent, user) foreign key) nor under the other's (the policy's WITH CHECK).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { as, fund, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
let alice: Owner;
let bob: Owner;
const TABLES = ['underground_agent_wallets', 'underground_events', 'underground_splits', 'underground_split_recipients'] as const;

beforeAll(async () => {
  t = await startTestPlatform();
  alice = await ownerWithAgent(t);
  bob = await ownerWithAgent(t);
  for (const who of [alice, bob]) {
    await fund(t, who, 1_000_000); // the split below is paid from the owner's wallet
    const ok = [
      await as(t, who, { method: 'POST', url: '/api/underground/wallets', payload: { agentId: who.agentId } }),
      await as(t, who, {
        method: 'POST',
        url: '/api/underground/events',
        payload: {
          agentId: who.agentId,
          name: 'Gig',
          description: 'd',
          venue: 'v',
          eventDate: '2026-09-01T20:00:00Z',
          ticketPriceUsdc: '5',
          totalTickets: 10,
        },
      }),
      await as(t, who, {
        method: 'POST',
        url: '/api/underground/splits',
        payload: { agentId: who.agentId, name: 'S', totalAmount: '1', recipients: [{ address: `0x${'a'.repeat(40)}`, share: 100 }] },
      }),
    ];
    expect(ok.map((r) => r.statusCode)).toEqual([201, 201, 201]);
  }
});
afterAll(() => t?.close());

describe('Underground tables under row-level security', () => {
  it("each user's context sees only their own rows; no user context sees none", async () => {
    for (const who of [alice, bob]) {
      for (const table of TABLES) {
        const rows = await t.database.db.withUser(who.id, (trx) => trx.selectFrom(table).select('user_id').execute());
        expect(rows, table).toEqual([{ user_id: who.id }]);
      }
    }
    for (const table of TABLES) {
      expect(await t.database.db.withoutUser((trx) => trx.selectFrom(table).select('user_id').execute()), table).toEqual([]);
    }
  });

  it("a row for another user's agent is refused under either user id", async () => {
    const event = (userId: string) => ({
      agent_id: bob.agentId,
      user_id: userId,
      name: 'x',
      description: 'x',
      venue: 'x',
      event_date: new Date(),
      ticket_price_usdc: '1',
      total_tickets: 1,
    });
    // own user id, bob's agent: the (agent, user) foreign key
    await expect(
      t.database.db.withUser(alice.id, (trx) => trx.insertInto('underground_events').values(event(alice.id)).execute()),
    ).rejects.toThrow(/foreign key/);
    // bob's user id: the policy's WITH CHECK
    await expect(
      t.database.db.withUser(alice.id, (trx) => trx.insertInto('underground_events').values(event(bob.id)).execute()),
    ).rejects.toThrow(/row-level security/);
    // and another user's wallet row cannot be changed
    const updated = await t.database.db.withUser(alice.id, (trx) =>
      trx
        .updateTable('underground_agent_wallets')
        .set({ address: `0x${'b'.repeat(40)}` })
        .where('agent_id', '=', bob.agentId)
        .executeTakeFirst(),
    );
    expect(Number(updated.numUpdatedRows)).toBe(0);
  });
});
