/**
 * docs/architecture.md rule 6 / §2 Wallet / §4.5: trading keys and wallet private keys are encrypted at rest.
 * Reads every row of every table in the database directly and finds neither secret in plaintext
 * (nor hex/base64 variants of the private key), while the sealed values do decrypt to them.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../../src/lib/crypto.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform({ REGISTER_RATE_LIMIT: '1000' });
});
afterAll(() => t?.close());

/** Every row of every table in the public schema, as JSON text. */
async function dumpDatabase(): Promise<string[]> {
  const tables = await sql<{ tablename: string }>`select tablename from pg_tables where schemaname = 'public'`.execute(
    t.database.db.kysely,
  );
  const out: string[] = [];
  for (const { tablename } of tables.rows) {
    const rows = await sql<{ j: string }>`select to_jsonb(x)::text as j from ${sql.table(tablename)} x`.execute(t.database.db.kysely);
    out.push(...rows.rows.map((r) => `${tablename}: ${r.j}`));
  }
  return out;
}

describe('secrets at rest', () => {
  it('no plaintext trading key or wallet private key anywhere in the database', async () => {
    const u = await signUp(t.web);
    const tradingKey = 'tk_plaintext_canary_5f1e2d3c4b5a';
    expect(
      (await t.web.inject({ method: 'POST', url: '/api/user/trading-key', headers: { cookie: u.cookie }, payload: { apiKey: tradingKey } }))
        .statusCode,
    ).toBe(200);
    expect(
      (await t.web.inject({ method: 'POST', url: '/api/wallet', headers: { cookie: u.cookie }, payload: { action: 'create' } })).statusCode,
    ).toBe(200);

    // the sealed values really are the secrets (so the search below looks for the right strings)
    const sealedTrading = await t.database.db.kysely
      .selectFrom('trading_keys')
      .select('encrypted_key')
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    expect(decryptSecret(TEST_SECRETS.secretsEncryptionKey, sealedTrading.encrypted_key)).toBe(tradingKey);
    const sealedWallet = await t.database.db.kysely
      .selectFrom('session_wallets')
      .select('encrypted_private_key')
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    const privateKey = decryptSecret(TEST_SECRETS.walletEncryptionKey, sealedWallet.encrypted_private_key);
    expect(privateKey).toMatch(/^0x[0-9a-f]{64}$/);

    const dump = (await dumpDatabase()).join('\n');
    expect(dump).toContain('session_wallets'); // the dump covers the tables that hold the secrets
    expect(dump).toContain('trading_keys');
    const hex = privateKey.slice(2);
    const needles = [
      tradingKey,
      hex,
      hex.toUpperCase(),
      Buffer.from(hex, 'hex').toString('base64'),
      Buffer.from(hex, 'hex').toString('base64url'),
    ];
    for (const needle of needles) expect(dump.includes(needle), `found ${needle.slice(0, 8)}… in the database`).toBe(false);
  });

  it('a wrong encryption key cannot open the sealed values (authenticated encryption)', async () => {
    const row = await t.database.db.kysely.selectFrom('trading_keys').select('encrypted_key').executeTakeFirstOrThrow();
    expect(() => decryptSecret(TEST_SECRETS.walletEncryptionKey, row.encrypted_key)).toThrow();
  });

  it('the database refuses a value that is not in the sealed format (a plaintext write fails loudly)', async () => {
    const u = await signUp(t.web);
    await expect(
      t.database.db.kysely.insertInto('trading_keys').values({ user_id: u.id, encrypted_key: 'plaintext-key' }).execute(),
    ).rejects.toMatchObject({ code: '23514' });
    await expect(
      t.database.db.kysely
        .insertInto('session_wallets')
        .values({ user_id: u.id, address: `0x${'1'.repeat(40)}`, encrypted_private_key: `0x${'a'.repeat(64)}` })
        .execute(),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('row-level security: trading keys are invisible without user context and to other users', async () => {
    const other = await signUp(t.web);
    const none = await t.database.db.withoutUser((trx) => trx.selectFrom('trading_keys').selectAll().execute());
    expect(none).toHaveLength(0);
    const asOther = await t.database.db.withUser(other.id, (trx) => trx.selectFrom('trading_keys').selectAll().execute());
    expect(asOther).toHaveLength(0);
  });
});
