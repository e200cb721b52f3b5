/**
 * Row-level security is proved, not assumed (docs/architecture.md "Tests"; §5 "the database user context is
 * set so every query in the request is limited to that user's rows").
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

let t: TestDatabase;
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await createTestDatabase();
  const ins = (email: string, code: string) =>
    t.db.kysely
      .insertInto('users')
      .values({ email, name: email, password_hash: null, referral_code: code })
      .returning('id')
      .executeTakeFirstOrThrow();
  alice = (await ins('alice@example.com', 'ALICE')).id;
  bob = (await ins('bob@example.com', 'BOB')).id;
  for (const [user, n] of [
    [alice, 1],
    [bob, 2],
  ] as const) {
    await t.db.kysely
      .insertInto('sessions')
      .values({ user_id: user, token_hash: Buffer.alloc(32, n), expires_at: new Date(Date.now() + 60_000), user_agent: null, ip: null })
      .execute();
  }
});
afterAll(() => t.drop());

describe('row-level security', () => {
  it('request queries run as a role that is neither superuser nor owner and has no BYPASSRLS', async () => {
    const row = await t.db.withUser(
      alice,
      async (trx) =>
        (
          await sql<{ rolname: string; rolsuper: boolean; rolbypassrls: boolean }>`
        select rolname, rolsuper, rolbypassrls from pg_roles where rolname = current_user`.execute(trx)
        ).rows[0],
    );
    expect(row).toEqual({ rolname: 'platform_app', rolsuper: false, rolbypassrls: false });
  });

  it('a query without user context sees no rows of per-user tables', async () => {
    const rows = await t.db.withoutUser(async (trx) => ({
      users: await trx.selectFrom('users').selectAll().execute(),
      sessions: await trx.selectFrom('sessions').selectAll().execute(),
    }));
    expect(rows.users).toHaveLength(0);
    expect(rows.sessions).toHaveLength(0);
  });

  it("a query as user A sees A's rows and never B's", async () => {
    const seen = await t.db.withUser(alice, async (trx) => ({
      users: await trx.selectFrom('users').select('id').execute(),
      sessions: await trx.selectFrom('sessions').select('user_id').execute(),
      bobById: await trx.selectFrom('users').select('id').where('id', '=', bob).execute(),
    }));
    expect(seen.users.map((r) => r.id)).toEqual([alice]);
    expect(seen.sessions.map((r) => r.user_id)).toEqual([alice]);
    expect(seen.bobById).toHaveLength(0);
  });

  it('user A cannot update, delete or create rows of user B', async () => {
    await t.db.withUser(alice, async (trx) => {
      const upd = await trx.updateTable('users').set({ name: 'hacked' }).where('id', '=', bob).executeTakeFirst();
      expect(upd.numUpdatedRows).toBe(0n);
      const del = await trx.deleteFrom('sessions').where('user_id', '=', bob).executeTakeFirst();
      expect(del.numDeletedRows).toBe(0n);
    });
    await expect(
      t.db.withUser(alice, (trx) =>
        trx
          .insertInto('sessions')
          .values({ user_id: bob, token_hash: Buffer.alloc(32, 9), expires_at: new Date(), user_agent: null, ip: null })
          .execute(),
      ),
    ).rejects.toThrow(/row-level security/);
    const bobRow = await t.db.kysely.selectFrom('users').select('name').where('id', '=', bob).executeTakeFirstOrThrow();
    expect(bobRow.name).toBe('bob@example.com');
  });

  it('the user context does not leak to the next transaction on a pooled connection', async () => {
    await t.db.withUser(alice, async () => undefined);
    const after = await t.db.withoutUser((trx) => trx.selectFrom('users').select('id').execute());
    expect(after).toHaveLength(0);
    const role = await sql<{ r: string }>`select current_user as r`.execute(t.db.kysely);
    expect(role.rows[0]!.r).not.toBe('platform_app');
  });

  it('emails are unique case-insensitively in the database itself', async () => {
    await expect(
      t.db.kysely
        .insertInto('users')
        .values({ email: 'ALICE@example.com'.toLowerCase(), name: 'x', password_hash: null, referral_code: 'X1' })
        .execute(),
    ).rejects.toMatchObject({ code: '23505' });
    // and mixed case cannot sneak past the lower-case check either
    await expect(
      t.db.kysely.insertInto('users').values({ email: 'Carol@example.com', name: 'x', password_hash: null, referral_code: 'X2' }).execute(),
    ).rejects.toMatchObject({ code: '23514' });
  });
});
