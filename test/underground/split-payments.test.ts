/**
 * Royalty splits move money (docs/underground.md "Royalty splits"): the owner's wallet pays the
 * total through the ledger, each recipient's address is credited its amount, in one transaction.
 * A short balance (or no wallet) is 402 `insufficient_balance` and writes nothing: no split, no
 * journal row; parallel splits never spend more than the wallet holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { as, balanceOf, counts, fund, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
// sign-ups are rate limited per address: five owners for the whole file
let carol: Owner;
let dave: Owner;
let erin: Owner;
let gina: Owner;
let hank: Owner;
beforeAll(async () => {
  t = await startTestPlatform();
  [carol, dave, erin, gina, hank] = [
    await ownerWithAgent(t),
    await ownerWithAgent(t),
    await ownerWithAgent(t),
    await ownerWithAgent(t),
    await ownerWithAgent(t),
  ];
});
afterAll(() => t?.close());

const R1 = '0x4444444444444444444444444444444444444444';
const R2 = '0x5555555555555555555555555555555555555555';
const body = (agentId: string, totalAmount: string) => ({
  agentId,
  name: 'Tour royalties',
  totalAmount,
  recipients: [
    { address: R1, share: 75 },
    { address: R2, share: 25 },
  ],
});
const post = (who: Owner, payload: object, headers: Record<string, string> = {}) =>
  as(t, who, { method: 'POST', url: '/api/underground/splits', payload, headers });
const journalRows = async () =>
  Number(
    (
      await t.database.db.kysely
        .selectFrom('ledger_entries')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

describe('royalty splits pay through the ledger', () => {
  it('402 insufficient_balance when the wallet is short: no split, no money moved', async () => {
    const wallet = await fund(t, carol, 4_000_000); // $4
    const [before, rows, r1] = [await counts(t), await journalRows(), await balanceOf(t, R1)];
    const res = await post(carol, body(carol.agentId, '4.000001'), { 'idempotency-key': 'short-1' });
    expect(res.statusCode).toBe(402);
    expect(res.json()).toEqual({
      error: 'insufficient_balance',
      message: 'The split needs 4.000001 USDC; your wallet balance is 4.00',
      balance: '4.00',
      cost: '4.000001',
    });
    expect(await counts(t)).toEqual(before);
    expect(await journalRows()).toBe(rows);
    expect(await balanceOf(t, wallet)).toBe(4_000_000);
    expect(await balanceOf(t, R1)).toBe(r1);
    // the refused key is not spent: once funded, the same request goes through
    await fund(t, carol, 1);
    const again = await post(carol, body(carol.agentId, '4.000001'), { 'idempotency-key': 'short-1' });
    expect(again.statusCode).toBe(201);
    expect(await balanceOf(t, wallet)).toBe(0);
    expect(await balanceOf(t, R1)).toBe(r1 + 3_000_001);
  });

  it('402 for an owner without a wallet, with balance "0"', async () => {
    const before = await counts(t);
    const res = await post(dave, body(dave.agentId, '1'));
    expect(res.statusCode).toBe(402);
    expect(res.json()).toMatchObject({ error: 'insufficient_balance', balance: '0', cost: '1.00' });
    expect(await counts(t)).toEqual(before);
  });

  it('20 parallel splits on a wallet funded for 7 pay exactly 7, and the ledger stays consistent', async () => {
    const wallet = await fund(t, erin, 7_000_000);
    const [r1, r2, before] = [await balanceOf(t, R1), await balanceOf(t, R2), await counts(t)];
    const results = await Promise.all(Array.from({ length: 20 }, () => post(erin, body(erin.agentId, '1'))));
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(7);
    expect(codes.filter((c) => c === 402)).toHaveLength(13);
    expect((await counts(t)).splits - before.splits).toBe(7);
    expect(await balanceOf(t, wallet)).toBe(0);
    expect(await balanceOf(t, R1)).toBe(r1 + 7 * 750_000);
    expect(await balanceOf(t, R2)).toBe(r2 + 7 * 250_000);
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });

  it('a recipient that is no platform wallet is held in the ledger under its address; a zero amount writes no row', async () => {
    const frank = carol; // spent to 0 by the first test
    await fund(t, frank, 10);
    const outsider = `0x${'ab'.repeat(20)}`;
    // 0.000001 USDC split 99/1: 1 micro to the first, 0 to the second
    const res = await post(frank, {
      agentId: frank.agentId,
      name: 'Tiny',
      totalAmount: '0.000001',
      recipients: [
        { address: outsider, share: 99 },
        { address: R2, share: 1 },
      ],
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().recipients.map((r: { amountMicros: number }) => r.amountMicros)).toEqual([1, 0]);
    const id = res.json().splitId;
    expect(await balanceOf(t, outsider)).toBe(1);
    expect(await t.platform.services.ledger.entry(`underground_split:${id}:0`)).toMatchObject({ address: outsider, amountMicros: 1 });
    expect(await t.platform.services.ledger.entry(`underground_split:${id}:1`)).toBeUndefined();
  });

  it('two owners paying each other at once in opposite directions both complete', async () => {
    const [gw, hw] = [await fund(t, gina, 5_000_000), await fund(t, hank, 5_000_000)];
    const to = (agentId: string, address: string) => ({
      agentId,
      name: 'Back and forth',
      totalAmount: '0.1',
      recipients: [{ address, share: 100 }],
    });
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? post(gina, to(gina.agentId, hw)) : post(hank, to(hank.agentId, gw)))),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array(10).fill(201));
    expect(await balanceOf(t, gw)).toBe(5_000_000);
    expect(await balanceOf(t, hw)).toBe(5_000_000);
  });
});
