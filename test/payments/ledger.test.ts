/**
 * The ledger's invariants (migration 020, docs/payments.md) hold in PostgreSQL whatever code
 * path writes: these tests write through the service and also try raw SQL as both the owner and
 * the request role.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLedgerService, type LedgerService } from '../../src/domains/payments/ledger/ledger.service.ts';
import { microsToUsd, usdToMicros } from '../../src/lib/money.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let database: TestDatabase;
let ledger: LedgerService;
const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;

beforeAll(async () => {
  database = await createTestDatabase();
  ledger = createLedgerService({ db: database.db });
});
afterAll(async () => {
  expect(await ledger.audit()).toEqual([]);
  await database.drop();
});

describe('money', () => {
  it('converts USD strings to integer micros and back without floats', () => {
    expect(usdToMicros('0.05')).toBe(50_000);
    expect(usdToMicros(1.5)).toBe(1_500_000);
    expect(usdToMicros('0.1234567')).toBeUndefined();
    expect(usdToMicros('-1')).toBeUndefined();
    expect(usdToMicros('abc')).toBeUndefined();
    expect(microsToUsd(50_000)).toBe('0.05');
    expect(microsToUsd(0)).toBe('0.00');
    expect(microsToUsd(1_234_567)).toBe('1.234567');
  });
});

describe('credit', () => {
  it('credits once per event id, also when the same event arrives 20 times in parallel', async () => {
    const a = addr(1);
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        ledger.credit({ address: a.toUpperCase().replace('0X', '0x'), amountMicros: 5_000_000, eventId: 'evt_1', source: 'test' }),
      ),
    );
    expect(results.filter((r) => r.credited)).toHaveLength(1);
    expect(await ledger.balance(a)).toBe(5_000_000);
    await ledger.credit({ address: a, amountMicros: 1_000_000, eventId: 'evt_2', source: 'test' });
    expect(await ledger.balance(a)).toBe(6_000_000);
  });

  it('refuses bad input with 400 and changes nothing', async () => {
    await expect(ledger.credit({ address: '0x12', amountMicros: 1, eventId: 'x', source: 't' })).rejects.toMatchObject({ status: 400 });
    await expect(ledger.credit({ address: addr(2), amountMicros: 0.5, eventId: 'x', source: 't' })).rejects.toMatchObject({ status: 400 });
    await expect(ledger.credit({ address: addr(2), amountMicros: -5, eventId: 'x', source: 't' })).rejects.toMatchObject({ status: 400 });
    await expect(ledger.credit({ address: addr(2), amountMicros: 5, eventId: '', source: 't' })).rejects.toMatchObject({ status: 400 });
    expect(await ledger.balance(addr(2))).toBe(0);
  });
});

describe('debit', () => {
  it('never takes a balance below zero, under 50 concurrent debits', async () => {
    const a = addr(3);
    await ledger.credit({ address: a, amountMicros: 10_000_000, eventId: 'evt_3', source: 'test' });
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => ledger.debit({ address: a, amountMicros: 1_000_000, reference: `ref_${i}`, source: 'test' })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(10);
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(rejected).toHaveLength(40);
    for (const r of rejected) expect(r.reason).toMatchObject({ status: 402, message: 'insufficient_balance' });
    expect(await ledger.balance(a)).toBe(0);
  });

  it('debits once per reference', async () => {
    const a = addr(4);
    await ledger.credit({ address: a, amountMicros: 3_000_000, eventId: 'evt_4', source: 'test' });
    const r1 = await ledger.debit({ address: a, amountMicros: 1_000_000, reference: 'refund_1', source: 'test' });
    const r2 = await ledger.debit({ address: a, amountMicros: 1_000_000, reference: 'refund_1', source: 'test' });
    expect([r1.debited, r2.debited]).toEqual([true, false]);
    expect(await ledger.balance(a)).toBe(2_000_000);
  });
});

describe('database invariants (any code path)', () => {
  const k = () => database.db.kysely;
  it('the journal is append-only', async () => {
    await expect(sql`UPDATE ledger_entries SET wallet_delta = 999999999`.execute(k())).rejects.toThrow(/append-only/);
    await expect(sql`DELETE FROM ledger_entries`.execute(k())).rejects.toThrow(/append-only/);
    await expect(sql`TRUNCATE ledger_entries CASCADE`.execute(k())).rejects.toThrow(/append-only/);
  });

  it('balances cannot be changed except through the journal, also as the request role', async () => {
    await expect(sql`UPDATE wallet_balances SET balance_micros = balance_micros + 1`.execute(k())).rejects.toThrow(
      /only through ledger_entries/,
    );
    await expect(sql`INSERT INTO wallet_balances (address, balance_micros) VALUES (${addr(9)}, 100)`.execute(k())).rejects.toThrow(
      /only through ledger_entries/,
    );
    await expect(sql`DELETE FROM wallet_balances`.execute(k())).rejects.toThrow(/only through ledger_entries/);
    // a request transaction may not touch the table at all (migration 070)
    await expect(database.db.withoutUser((trx) => sql`UPDATE wallet_balances SET balance_micros = 1`.execute(trx))).rejects.toThrow(
      /owner connection only|permission denied/,
    );
  });

  it('a raw journal row that would overdraw is refused by the CHECK', async () => {
    await expect(
      sql`INSERT INTO ledger_entries (kind, address, wallet_delta, event_id) VALUES ('debit', ${addr(5)}, -1, 'raw')`.execute(k()),
    ).rejects.toThrow(/check constraint/);
  });

  it('a duplicate processor event id is refused by the UNIQUE constraint', async () => {
    await expect(
      sql`INSERT INTO ledger_entries (kind, address, wallet_delta, event_id) VALUES ('credit', ${addr(1)}, 1, 'evt_1')`.execute(k()),
    ).rejects.toThrow(/duplicate key/);
  });
});
