/**
 * The money tables are the owner connection's alone (migration 070, docs/payments.md "Who may
 * touch the money tables"): the request login role (platform_request) and the role requests run as
 * (platform_app) see no row of ledger_entries, wallet_balances, payment_sessions, mpp_payments or
 * billing_events and are refused every INSERT, UPDATE and DELETE; the owner keeps working.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/client.ts';
import { ensureOwnerRole } from '../../src/db/roles.ts';
import { createLedgerService } from '../../src/domains/payments/ledger/ledger.service.ts';
import { sha256 } from '../../src/lib/crypto.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

// the same passwords as test/db/least-privilege.test.ts: the roles are cluster-wide and both files
// may (re)set them at the same time
const OWNER_PASSWORD = 'owner-test-password';
const REQUEST_PASSWORD = 'request-test-password';

const ADDRESS = `0x${'12'.repeat(20)}`;
const OTHER = `0x${'34'.repeat(20)}`;

let t: TestDatabase;
let owner: Db;
let requestUrl: string;
let userId: string;

/** One statement per table and kind of change, each valid for the owner. */
const writes: Record<string, string[]> = {
  ledger_entries: [
    `INSERT INTO ledger_entries (kind, address, wallet_delta, event_id, source) VALUES ('credit', '${OTHER}', 5000000000, 'minted-by-request-role', 'x')`,
    `UPDATE ledger_entries SET source = 'x'`,
    `DELETE FROM ledger_entries`,
  ],
  wallet_balances: [
    `INSERT INTO wallet_balances (address, balance_micros) VALUES ('${OTHER}', 0)`,
    `UPDATE wallet_balances SET updated_at = now()`,
    `DELETE FROM wallet_balances WHERE balance_micros = 0`,
  ],
  payment_sessions: [
    `INSERT INTO payment_sessions (token_hash, address, deposit_micros, expires_at) VALUES ('\\x${'00'.repeat(32)}', '${OTHER}', 1, now())`,
    `UPDATE payment_sessions SET expires_at = now() + interval '1 year'`,
    `DELETE FROM payment_sessions WHERE false`,
  ],
  mpp_payments: [
    `INSERT INTO mpp_payments (challenge_nonce, tx_hash, credential_hash, amount_micros, plugin) VALUES ('n', '0x${'ab'.repeat(32)}', '\\x${'01'.repeat(32)}', 1, 'agent')`,
    `UPDATE mpp_payments SET plugin = 'x' WHERE false`,
    `DELETE FROM mpp_payments WHERE false`,
  ],
  billing_events: [
    `INSERT INTO billing_events (event_id, type) VALUES ('evt_forged', 'checkout.session.completed')`,
    `UPDATE billing_events SET type = 'x'`,
    `DELETE FROM billing_events`,
  ],
};
const TABLES = Object.keys(writes);

beforeAll(async () => {
  t = await createTestDatabase();
  // the platform's roles on this database: platform_owner owns it, platform_request may only be platform_app
  const roles = await ensureOwnerRole(t.url, OWNER_PASSWORD, REQUEST_PASSWORD);
  requestUrl = roles.requestUrl;
  owner = createDb(roles.ownerUrl, { poolSize: 2, requestConnectionString: requestUrl });
  // a row in every money table, written the way the platform writes them (owner connection)
  userId = (
    await owner.kysely
      .insertInto('users')
      .values({ email: 'money@example.com', name: 'm', referral_code: `M-${randomBytes(4).toString('hex').toUpperCase()}` })
      .returning('id')
      .executeTakeFirstOrThrow()
  ).id;
  const ledger = createLedgerService({ db: owner });
  await ledger.credit({ address: ADDRESS, amountMicros: 1_000_000, eventId: 'evt_seed', source: 'test' });
  await owner.kysely.transaction().execute(async (trx) => {
    const id = (
      await sql<{ id: string }>`INSERT INTO payment_sessions (token_hash, address, user_id, deposit_micros, expires_at)
        VALUES (${sha256('ps_seed')}, ${ADDRESS}, ${userId}, 100000, now() + interval '1 hour') RETURNING id`.execute(trx)
    ).rows[0]!.id;
    await sql`INSERT INTO ledger_entries (kind, address, session_id, wallet_delta, session_delta, source)
      VALUES ('session_open', ${ADDRESS}, ${id}, -100000, 100000, 'session_open')`.execute(trx);
  });
  await sql`INSERT INTO mpp_payments (challenge_nonce, tx_hash, credential_hash, amount_micros, plugin)
    VALUES ('seed', ${`0x${'cd'.repeat(32)}`}, ${sha256('seed')}, 10000, 'agent')`.execute(owner.kysely);
  await sql`INSERT INTO billing_events (event_id, type, user_id) VALUES ('evt_billing_seed', 'x', ${userId})`.execute(owner.kysely);
});

afterAll(async () => {
  await owner?.close();
  await t?.drop();
});

async function asRequestLogin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: requestUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('the request role and the money tables', () => {
  it('the owner sees the seeded rows (the test would prove nothing otherwise)', async () => {
    for (const table of TABLES) {
      const r = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(owner.kysely);
      expect(r.rows[0]!.n, table).toBeGreaterThan(0);
    }
  });

  it('platform_request (its own login, after RESET ROLE) may neither read nor write them', async () => {
    await asRequestLogin(async (c) => {
      await c.query('RESET ROLE');
      expect((await c.query('SELECT current_user AS u')).rows[0].u).toBe('platform_request');
      for (const table of TABLES) {
        // no right to read at all (migrate.ts revokes it); row-level security would show no row anyway
        await expect(c.query(`SELECT count(*)::int AS n FROM ${table}`), table).rejects.toMatchObject({ code: '42501' });
        for (const statement of writes[table]!) {
          await expect(c.query(statement), statement).rejects.toMatchObject({ code: '42501' });
        }
      }
    });
  });

  it('a request transaction (platform_app with a user context) may neither read nor write them', async () => {
    for (const table of TABLES) {
      await expect(
        owner.withUser(userId, (trx) => sql`SELECT * FROM ${sql.table(table)}`.execute(trx)),
        table,
      ).rejects.toMatchObject({ code: '42501' });
      for (const statement of writes[table]!) {
        await expect(
          owner.withUser(userId, (trx) => sql.raw(statement).execute(trx)),
          statement,
        ).rejects.toMatchObject({ code: '42501' });
      }
    }
  });

  it('nothing changed, and the owner connection still moves money (journal trigger included)', async () => {
    const ledger = createLedgerService({ db: owner });
    expect(await ledger.balance(ADDRESS)).toBe(900_000);
    expect(await ledger.balance(OTHER)).toBe(0);
    expect((await ledger.credit({ address: OTHER, amountMicros: 5, eventId: 'evt_owner', source: 'test' })).credited).toBe(true);
    expect(await ledger.debit({ address: OTHER, amountMicros: 5, reference: 'ref_owner', source: 'test' })).toEqual({
      debited: true,
      balanceMicros: 0,
    });
    expect(await ledger.audit()).toEqual([]);
  });
});
