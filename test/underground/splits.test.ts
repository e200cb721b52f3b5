/**
 * §4.15 royalty splits (§2 "Royalty split"): shares are percentages summing to exactly 100; each
 * recipient's amount in integer micro-USDC, summing exactly to the total, paid from the owner's
 * wallet to each recipient through the ledger in one transaction; Idempotency-Key makes 50
 * parallel identical requests one split and one payment; another user's agent 403; bad input 400
 * and a short balance 402, with nothing written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { splitAmounts } from '../../src/domains/underground/split-math.rules.ts';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { as, balanceOf, counts, fund, type Owner, ownerWithAgent } from './fixtures.ts';

let t: TestPlatform;
let alice: Owner;
let bob: Owner;
let aliceWallet: string;

beforeAll(async () => {
  t = await startTestPlatform();
  alice = await ownerWithAgent(t);
  bob = await ownerWithAgent(t);
  aliceWallet = await fund(t, alice, 10_000_000_000); // $10 000: every split below
  await fund(t, bob, 1_000_000_000);
});
afterAll(() => t?.close());

const A = '0x1111111111111111111111111111111111111111';
const B = '0x2222222222222222222222222222222222222222';
const C = '0x3333333333333333333333333333333333333333';
const split = (agentId: string, over: Record<string, unknown> = {}) => ({
  agentId,
  name: 'EP royalties',
  totalAmount: '100.000001',
  recipients: [
    { address: A, share: 33.34 },
    { address: B.toUpperCase().replace('0X', '0x'), share: 33.33 },
    { address: C, share: 33.33 },
  ],
  ...over,
});
const post = (who: Owner, body: unknown, headers: Record<string, string> = {}) =>
  as(t, who, { method: 'POST', url: '/api/underground/splits', payload: body as object, headers });

describe('§4.15 POST /api/underground/splits', () => {
  it('records each recipient’s micro-USDC amount, summing exactly to the total, and pays it from the owner’s wallet', async () => {
    const [paying, a, b, c] = await Promise.all([aliceWallet, A, B, C].map((x) => balanceOf(t, x)));
    const res = await post(alice, { ...split(alice.agentId), userId: bob.id, fromAddress: B });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      success: true,
      splitId: expect.any(Number),
      status: 'completed',
      // 100.000001 USDC = 100 000 001 micros: floors 33 340 000 + 33 330 000 + 33 330 000 = 100 000 000,
      // the one micro left goes to the first recipient
      recipients: [
        { address: A, share: 33.34, amountMicros: 33_340_001 },
        { address: B, share: 33.33, amountMicros: 33_330_000 },
        { address: C, share: 33.33, amountMicros: 33_330_000 },
      ],
    });
    const stored = await t.database.db.kysely
      .selectFrom('underground_splits')
      .selectAll()
      .where('id', '=', body.splitId)
      .executeTakeFirstOrThrow();
    // the header's user, never the body's userId
    expect(stored).toMatchObject({ user_id: alice.id, agent_id: alice.agentId, total_micros: 100_000_001, status: 'completed' });
    const rows = await t.database.db.kysely
      .selectFrom('underground_split_recipients')
      .select(['address', 'amount_micros'])
      .where('split_id', '=', body.splitId)
      .orderBy('position')
      .execute();
    expect(rows.reduce((s, r) => s + r.amount_micros, 0)).toBe(100_000_001);
    // the money moved: the owner paid the total (not the body's fromAddress), each recipient got its amount
    expect(await balanceOf(t, aliceWallet)).toBe(paying! - 100_000_001);
    expect(await balanceOf(t, A)).toBe(a! + 33_340_001);
    expect(await balanceOf(t, B)).toBe(b! + 33_330_000);
    expect(await balanceOf(t, C)).toBe(c! + 33_330_000);
    const journal = await t.platform.services.ledger.journal(aliceWallet, { limit: 1 });
    expect(journal[0]).toMatchObject({ amountMicros: -100_000_001, description: 'Royalty split paid' });
    expect(await t.platform.services.ledger.entry(`underground_split:${body.splitId}:1`)).toMatchObject({
      address: B,
      amountMicros: 33_330_000,
    });
    expect(await t.platform.services.ledger.audit()).toEqual([]);
  });

  it('split arithmetic never creates or loses a micro', () => {
    for (const total of [1, 2, 3, 7, 999_999, 9_999_999_999_999]) {
      for (const bps of [[10_000], [5_000, 5_000], [3_334, 3_333, 3_333], [1, 9_999], [2_500, 2_500, 2_500, 2_500]]) {
        const amounts = splitAmounts(total, bps);
        expect(amounts.reduce((s, a) => s + a, 0)).toBe(total);
        expect(amounts.every((a) => Number.isSafeInteger(a) && a >= 0)).toBe(true);
      }
    }
  });

  it('50 parallel identical requests with one Idempotency-Key create ONE split and pay it once', async () => {
    const before = await counts(t);
    const [paying, a, b, c] = await Promise.all([aliceWallet, A, B, C].map((x) => balanceOf(t, x)));
    const key = `k-${Date.now()}`;
    const results = await Promise.all(Array.from({ length: 50 }, () => post(alice, split(alice.agentId), { 'idempotency-key': key })));
    const ids = new Set(results.map((r) => r.json().splitId));
    expect(results.every((r) => r.statusCode === 200 || r.statusCode === 201)).toBe(true);
    expect(results.filter((r) => r.statusCode === 201)).toHaveLength(1);
    expect(ids.size).toBe(1);
    const after = await counts(t);
    expect(after.splits - before.splits).toBe(1);
    expect(after.recipients - before.recipients).toBe(3);
    const paid = async () => Promise.all([aliceWallet, A, B, C].map((x) => balanceOf(t, x)));
    const expected = [paying! - 100_000_001, a! + 33_340_001, b! + 33_330_000, c! + 33_330_000];
    expect(await paid()).toEqual(expected);
    expect(await t.platform.services.ledger.audit()).toEqual([]);
    // a later repeat answers the same split with its recorded amounts
    const again = await post(alice, split(alice.agentId), { 'idempotency-key': key });
    expect(again.statusCode).toBe(200);
    expect(again.json().splitId).toBe([...ids][0]);
    expect(again.json().recipients[0].amountMicros).toBe(33_340_001);
    // the same key with another request is refused, nothing written
    const other = await post(alice, split(alice.agentId, { totalAmount: '5' }), { 'idempotency-key': key });
    expect(other.statusCode).toBe(409);
    expect(await counts(t)).toEqual(after);
    expect(await paid()).toEqual(expected); // neither the repeat nor the refused request moved money
    // keys are per user: bob's same key is his own split
    const bobs = await post(bob, split(bob.agentId), { 'idempotency-key': key });
    expect(bobs.statusCode).toBe(201);
  });

  it('without a key each request is its own split', async () => {
    const before = await counts(t);
    const [x, y] = await Promise.all([post(alice, split(alice.agentId)), post(alice, split(alice.agentId))]);
    expect(x.json().splitId).not.toBe(y.json().splitId);
    expect((await counts(t)).splits - before.splits).toBe(2);
  });

  it("refuses another user's agent (403) and an unknown agent (404), nothing written", async () => {
    const before = await counts(t);
    const other = await post(alice, { ...split(bob.agentId), userId: bob.id });
    expect(other.statusCode).toBe(403);
    expect(other.json().error).toEqual(expect.any(String));
    expect((await post(alice, split('no-such-agent'))).statusCode).toBe(404);
    expect((await as(t, null, { method: 'POST', url: '/api/underground/splits', payload: split(alice.agentId) })).statusCode).toBe(401);
    expect(await counts(t)).toEqual(before);
  });

  it.each([
    ['agentId missing', { agentId: undefined }, /agentId is required/],
    ['name missing', { name: undefined }, /name is required/],
    ['totalAmount missing', { totalAmount: undefined }, /totalAmount is required/],
    ['totalAmount zero', { totalAmount: '0' }, /totalAmount must be above 0/],
    ['totalAmount not a decimal', { totalAmount: 'ten' }, /totalAmount must be a decimal string/],
    ['totalAmount a number', { totalAmount: 10 }, /totalAmount must be a decimal string/],
    ['recipients missing', { recipients: undefined }, /recipients is required/],
    ['recipients empty', { recipients: [] }, /recipients must not be empty/],
    ['recipients not an array', { recipients: 'A' }, /recipients must be an array/],
    ['address malformed', { recipients: [{ address: '0x12', share: 100 }] }, /address must be 0x/],
    ['share missing', { recipients: [{ address: A }] }, /numeric share/],
    [
      'share zero',
      {
        recipients: [
          { address: A, share: 0 },
          { address: B, share: 100 },
        ],
      },
      /share must be a percentage above 0/,
    ],
    [
      'share negative',
      {
        recipients: [
          { address: A, share: -10 },
          { address: B, share: 110 },
        ],
      },
      /share must be a percentage above 0/,
    ],
    [
      'share 3 decimals',
      {
        recipients: [
          { address: A, share: 33.333 },
          { address: B, share: 66.667 },
        ],
      },
      /at most 2 decimals/,
    ],
    [
      'shares under 100',
      {
        recipients: [
          { address: A, share: 50 },
          { address: B, share: 49.99 },
        ],
      },
      /sum to exactly 100 \(they sum to 99.99\)/,
    ],
    [
      'shares over 100',
      {
        recipients: [
          { address: A, share: 60 },
          { address: B, share: 50 },
        ],
      },
      /sum to exactly 100/,
    ],
    [
      'duplicate address',
      {
        recipients: [
          { address: A, share: 50 },
          { address: A.toUpperCase().replace('0X', '0x'), share: 50 },
        ],
      },
      /only once/,
    ],
  ])('400 for %s, nothing written', async (_label, over, message) => {
    const before = await counts(t);
    const res = await post(alice, split(alice.agentId, over));
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(message);
    expect(await counts(t)).toEqual(before);
  });

  it('400 for a malformed Idempotency-Key', async () => {
    const res = await post(alice, split(alice.agentId), { 'idempotency-key': 'x'.repeat(201) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatch(/Idempotency-Key/);
  });
});
