/**
 * Least privilege in PostgreSQL (docs/security.md "Database roles"):
 * - the platform connects as a non-superuser owner role (the embedded server's superuser only
 *   creates it), and a database an earlier version created as the superuser is handed over;
 * - the request role may change only `users.name` / `updated_at` (not plan, admin right, credits…);
 * - an agent's rows must carry the agent's own user (composite foreign keys), and the migration
 *   that adds them refuses a database where they already disagree.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createDb } from '../../src/db/client.ts';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.ts';
import { connectsAsPrivileged, ensureOwnerRole, OWNER_ROLE, REQUEST_ROLE } from '../../src/db/roles.ts';
import { withDatabase } from '../global-setup.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

const admin = () => new pg.Client({ connectionString: inject('dbAdminUrl') });
async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `lp_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const a = admin();
  await a.connect();
  await a.query(`CREATE DATABASE "${name}"`);
  await a.end();
  return {
    url: withDatabase(inject('dbAdminUrl'), name),
    async drop() {
      const b = admin();
      await b.connect();
      await b.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {});
      await b.end();
    },
  };
}

const USER = (n: number) => ({
  email: `lp${n}@example.com`,
  name: `lp${n}`,
  referral_code: `LP-${n}-${Math.random().toString(36).slice(2, 8).toUpperCase()}`,
});

describe('row rules on a migrated database', () => {
  let t: TestDatabase;
  let a: string;
  let b: string;
  let agentOfA: string;
  beforeAll(async () => {
    t = await createTestDatabase();
    a = (await t.db.kysely.insertInto('users').values(USER(1)).returning('id').executeTakeFirstOrThrow()).id;
    b = (await t.db.kysely.insertInto('users').values(USER(2)).returning('id').executeTakeFirstOrThrow()).id;
    agentOfA = 'agent-of-a';
    await t.db.kysely.insertInto('agents').values({ id: agentOfA, user_id: a, name: 'A', subdomain: 'a1', url: 'http://a1' }).execute();
  });
  afterAll(() => t?.drop());

  it('the request role may rename itself but not change its plan, admin right, credits or subscription', async () => {
    await t.db.withUser(a, (trx) =>
      trx.updateTable('users').set({ name: 'renamed', updated_at: new Date() }).where('id', '=', a).execute(),
    );
    for (const change of [
      { plan: 'network' as const },
      { is_admin: true },
      { credits: 1000 },
      { subscription_status: 'active' },
      { email: 'x@example.com' },
    ]) {
      await expect(
        t.db.withUser(a, (trx) => trx.updateTable('users').set(change).where('id', '=', a).execute()),
        JSON.stringify(change),
      ).rejects.toMatchObject({ code: '42501' });
    }
    const row = await t.db.kysely
      .selectFrom('users')
      .select(['name', 'plan', 'is_admin', 'credits'])
      .where('id', '=', a)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ name: 'renamed', plan: 'solo', is_admin: false, credits: 0 });
  });

  it("a row filed under another user's agent is refused by the database, from any connection", async () => {
    // as the owner (system code): the foreign key still holds
    await expect(
      t.db.kysely.insertInto('agent_messages').values({ agent_id: agentOfA, user_id: b, sender: 'user', content: 'x' }).execute(),
    ).rejects.toMatchObject({ code: '23503' });
    // as user B through row-level security (user_id = B passes the policy): the key refuses it
    await expect(
      t.db.withUser(b, (trx) =>
        trx.insertInto('agent_messages').values({ agent_id: agentOfA, user_id: b, sender: 'user', content: 'x' }).execute(),
      ),
    ).rejects.toMatchObject({ code: '23503' });
    for (const table of ['agent_credentials', 'deployments', 'agent_watchdog', 'agent_watchdog_events'] as const) {
      const fks = await sql<{
        def: string;
      }>`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ${table}::regclass AND contype = 'f'`.execute(
        t.db.kysely,
      );
      expect(
        fks.rows.map((r) => r.def),
        table,
      ).toContain('FOREIGN KEY (agent_id, user_id) REFERENCES agents(id, user_id) ON DELETE CASCADE');
    }
    // the owner's own rows are fine, and deleting the agent still removes them
    await t.db.kysely.insertInto('agent_messages').values({ agent_id: agentOfA, user_id: a, sender: 'user', content: 'ok' }).execute();
    await t.db.kysely.deleteFrom('agents').where('id', '=', agentOfA).execute();
    expect((await t.db.kysely.selectFrom('agent_messages').select('id').where('agent_id', '=', agentOfA).execute()).length).toBe(0);
  });
});

it('the composite-key migration refuses a database whose rows already disagree, naming the table', async () => {
  const d = await freshDatabase();
  const before = mkdtempSync(join(tmpdir(), 'migrations-'));
  try {
    for (const f of readdirSync(MIGRATIONS_DIR).filter((f) => f < '060')) cpSync(join(MIGRATIONS_DIR, f), join(before, f));
    await migrate(d.url, before);
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    try {
      const ids = [];
      for (const n of [3, 4])
        ids.push(
          (await c.query(`INSERT INTO users (email, name, referral_code) VALUES ($1, $2, $3) RETURNING id`, Object.values(USER(n)))).rows[0]
            .id,
        );
      await c.query(`INSERT INTO agents (id, user_id, name, subdomain, url) VALUES ('agent-old', $1, 'x', 's', 'u')`, [ids[0]]);
      await c.query(`INSERT INTO agent_messages (agent_id, user_id, sender, content) VALUES ('agent-old', $1, 'user', 'misfiled')`, [
        ids[1],
      ]);
    } finally {
      await c.end();
    }
    await expect(migrate(d.url)).rejects.toThrow(/agent_messages has rows whose user_id differs/);
  } finally {
    rmSync(before, { recursive: true, force: true });
    await d.drop();
  }
});

it('starts on one server set the roles up at the same time without refusing each other (web beside backend)', async () => {
  const d = await freshDatabase();
  try {
    await migrate(d.url);
    // concurrent ALTER ROLE / GRANT on one role fail with "tuple concurrently updated" unless they take turns
    const urls = await Promise.all(Array.from({ length: 6 }, () => ensureOwnerRole(d.url, 'owner-test-password', 'request-test-password')));
    expect(new Set(urls.map((u) => u.ownerUrl)).size).toBe(1);
    expect(await connectsAsPrivileged(urls[0]!.ownerUrl)).toEqual({ role: OWNER_ROLE, superuser: false, bypassRls: false });
  } finally {
    await d.drop();
  }
});

it('the owner role: not a superuser, owns what an earlier version created as the superuser, migrates and serves requests', async () => {
  const d = await freshDatabase();
  try {
    // an earlier version: everything migrated (and owned) by the superuser
    await migrate(d.url);
    const { ownerUrl, requestUrl } = await ensureOwnerRole(d.url, 'owner-test-password', 'request-test-password');
    expect(await ensureOwnerRole(d.url, 'owner-test-password')).toBe(ownerUrl); // idempotent
    expect(await connectsAsPrivileged(requestUrl)).toEqual({ role: REQUEST_ROLE, superuser: false, bypassRls: false });
    expect(await connectsAsPrivileged(ownerUrl)).toEqual({ role: OWNER_ROLE, superuser: false, bypassRls: false });
    const c = new pg.Client({ connectionString: d.url });
    await c.connect();
    const foreign = await c.query(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'v') AND pg_get_userbyid(c.relowner) <> $1`,
      [OWNER_ROLE],
    );
    expect(foreign.rows).toEqual([]);
    await c.end();
    // the owner migrates (nothing left to apply) and the app works through it, RLS included
    expect((await migrate(ownerUrl)).applied).toEqual([]);
    const db = createDb(ownerUrl, { poolSize: 2 });
    try {
      const id = (await db.kysely.insertInto('users').values(USER(5)).returning('id').executeTakeFirstOrThrow()).id;
      const mine = await db.withUser(id, (trx) => trx.selectFrom('users').select('email').execute());
      expect(mine).toEqual([{ email: USER(5).email }]);
      expect(await db.withoutUser((trx) => trx.selectFrom('users').select('id').execute())).toEqual([]);
      // on the owner's pool, SQL that resets the role inside a request gets the owner's rights…
      const escalate = (d2: typeof db) =>
        d2.withUser(id, async (trx) => {
          await sql`RESET ROLE`.execute(trx);
          await trx.updateTable('users').set({ plan: 'network' }).where('id', '=', id).execute();
        });
      await escalate(db);
      // …on the request role's own pool it stays a member of platform_app and is refused
      const split = createDb(ownerUrl, { poolSize: 2, requestConnectionString: requestUrl });
      try {
        await expect(escalate(split)).rejects.toMatchObject({ code: '42501' });
        expect(await split.withUser(id, (trx) => trx.selectFrom('users').select('email').execute())).toEqual([{ email: USER(5).email }]);
      } finally {
        await split.close();
      }
    } finally {
      await db.close();
    }
  } finally {
    await d.drop();
  }
});
